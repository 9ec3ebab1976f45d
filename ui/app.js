// The sagad operator console. Every value from the server goes into the
// page through el() as text; nothing from an instance is ever parsed as HTML.

const ROLES = ['viewer', 'submitter', 'operator', 'admin'];
const TOKEN_KEY = 'sagad_token';
const POLL_MS = 2000;

let me = null;        // {name, role} of the signed-in token
let pollTimer = null;
let pageSeq = 0;      // bumps when the page changes: stale refreshes stop

// ---- helpers ----
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const $ = (id) => document.getElementById(id);
const json = (v) => JSON.stringify(v, null, 2);
const when = (ms) => (ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : '-');
const canOperate = () => me && ROLES.indexOf(me.role) >= ROLES.indexOf('operator');
const statusBadge = (s) => el('span', { class: 'status ' + (s || '') }, s || '-');

async function api(method, path, body) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers['Authorization'] = 'Bearer ' + token;
  const init = { method, headers };
  if (method === 'POST') {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body || {});
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    return { status: 0, body: { detail: 'sagad did not answer: ' + e } };
  }
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  return { status: res.status, body: data };
}

// The server's answer, verbatim: "409 Conflict: <detail>" or "200 OK".
function answerBox(r) {
  const ok = r.status >= 200 && r.status < 300;
  const text = ok ? r.status + ' OK'
    : r.status + ' ' + ((r.body && r.body.title) || 'Error') + ': ' + ((r.body && r.body.detail) || '');
  return el('div', { class: 'answer ' + (ok ? 'ok' : 'error'), 'data-status': r.status }, text);
}

function setMain(...nodes) {
  const m = $('main');
  m.replaceChildren(...nodes);
}

function poll(fn) {
  clearTimeout(pollTimer);
  const seq = pageSeq;
  const tick = async () => {
    if (seq !== pageSeq) return;
    await fn();
    if (seq === pageSeq) pollTimer = setTimeout(tick, POLL_MS);
  };
  tick();
}

// ---- sign-in ----
async function signIn(token) {
  if (token !== undefined) sessionStorage.setItem(TOKEN_KEY, token);
  const r = await api('GET', '/v1/whoami');
  if (r.status === 200) {
    me = r.body;
    $('who').textContent = me.name + ' (' + me.role + ')';
    $('nav').hidden = false;
    $('signout').hidden = !sessionStorage.getItem(TOKEN_KEY);
    return true;
  }
  sessionStorage.removeItem(TOKEN_KEY);
  me = null;
  return r;
}

function signInPage(message) {
  pageSeq++;
  $('nav').hidden = true;
  $('signout').hidden = true;
  $('who').textContent = '';
  const input = el('input', { id: 'token', type: 'password', placeholder: 'bearer token', size: 40,
                              autocomplete: 'off' });
  const msg = el('div', { id: 'signin-message', class: 'answer error' }, message || '');
  const form = el('form', { id: 'signin', class: 'card row' },
    el('label', { for: 'token' }, 'Token'), input,
    el('button', { id: 'signin-button', type: 'submit' }, 'Sign in'), msg);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const r = await signIn(input.value);
    if (r === true) route();
    else msg.textContent = r.status === 401 ? 'Wrong token: sagad does not know it.'
      : 'Cannot sign in: ' + r.status + ' ' + ((r.body && r.body.detail) || '');
  });
  setMain(el('h1', {}, 'Sign in'), form);
  input.focus();
}

// ---- approvals inbox ----
function inboxPage() {
  const list = el('div', { id: 'approvals' });
  const empty = el('p', { id: 'inbox-empty', class: 'muted', hidden: true }, 'Nothing waits for approval.');
  setMain(el('h1', {}, 'Approvals'), empty, list);
  const cards = new Map();  // key -> card (kept across refreshes: typing is not lost)
  poll(async () => {
    const r = await api('GET', '/v1/approvals');
    if (r.status !== 200) return;
    const seen = new Set();
    for (const a of r.body.approvals) {
      seen.add(a.key);
      if (!cards.has(a.key)) {
        const card = approvalCard(a);
        cards.set(a.key, card);
        list.append(card);
      }
    }
    for (const [key, card] of cards) {
      if (!seen.has(key) && !card.dataset.answered) { card.remove(); cards.delete(key); }
    }
    empty.hidden = cards.size > 0;
  });
}

function approvalCard(a) {
  const req = a.request || {};
  const out = el('div', { class: 'result' });
  const card = el('div', { class: 'card approval', 'data-key': a.key },
    el('div', { class: 'row' },
      el('strong', {}, a.saga), ' v' + a.saga_version, ' · step ', el('strong', { class: 'step' }, a.step),
      ' · instance ', el('a', { href: '#/instance/' + encodeURIComponent(a.instance_id), class: 'instance-link' }, a.instance_id),
      el('span', { class: 'muted' }, ' waiting since ' + when(a.since))),
    el('h2', {}, 'Input'), el('pre', { class: 'input' }, json(a.input)),
    el('h2', {}, 'The request that will be sent on approval'),
    el('div', { class: 'kv request' },
      el('span', {}, 'service'), el('code', {}, req.service || '-'),
      el('span', {}, 'method, URL'), el('code', { class: 'url' }, (req.method || '') + ' ' + (req.url || '')),
      el('span', {}, 'Idempotency-Key'), el('code', { class: 'idem-key' }, req.idempotency_key || a.key),
      el('span', {}, 'args hash'), el('code', {}, req.args_hash || '-')),
    el('pre', { class: 'body' }, json(req.body !== undefined ? req.body : req)),
    out);
  if (canOperate()) {
    const comment = el('input', { class: 'comment', placeholder: 'comment', size: 30 });
    const reason = el('input', { class: 'reason', placeholder: 'reason', size: 30 });
    const act = async (action, body) => {
      const r = await api('POST', '/v1/instances/' + encodeURIComponent(a.instance_id) + '/steps/' +
                          encodeURIComponent(a.step) + '/' + action, body);
      if (r.status === 200) card.dataset.answered = '1';
      out.replaceChildren(answerBox(r));
    };
    card.append(el('div', { class: 'row actions' },
      comment, el('button', { class: 'approve', onclick: () => act('approve', { comment: comment.value }) }, 'Approve'),
      reason, el('button', { class: 'reject danger', onclick: () => act('reject', { reason: reason.value }) }, 'Reject')));
  }
  return card;
}

// ---- instances ----
function instancesPage(params) {
  const status = el('select', { id: 'f-status' },
    ['', 'RUNNING', 'AWAITING_APPROVAL', 'COMPENSATING', 'NEEDS_REVIEW', 'COMPLETED', 'COMPENSATED']
      .map((s) => el('option', { value: s, selected: params.get('status') === s }, s || 'any status')));
  const saga = el('input', { id: 'f-saga', placeholder: 'saga', value: params.get('saga') || '' });
  const key = el('input', { id: 'f-key', placeholder: 'Idempotency-Key', size: 18,
                            value: params.get('idempotency_key') || '' });
  const fieldParam = [...params.keys()].find((k) => k.startsWith('input.'));
  const field = el('input', { id: 'f-field', placeholder: 'input field=value', size: 18,
                              value: fieldParam ? fieldParam.slice(6) + '=' + params.get(fieldParam) : '' });
  const waiting = el('select', { id: 'f-waiting' },
    ['', 'approval', 'retry', 'review'].map((s) =>
      el('option', { value: s, selected: params.get('waiting') === s }, s ? 'waiting for ' + s : 'waiting for anything')));
  const apply = el('button', { id: 'f-apply', onclick: () => {
    const q = new URLSearchParams();
    if (status.value) q.set('status', status.value);
    if (saga.value) q.set('saga', saga.value);
    if (waiting.value) q.set('waiting', waiting.value);
    if (key.value) q.set('idempotency_key', key.value);
    const eq = field.value.indexOf('=');  // a business key: order=A-17
    if (eq > 0) q.set('input.' + field.value.slice(0, eq), field.value.slice(eq + 1));
    location.hash = '#/instances?' + q.toString();
  } }, 'Filter');
  const counts = el('div', { id: 'counts', class: 'counts card' });
  const body = el('tbody', { id: 'instances-body' });
  const more = el('div', { class: 'row' });
  setMain(el('h1', {}, 'Instances'), counts, el('div', { class: 'row card' }, status, saga, waiting, key, field, apply),
    el('table', { id: 'instances' }, el('thead', {}, el('tr', {},
      ['Instance', 'Saga', 'Status', 'Waiting for', 'Current step', 'Updated'].map((h) => el('th', {}, h)))), body),
    more);
  const cursor = params.get('cursor') || '';
  const query = new URLSearchParams(params);
  query.set('limit', '50');
  poll(async () => {
    const [c, r] = await Promise.all([api('GET', '/v1/counts'), api('GET', '/v1/instances?' + query.toString())]);
    if (c.status === 200) {
      counts.replaceChildren(...Object.entries(c.body.unfinished).map(([s, n]) =>
        el('span', { 'data-status': s }, statusBadge(s), ' ' + n)));
    }
    if (r.status !== 200) { more.replaceChildren(answerBox(r)); return; }
    body.replaceChildren(...r.body.instances.map((i) => el('tr', { 'data-id': i.id },
      el('td', {}, el('a', { href: '#/instance/' + encodeURIComponent(i.id) }, i.id)),
      el('td', {}, i.saga + ' v' + i.saga_version), el('td', {}, statusBadge(i.status)),
      el('td', {}, i.waiting_for || '-'), el('td', {}, (i.current_steps || []).join(', ') || i.current_step || '-'), el('td', {}, when(i.updated_at)))));
    more.replaceChildren();
    if (cursor) more.append(el('a', { href: '#/instances' }, 'First page'), ' ');
    if (r.body.next_cursor) {
      const next = new URLSearchParams(params);
      next.set('cursor', r.body.next_cursor);
      more.append(el('a', { id: 'next-page', href: '#/instances?' + next.toString() }, 'Next page'));
    }
  });
}

// ---- one instance ----
function instancePage(id) {
  const head = el('div', { id: 'instance-head', class: 'card' });
  const steps = el('tbody', { id: 'steps-body' });
  const timeline = el('ol', { id: 'timeline', class: 'timeline' });
  const bundle = el('div', { id: 'bundle' });
  const forms = el('div', { id: 'forms' });
  setMain(el('h1', {}, 'Instance ', el('span', { id: 'instance-id' }, id)), head,
    el('h2', {}, 'Steps'),
    el('table', { id: 'steps' }, el('thead', {}, el('tr', {},
      ['Step', 'After', 'Status', 'Attempts', 'Last error', 'Next retry', 'External ref', 'Compensation', 'Approval']
        .map((h) => el('th', {}, h)))), steps),
    forms, bundle, el('h2', {}, 'Timeline'), timeline);
  let built = null;  // the operator forms, built once (typing survives refreshes)
  const path = '/v1/instances/' + encodeURIComponent(id);
  poll(async () => {
    const r = await api('GET', path);
    if (r.status !== 200) { head.replaceChildren(answerBox(r)); return; }
    const inst = r.body;
    head.replaceChildren(el('div', { class: 'kv' },
      el('span', {}, 'saga'), el('span', {}, inst.saga + ' v' + inst.saga_version),
      el('span', {}, 'status'), el('span', { id: 'instance-status' }, statusBadge(inst.status)),
      el('span', {}, 'waiting for'), el('span', {}, inst.waiting_for || '-'),
      el('span', {}, 'current steps'), el('span', { id: 'current-steps' }, (inst.current_steps || []).join(', ') || '-'),
      el('span', {}, 'review reason'), el('span', { id: 'review-reason' }, inst.review_reason || '-'),
      el('span', {}, 'created / updated'), el('span', {}, when(inst.created_at) + ' / ' + when(inst.updated_at)),
      el('span', {}, 'input'), el('pre', { id: 'instance-input' }, json(inst.input))));
    steps.replaceChildren(...inst.steps.map((s) => el('tr', { 'data-step': s.name },
      el('td', {}, s.name), el('td', {}, (s.after || []).join(', ') || '-'),
      el('td', { class: 'step-status' }, statusBadge(s.status)), el('td', {}, s.attempts),
      el('td', {}, s.last_error || '-'), el('td', {}, when(s.next_retry_at)), el('td', {}, s.external_ref || '-'),
      el('td', { class: 'compensation' }, s.compensation
        ? el('span', {}, statusBadge(s.compensation.status),
          s.compensation.external_ref ? ' ' + s.compensation.external_ref : '',
          s.compensation.last_error ? ' — ' + s.compensation.last_error : '')
        : '-'),
      el('td', { class: 'approval' }, s.approval ? (s.approval.decision || '') + ' by ' + (s.approval.by || '?') +
        (s.approval.comment ? ': ' + s.approval.comment : '') + (s.approval.reason ? ': ' + s.approval.reason : '') : '-'))));
    const ev = await api('GET', path + '/events');
    if (ev.status === 200) {
      timeline.replaceChildren(...ev.body.events.map((e) => el('li', { 'data-type': e.type, 'data-step': e.step || '' },
        when(e.at) + '  ' + e.type + (e.step ? ' · ' + e.step : '') +
        (e.data && (e.data.reason || e.data.error || e.data.comment) ? ' — ' + (e.data.reason || e.data.error || e.data.comment) : ''))));
    }
    if (inst.status === 'NEEDS_REVIEW') {
      const b = await api('GET', path + '/bundle');
      if (b.status === 200) {
        bundle.replaceChildren(el('h2', {}, 'Recovery bundle'),
          el('div', { class: 'card' },
            el('div', {}, el('strong', {}, 'Recommended: '), el('span', { id: 'recommended' }, b.body.recommended_action)),
            el('div', {}, 'Unknown effects: '), el('pre', { id: 'unknown-effects' }, json(b.body.unknown_effects)),
            el('div', {}, 'Confirmed effects: '), el('pre', {}, json(b.body.confirmed_effects))));
      }
    } else {
      bundle.replaceChildren();
    }
    if (canOperate()) {
      if (!built) { built = operatorForms(id, inst); forms.replaceChildren(built.node); }
      built.update(inst);
    }
  });
}

// The forms for an instance: each disabled, with the reason, when its state
// does not allow it. update() only toggles; it never rebuilds the inputs.
function operatorForms(id, inst) {
  const out = el('div', { id: 'action-answer' });
  const base = '/v1/instances/' + encodeURIComponent(id);
  const send = async (p, body) => out.replaceChildren(answerBox(await api('POST', base + p, body)));
  const stepSelect = (cls) => el('select', { class: cls }, inst.steps.map((s) => el('option', { value: s.name }, s.name)));
  const why = () => el('span', { class: 'why' });

  const rStep = stepSelect('resolve-step');
  const rOutcome = el('select', { class: 'resolve-outcome' },
    el('option', { value: 'committed' }, 'committed (it happened)'),
    el('option', { value: 'not_executed' }, 'not executed (it did not)'));
  const rRef = el('input', { class: 'resolve-ref', placeholder: 'external ref' });
  const rComment = el('input', { class: 'resolve-comment', placeholder: 'comment' });
  const rBtn = el('button', { id: 'resolve', onclick: () => send('/steps/' + encodeURIComponent(rStep.value) + '/resolve',
    { outcome: rOutcome.value, external_ref: rRef.value, comment: rComment.value }) }, 'Resolve');
  const rWhy = why();

  const tStep = stepSelect('retry-step');
  const tBtn = el('button', { id: 'retry', onclick: () => send('/steps/' + encodeURIComponent(tStep.value) + '/retry', {}) }, 'Retry now');
  const tWhy = why();

  const sStep = stepSelect('skip-step');
  const sResult = el('input', { class: 'skip-result', placeholder: '{"ref": "..."}', size: 24 });
  const sRef = el('input', { class: 'skip-ref', placeholder: 'external ref' });
  const sBtn = el('button', { id: 'skip', onclick: () => {
    let result;
    try { result = JSON.parse(sResult.value || '{}'); } catch (e) {
      out.replaceChildren(el('div', { class: 'answer error' }, 'The result is not JSON: ' + e.message)); return;
    }
    send('/steps/' + encodeURIComponent(sStep.value) + '/skip', { result, external_ref: sRef.value });
  } }, 'Skip with result');
  const sWhy = why();

  const cReason = el('input', { class: 'compensate-reason', placeholder: 'reason' });
  const cBtn = el('button', { id: 'compensate', class: 'danger', onclick: () => send('/compensate', { reason: cReason.value }) }, 'Compensate');
  const cWhy = why();

  const xReason = el('input', { class: 'cancel-reason', placeholder: 'reason' });
  const xBtn = el('button', { id: 'cancel', class: 'danger', onclick: () => send('/cancel', { reason: xReason.value }) }, 'Cancel');
  const xWhy = why();

  const node = el('div', { class: 'card operator-forms' }, el('h2', {}, 'Operator actions'),
    el('div', { class: 'row' }, 'Resolve', rStep, rOutcome, rRef, rComment, rBtn, rWhy),
    el('div', { class: 'row' }, 'Retry', tStep, tBtn, tWhy),
    el('div', { class: 'row' }, 'Skip', sStep, sResult, sRef, sBtn, sWhy),
    el('div', { class: 'row' }, 'Compensate', cReason, cBtn, cWhy),
    el('div', { class: 'row' }, 'Cancel', xReason, xBtn, xWhy),
    out);
  const gate = (btn, whyNode, reason) => { btn.disabled = !!reason; whyNode.textContent = reason || ''; };
  const update = (cur) => {
    const review = cur.status === 'NEEDS_REVIEW';
    const notReview = review ? '' : 'only in NEEDS_REVIEW (the instance is ' + cur.status + ')';
    gate(rBtn, rWhy, notReview);
    gate(tBtn, tWhy, notReview && !(cur.waiting_for === 'retry') ? notReview + ' or while a retry waits' : '');
    gate(sBtn, sWhy, notReview);
    gate(cBtn, cWhy, notReview);
    const finished = cur.status === 'COMPLETED' || cur.status === 'COMPENSATED';
    gate(xBtn, xWhy, finished ? 'the instance already ended (' + cur.status + ')'
      : review ? 'in NEEDS_REVIEW: resolve a step or force compensation instead'
      : cur.status === 'COMPENSATING' ? 'already compensating' : '');
  };
  return { node, update };
}

// ---- services ----
function servicesPage() {
  const body = el('tbody', { id: 'services-body' });
  const out = el('div', { id: 'services-answer' });
  setMain(el('h1', {}, 'Services'),
    el('p', { class: 'muted' }, 'A paused service gets no new request; calls under way finish and ' +
      'unclear outcomes are still asked about.'),
    el('table', { id: 'services' }, el('thead', {}, el('tr', {},
      ['Service', 'State', 'Max in flight', 'Max per second', 'In flight', 'Queued', '']
        .map((h) => el('th', {}, h)))), body), out);
  const refresh = async () => {
    const r = await api('GET', '/v1/services');
    if (r.status !== 200) return;
    body.replaceChildren(...r.body.services.map((s) => {
      const act = async (action) => {
        const a = await api('POST', '/v1/services/' + encodeURIComponent(s.name) + '/' + action, {});
        out.replaceChildren(answerBox(a));
        await refresh();
      };
      const button = !canOperate() ? ''
        : s.paused ? el('button', { class: 'resume', onclick: () => act('resume') }, 'Resume')
        : el('button', { class: 'pause danger', onclick: () => act('pause') }, 'Pause');
      return el('tr', { 'data-service': s.name },
        el('td', {}, s.name), el('td', { class: 'state' }, s.paused ? 'paused' : 'open'),
        el('td', {}, s.max_in_flight === null ? '-' : s.max_in_flight),
        el('td', {}, s.max_per_second === null ? '-' : s.max_per_second),
        el('td', { class: 'in-flight' }, s.in_flight), el('td', { class: 'queued' }, s.queued),
        el('td', {}, button));
    }));
  };
  poll(refresh);
}

// ---- routing ----
function highlight(name) {
  for (const a of document.querySelectorAll('header nav a')) a.classList.toggle('active', a.id === 'nav-' + name);
}

async function route() {
  pageSeq++;
  clearTimeout(pollTimer);
  if (!me) {
    const r = await signIn();
    if (r !== true) { signInPage(r.status === 401 && sessionStorage.getItem(TOKEN_KEY) ? 'Wrong token.' : ''); return; }
  }
  const hash = location.hash || '#/inbox';
  const [p, q] = hash.slice(1).split('?');
  const params = new URLSearchParams(q || '');
  if (p.startsWith('/instance/')) { highlight('instances'); instancePage(decodeURIComponent(p.slice(10))); }
  else if (p === '/instances') { highlight('instances'); instancesPage(params); }
  else if (p === '/services') { highlight('services'); servicesPage(); }
  else { highlight('inbox'); inboxPage(); }
}

$('signout').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  me = null;
  signInPage('Signed out.');
});
window.addEventListener('hashchange', route);
route();
