-- The PostgreSQL store's schema (schema_version 1), compiled into sagad and
-- run by every PostgresStore::Open under an advisory lock: each statement is
-- idempotent. A change that is not must bump kPgSchemaVersion and migrate
-- explicitly in PostgresStore::Open.
CREATE TABLE IF NOT EXISTS sagad_instances (
  id text PRIMARY KEY,
  saga text NOT NULL,
  status text NOT NULL,
  waiting text,
  version bigint NOT NULL,
  finished boolean NOT NULL,
  snapshot text NOT NULL);
CREATE INDEX IF NOT EXISTS sagad_instances_status ON sagad_instances (status, id);
CREATE INDEX IF NOT EXISTS sagad_instances_saga ON sagad_instances (saga, id);
CREATE INDEX IF NOT EXISTS sagad_instances_waiting ON sagad_instances (waiting, id)
  WHERE waiting IS NOT NULL;
CREATE INDEX IF NOT EXISTS sagad_instances_unfinished ON sagad_instances (id) WHERE NOT finished;
CREATE TABLE IF NOT EXISTS sagad_events (
  instance_id text NOT NULL,
  seq bigint NOT NULL,
  data text NOT NULL,
  PRIMARY KEY (instance_id, seq));
CREATE TABLE IF NOT EXISTS sagad_operations (key text PRIMARY KEY, data text NOT NULL);
CREATE TABLE IF NOT EXISTS sagad_submissions (
  key text PRIMARY KEY,
  request_hash text NOT NULL,
  instance_id text NOT NULL,
  response_status int NOT NULL,
  response text NOT NULL,
  created_at bigint NOT NULL);
CREATE TABLE IF NOT EXISTS sagad_leases (
  instance_id text PRIMARY KEY,
  owner text NOT NULL,
  expires_at bigint NOT NULL,
  generation bigint NOT NULL);
CREATE TABLE IF NOT EXISTS sagad_outbox (
  seq bigserial PRIMARY KEY,
  instance_id text NOT NULL,
  message text NOT NULL);

CREATE OR REPLACE FUNCTION sagad_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
  $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- One group commit: a JSON array of writes, each {"kind": "create" |
-- "commit" | "response", ...}. Returns a JSON array with one answer per
-- write: "ok", "exists", "key_exists", "missing", "version:<stored>" or
-- "lease:<owner>:<generation>". A refused write changes nothing.
CREATE OR REPLACE FUNCTION sagad_apply(batch json) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  r json; snap json; sub json; ls json;
  answers text[] := '{}';
  w_id text; stored bigint; held record; done boolean;
BEGIN
  FOR r IN SELECT value FROM json_array_elements(batch) LOOP
    w_id := r->>'id';
    IF r->>'kind' = 'response' THEN
      UPDATE sagad_submissions SET response_status = (r->>'status')::int,
                                   response = (r->'response')::text
        WHERE key = w_id AND response_status = 0;
      IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM sagad_submissions WHERE key = w_id) THEN
        answers := answers || 'missing'::text;
      ELSE
        answers := answers || 'ok'::text;
      END IF;
      CONTINUE;
    END IF;
    snap := r->'snapshot';
    done := snap->>'status' IN ('COMPLETED', 'COMPENSATED');
    ls := r->'lease';
    IF r->>'kind' = 'create' THEN
      INSERT INTO sagad_instances (id, saga, status, waiting, version, finished, snapshot)
        VALUES (w_id, coalesce(snap->>'saga', ''), coalesce(snap->>'status', ''),
                snap->>'waiting_for', (snap->>'version')::bigint, done, snap::text)
        ON CONFLICT DO NOTHING;
      IF NOT FOUND THEN
        answers := answers || 'exists'::text;
        CONTINUE;
      END IF;
      sub := r->'submission';
      IF sub IS NOT NULL AND json_typeof(sub) = 'object' THEN
        INSERT INTO sagad_submissions (key, request_hash, instance_id, response_status, response,
                                       created_at)
          VALUES (sub->>'key', sub->>'request_hash', sub->>'instance_id',
                  (sub->>'response_status')::int, (sub->'response')::text,
                  (sub->>'created_at')::bigint)
          ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
          DELETE FROM sagad_instances WHERE id = w_id;
          answers := answers || 'key_exists'::text;
          CONTINUE;
        END IF;
      END IF;
      IF ls IS NOT NULL AND json_typeof(ls) = 'object' THEN
        INSERT INTO sagad_leases (instance_id, owner, expires_at, generation)
          VALUES (w_id, ls->>'owner', sagad_now_ms() + (ls->>'ttl_ms')::bigint,
                  (ls->>'generation')::bigint)
          ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner,
            expires_at = EXCLUDED.expires_at, generation = EXCLUDED.generation;
      END IF;
    ELSE
      IF ls IS NOT NULL AND json_typeof(ls) = 'object' THEN
        SELECT owner, generation INTO held FROM sagad_leases WHERE instance_id = w_id FOR SHARE;
        IF NOT FOUND OR held.owner <> ls->>'owner' OR held.generation <> (ls->>'generation')::bigint THEN
          answers := answers || ('lease:' || coalesce(held.owner, '') || ':' ||
                                 coalesce(held.generation, 0)::text);
          CONTINUE;
        END IF;
      END IF;
      UPDATE sagad_instances SET status = coalesce(snap->>'status', ''),
          waiting = snap->>'waiting_for', version = (snap->>'version')::bigint,
          finished = done, snapshot = snap::text
        WHERE id = w_id AND version = (r->>'expected_version')::bigint;
      IF NOT FOUND THEN
        SELECT version INTO stored FROM sagad_instances WHERE id = w_id;
        answers := answers || ('version:' || coalesce(stored::text, 'none'));
        CONTINUE;
      END IF;
      IF done THEN
        DELETE FROM sagad_leases WHERE instance_id = w_id;
      END IF;
      INSERT INTO sagad_operations (key, data)
        SELECT o->>'key', o::text FROM json_array_elements(r->'operations') o
        ON CONFLICT (key) DO UPDATE SET data = EXCLUDED.data;
    END IF;
    INSERT INTO sagad_events (instance_id, seq, data)
      SELECT w_id, (e->>'seq')::bigint, e::text FROM json_array_elements(r->'events') e;
    INSERT INTO sagad_outbox (instance_id, message)
      SELECT w_id, m.value::text FROM json_array_elements(r->'outbox') WITH ORDINALITY m
      ORDER BY m.ordinality;
    answers := answers || 'ok'::text;
  END LOOP;
  RETURN to_json(answers);
END $$;

-- Takes the leases of `ids` for `owner` (see Store::AcquireLease), judged
-- by the database clock. One row per id: taken, and the lease as it is.
CREATE OR REPLACE FUNCTION sagad_take_leases(ids json, new_owner text, ttl bigint, successor text)
RETURNS TABLE (lease_id text, taken boolean, lease_owner text, lease_expires bigint,
               lease_generation bigint) LANGUAGE plpgsql AS $$
DECLARE
  i text; l record; now_ms bigint;
BEGIN
  FOR i IN SELECT json_array_elements_text(ids) LOOP
    INSERT INTO sagad_leases VALUES (i, '', 0, 0) ON CONFLICT DO NOTHING;
    SELECT * INTO l FROM sagad_leases WHERE instance_id = i FOR UPDATE;
    now_ms := sagad_now_ms();
    IF l.owner <> '' AND l.owner <> new_owner AND l.expires_at > now_ms
       AND NOT (successor <> '' AND starts_with(l.owner, successor)) THEN
      RETURN QUERY SELECT i, false, l.owner, l.expires_at, l.generation;
      CONTINUE;
    END IF;
    UPDATE sagad_leases SET owner = new_owner, expires_at = now_ms + ttl,
        generation = CASE WHEN l.owner = new_owner THEN l.generation ELSE l.generation + 1 END
      WHERE instance_id = i
      RETURNING owner, expires_at, generation INTO l;
    RETURN QUERY SELECT i, true, l.owner, l.expires_at, l.generation;
  END LOOP;
END $$;
