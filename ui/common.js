// What every page of the console shares: building elements (always as text,
// never as HTML), talking to the API, showing its answers, polling.

export const ROLES = ['viewer', 'submitter', 'operator', 'admin'];
export const TOKEN_KEY = 'sagad_token';
const POLL_MS = 2000;

// The signed-in token's {name, role}; null when signed out.
export const session = { me: null };

let pollTimer = null;
let pageSeq = 0;  // bumps when the page changes: stale refreshes stop

export function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

// An SVG element (the graph): attributes only, no inline style.
export function svgEl(tag, attrs, ...children) {
  return fill(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
}

function fill(e, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.setAttribute('class', v);
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

export const $ = (id) => document.getElementById(id);
export const json = (v) => JSON.stringify(v, null, 2);
// Wall time to the millisecond, UTC.
export const when = (ms) => (ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 23) : '-');
export const canOperate = () =>
  session.me && ROLES.indexOf(session.me.role) >= ROLES.indexOf('operator');
export const statusBadge = (s) => el('span', { class: 'status ' + (s || '') }, s || '-');

// A control with its visible name: every input and select has one.
export function field(text, control) {
  return el('label', { class: 'field' }, el('span', { class: 'field-name' }, text), control);
}

// A block of JSON that may scroll: focusable, so a keyboard can scroll it.
export function pre(text, attrs) {
  return el('pre', Object.assign({ tabindex: 0 }, attrs || {}), text);
}

// A long value (a key, an id, a hash): wraps anywhere, with a copy button.
export function longValue(value, cls, what) {
  const text = value === undefined || value === null || value === '' ? '-' : String(value);
  const code = el('code', { class: 'long ' + (cls || '') }, text);
  if (text === '-' || !navigator.clipboard) return code;
  const copy = el('button', { type: 'button', class: 'copy', 'aria-label': 'Copy ' + (what || 'value'),
    onclick: async () => {
      try { await navigator.clipboard.writeText(text); copy.textContent = 'Copied'; }
      catch (e) { copy.textContent = 'Select and copy'; }
    } }, 'Copy');
  return el('span', { class: 'long-value' }, code, copy);
}

export async function api(method, path, body) {
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
export function answerBox(r) {
  const ok = r.status >= 200 && r.status < 300;
  const text = ok ? r.status + ' OK'
    : r.status + ' ' + ((r.body && r.body.title) || 'Error') + ': ' + ((r.body && r.body.detail) || '');
  return el('div', { class: 'answer ' + (ok ? 'ok' : 'error'), 'data-status': r.status, role: 'status' }, text);
}

export function setMain(...nodes) {
  $('main').replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
}

// A new page: the previous page's refreshes stop.
export function newPage() {
  pageSeq++;
  clearTimeout(pollTimer);
}

// Runs fn now and every 2 s while the page stays; returns a function that
// refreshes at once (after an action, so its result shows without waiting).
export function poll(fn) {
  clearTimeout(pollTimer);
  const seq = pageSeq;
  let running = null;
  const tick = async () => {
    if (seq !== pageSeq) return;
    clearTimeout(pollTimer);
    running = fn();
    await running;
    if (seq === pageSeq) pollTimer = setTimeout(tick, POLL_MS);
  };
  tick();
  return async () => { if (running) await running; await tick(); };
}

// A table whose cells carry their column's name (shown beside the value on a
// phone, where the rows stack).
export function table(id, headers, bodyId) {
  const body = el('tbody', { id: bodyId });
  const t = el('table', { id, class: 'stack' },
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)))), body);
  return { table: t, body, headers };
}

export function row(headers, attrs, cells) {
  return el('tr', attrs, cells.map((c, i) => {
    const td = c instanceof Node && c.tagName === 'TD' ? c : el('td', {}, c);
    td.dataset.label = headers[i];
    return td;
  }));
}
