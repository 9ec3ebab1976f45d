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
-- Search by a business key (GET /v1/instances?input.FIELD=VALUE): containment
-- on the input object.
CREATE INDEX IF NOT EXISTS sagad_instances_input
  ON sagad_instances USING gin (((snapshot::jsonb) -> 'input') jsonb_path_ops);
-- The same for a run's metadata (?metadata.FIELD=VALUE; a toolbox's
-- declared metadata.* search attributes).
CREATE INDEX IF NOT EXISTS sagad_instances_metadata
  ON sagad_instances USING gin (((snapshot::jsonb) -> 'metadata') jsonb_path_ops);
-- A submitter's own instances (GET /v1/instances as a submitter, ?owner=).
CREATE INDEX IF NOT EXISTS sagad_instances_owner
  ON sagad_instances (((snapshot::jsonb) ->> 'owner'), id);
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
-- Retention: finished instances by when they finished; operation records and
-- submission keys by instance.
ALTER TABLE sagad_instances ADD COLUMN IF NOT EXISTS updated_at bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS sagad_instances_finished_at ON sagad_instances (updated_at)
  WHERE finished;
ALTER TABLE sagad_operations ADD COLUMN IF NOT EXISTS instance_id text;
CREATE INDEX IF NOT EXISTS sagad_operations_instance ON sagad_operations (instance_id);
CREATE INDEX IF NOT EXISTS sagad_submissions_instance ON sagad_submissions (instance_id);
-- Downstream services an operator paused (shared by every coordinator).
CREATE TABLE IF NOT EXISTS sagad_services (name text PRIMARY KEY, paused boolean NOT NULL);
-- Who paused a service, why and since when (JSON; null once resumed).
ALTER TABLE sagad_services ADD COLUMN IF NOT EXISTS note text;
-- Saga definitions deployed over the API: immutable per version.
CREATE TABLE IF NOT EXISTS sagad_definitions (
  name text NOT NULL,
  version int NOT NULL,
  body text NOT NULL,
  PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS sagad_outbox (
  seq bigserial PRIMARY KEY,
  instance_id text NOT NULL,
  message text NOT NULL);
-- Declared search attributes (Store::DeclareSearchAttributesAsync): a
-- saga's or toolbox's fields ("customer", "metadata.agent") whose values
-- sagad_attributes holds for each of its instances, written once when the
-- instance is created (inputs and run metadata never change), so that no
-- transition pays for them. `complete` once the instances stored before
-- the declaration have their rows too (sagad_backfill_attributes): only
-- then does a search use the table.
CREATE TABLE IF NOT EXISTS sagad_search_attributes (
  saga text NOT NULL,
  name text NOT NULL,
  complete boolean NOT NULL DEFAULT false,
  PRIMARY KEY (saga, name));
CREATE TABLE IF NOT EXISTS sagad_attributes (
  name text NOT NULL,
  value text NOT NULL,
  instance_id text NOT NULL,
  PRIMARY KEY (name, value, instance_id));
CREATE INDEX IF NOT EXISTS sagad_attributes_instance ON sagad_attributes (instance_id);

CREATE OR REPLACE FUNCTION sagad_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
  $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- What a search compares a field's value with: a string's text, or the JSON
-- text of a number, boolean or null; NULL for an object or an array (the
-- listing's filter says the same, and Matches in store.cc for LMDB).
CREATE OR REPLACE FUNCTION sagad_search_text(v jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT CASE jsonb_typeof(v) WHEN 'string' THEN v #>> '{}' WHEN 'object' THEN NULL
                                 WHEN 'array' THEN NULL ELSE v::text END $$;

-- The attribute rows of instance p_id for every field its saga declared
-- (none, and no parsing, when it declared none). A value longer than 1000
-- bytes is not indexed (a search for one does not use the table).
CREATE OR REPLACE FUNCTION sagad_put_attributes(p_id text, p_saga text, p_snapshot text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  doc jsonb;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM sagad_search_attributes WHERE saga = p_saga) THEN
    RETURN;
  END IF;
  doc := p_snapshot::jsonb;
  INSERT INTO sagad_attributes (name, value, instance_id)
    SELECT d.name, t.v, p_id FROM sagad_search_attributes d,
      LATERAL sagad_search_text(CASE WHEN starts_with(d.name, 'metadata.')
                                     THEN doc -> 'metadata' -> substr(d.name, 10)
                                     ELSE doc -> 'input' -> d.name END) AS t(v)
    WHERE d.saga = p_saga AND t.v IS NOT NULL AND octet_length(t.v) <= 1000
    ON CONFLICT DO NOTHING;
END $$;

-- The rows of up to n instances of p_saga after id p_after (in id order)
-- for the declared fields; the last id done, or NULL when none was left:
-- then the fields `names` are complete.
CREATE OR REPLACE FUNCTION sagad_backfill_attributes(p_saga text, p_after text, n int,
                                                     names text[])
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  r record;
  last text;
BEGIN
  FOR r IN SELECT id, snapshot FROM sagad_instances WHERE saga = p_saga AND id > p_after
           ORDER BY saga, id LIMIT n LOOP
    PERFORM sagad_put_attributes(r.id, p_saga, r.snapshot);
    last := r.id;
  END LOOP;
  IF last IS NULL THEN
    UPDATE sagad_search_attributes SET complete = true WHERE saga = p_saga AND name = ANY (names);
  END IF;
  RETURN last;
END $$;

-- One group commit: a JSON array of writes, parsed once into typed columns
-- (the snapshot travels as a JSON string, stored as is):
--   {"kind": "create" | "commit" | "response", "id", "expected_version",
--    "version", "saga", "status", "waiting", "finished", "snapshot",
--    "events": [...], "operations": [...], "outbox": [...],
--    "submission": {...} | null, "lease": {...} | null,
--    "response_status", "response" (kind "response": id is the key)}.
-- Returns a JSON array with one answer per write: "ok", "exists",
-- "key_exists", "missing", "version:<stored>" or "lease:<owner>:<generation>".
-- A refused write changes nothing.
CREATE OR REPLACE FUNCTION sagad_apply(batch json) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  w record;
  answers text[] := '{}';
  stored bigint; held record;
BEGIN
  FOR w IN SELECT * FROM json_to_recordset(batch) AS x(
      kind text, id text, expected_version bigint, version bigint, saga text, status text,
      waiting text, finished boolean, updated_at bigint, snapshot text, events json,
      operations json, outbox json,
      submission json, lease json, response_status int, response text) LOOP
    IF w.kind = 'response' THEN
      UPDATE sagad_submissions SET response_status = w.response_status, response = w.response
        WHERE key = w.id AND response_status = 0;
      IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM sagad_submissions WHERE key = w.id) THEN
        answers := answers || 'missing'::text;
      ELSE
        answers := answers || 'ok'::text;
      END IF;
      CONTINUE;
    END IF;
    IF w.kind = 'create' THEN
      INSERT INTO sagad_instances (id, saga, status, waiting, version, finished, updated_at,
                                   snapshot)
        VALUES (w.id, w.saga, w.status, w.waiting, w.version, w.finished, w.updated_at, w.snapshot)
        ON CONFLICT DO NOTHING;
      IF NOT FOUND THEN
        answers := answers || 'exists'::text;
        CONTINUE;
      END IF;
      IF w.submission IS NOT NULL THEN
        INSERT INTO sagad_submissions (key, request_hash, instance_id, response_status, response,
                                       created_at)
          SELECT s.key, s.request_hash, s.instance_id, 0, 'null', s.created_at
          FROM json_to_record(w.submission) AS s(key text, request_hash text, instance_id text,
                                                 created_at bigint)
          ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
          DELETE FROM sagad_instances WHERE id = w.id;
          answers := answers || 'key_exists'::text;
          CONTINUE;
        END IF;
      END IF;
      PERFORM sagad_put_attributes(w.id, w.saga, w.snapshot);
      IF w.lease IS NOT NULL THEN
        INSERT INTO sagad_leases (instance_id, owner, expires_at, generation)
          SELECT w.id, l.owner, sagad_now_ms() + l.ttl_ms, l.generation
          FROM json_to_record(w.lease) AS l(owner text, ttl_ms bigint, generation bigint)
          ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner,
            expires_at = EXCLUDED.expires_at, generation = EXCLUDED.generation;
      END IF;
    ELSE
      IF w.lease IS NOT NULL THEN
        SELECT owner, generation INTO held FROM sagad_leases WHERE instance_id = w.id FOR SHARE;
        IF NOT FOUND OR held.owner <> w.lease->>'owner'
           OR held.generation <> (w.lease->>'generation')::bigint THEN
          answers := answers || ('lease:' || coalesce(held.owner, '') || ':' ||
                                 coalesce(held.generation, 0)::text);
          CONTINUE;
        END IF;
      END IF;
      UPDATE sagad_instances SET status = w.status, waiting = w.waiting, version = w.version,
          finished = w.finished, updated_at = w.updated_at, snapshot = w.snapshot
        WHERE id = w.id AND version = w.expected_version;
      IF NOT FOUND THEN
        SELECT version INTO stored FROM sagad_instances WHERE id = w.id;
        answers := answers || ('version:' || coalesce(stored::text, 'none'));
        CONTINUE;
      END IF;
      IF w.finished THEN
        DELETE FROM sagad_leases WHERE instance_id = w.id;
      END IF;
    END IF;
    INSERT INTO sagad_operations (key, data, instance_id)
      SELECT o->>'key', o::text, w.id FROM json_array_elements(coalesce(w.operations, '[]'))
        o ON CONFLICT (key) DO UPDATE SET data = EXCLUDED.data;
    INSERT INTO sagad_events (instance_id, seq, data)
      SELECT w.id, (e->>'seq')::bigint, e::text FROM json_array_elements(w.events) e;
    INSERT INTO sagad_outbox (instance_id, message)
      SELECT w.id, m.value::text FROM json_array_elements(w.outbox) WITH ORDINALITY m
      ORDER BY m.ordinality;
    answers := answers || 'ok'::text;
  END LOOP;
  RETURN answers;
END $$;

-- Takes the leases of `ids` for `owner` (see Store::AcquireLease), judged
-- by the database clock. One row per id: taken, and the lease as it is.
CREATE OR REPLACE FUNCTION sagad_take_leases(ids json, new_owner text, ttl bigint, successor text)
RETURNS TABLE (lease_id text, taken boolean, lease_owner text, lease_expires bigint,
               lease_generation bigint) LANGUAGE plpgsql AS $$
DECLARE
  i text; l record; now_ms bigint;
BEGIN
  -- In id order, as every statement that locks several leases: two
  -- coordinators never wait for each other in a cycle (40P01).
  FOR i IN SELECT j FROM json_array_elements_text(ids) AS j ORDER BY j COLLATE "C" LOOP
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

-- Retention: deletes up to n finished instances that finished before
-- `cutoff` (ms), with everything that belongs to them; returns their ids.
-- SKIP LOCKED: coordinators sweeping at once take different rows.
CREATE OR REPLACE FUNCTION sagad_delete_finished(cutoff bigint, n int)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  ids text[];
BEGIN
  SELECT array_agg(id) INTO ids FROM (
    SELECT id FROM sagad_instances WHERE finished AND updated_at < cutoff
    ORDER BY updated_at LIMIT n FOR UPDATE SKIP LOCKED) due;
  IF ids IS NULL THEN
    RETURN;
  END IF;
  DELETE FROM sagad_events WHERE instance_id = ANY (ids);
  DELETE FROM sagad_operations WHERE instance_id = ANY (ids);
  DELETE FROM sagad_submissions WHERE instance_id = ANY (ids);
  DELETE FROM sagad_attributes WHERE instance_id = ANY (ids);
  DELETE FROM sagad_leases WHERE instance_id = ANY (ids);
  DELETE FROM sagad_instances WHERE id = ANY (ids);
  RETURN QUERY SELECT unnest(ids);
END $$;

-- Every group commit carries an id (sagad_apply_batch), recorded with its
-- answers in the same transaction. When the connection breaks while a batch
-- is being committed (a failover, a network cut), its outcome is unknown to
-- sagad; sagad_batch_outcome then says what happened, and makes sure it
-- stays so: if the batch is not there, it records the id as dead (answers
-- NULL), so a batch still in flight that arrives later fails on the unique
-- id and changes nothing. Rows are pruned an hour after they were written.
CREATE TABLE IF NOT EXISTS sagad_batches (
  id text PRIMARY KEY,
  answers text[],
  at bigint NOT NULL);
CREATE INDEX IF NOT EXISTS sagad_batches_at ON sagad_batches (at);

CREATE OR REPLACE FUNCTION sagad_apply_batch(batch_id text, batch json)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  got text[];
BEGIN
  got := sagad_apply(batch);
  -- A unique violation if sagad_batch_outcome declared the id dead first:
  -- the whole transaction (the writes above included) is refused.
  INSERT INTO sagad_batches (id, answers, at) VALUES (batch_id, got, sagad_now_ms());
  RETURN got;
END $$;

-- What became of batch `batch_id`: its answers if it was committed, NULL if
-- it was not (and now never will be). If the batch's transaction is still
-- running, the INSERT waits for it to end.
CREATE OR REPLACE FUNCTION sagad_batch_outcome(batch_id text)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  got text[];
BEGIN
  INSERT INTO sagad_batches (id, answers, at) VALUES (batch_id, NULL, sagad_now_ms())
    ON CONFLICT DO NOTHING;
  IF FOUND THEN
    RETURN NULL;
  END IF;
  SELECT answers INTO got FROM sagad_batches WHERE id = batch_id;
  RETURN got;
END $$;
