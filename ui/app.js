// The sagad operator console: sign-in, the approvals inbox and routing. The
// pages live in their own modules; every value from the server goes into the
// page through el() as text, never parsed as HTML.
import { $, TOKEN_KEY, api, answerBox, canOperate, el, field, json, longValue, newPage, poll,
         pre, session, setMain, when } from './common.js';
import { instancePage } from './instance.js';
import { instancesPage } from './instances.js';
import { sagasPage, servicesPage } from './services.js';

// ---- sign-in ----
async function signIn(token) {
  if (token !== undefined) sessionStorage.setItem(TOKEN_KEY, token);
  const r = await api('GET', '/v1/whoami');
  if (r.status === 200) {
    session.me = r.body;
    $('who').textContent = session.me.name + ' (' + session.me.role + ')';
    $('nav').hidden = false;
    $('signout').hidden = !sessionStorage.getItem(TOKEN_KEY);
    return true;
  }
  sessionStorage.removeItem(TOKEN_KEY);
  session.me = null;
  return r;
}

function signInPage(message) {
  newPage();
  $('nav').hidden = true;
  $('signout').hidden = true;
  $('who').textContent = '';
  const input = el('input', { id: 'token', type: 'password', autocomplete: 'off' });
  const msg = el('div', { id: 'signin-message', class: 'answer error', role: 'alert' }, message || '');
  const form = el('form', { id: 'signin', class: 'card row' },
    field('Bearer token', input), el('button', { id: 'signin-button', type: 'submit' }, 'Sign in'), msg);
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
  const card = el('article', { class: 'card approval', 'data-key': a.key, 'aria-label': 'Approval of ' + a.step },
    el('div', { class: 'row' },
      el('strong', {}, a.saga), ' v' + a.saga_version, ' · step ', el('strong', { class: 'step' }, a.step),
      ' · instance ', el('a', { href: '#/instance/' + encodeURIComponent(a.instance_id), class: 'instance-link long' }, a.instance_id),
      el('span', { class: 'muted' }, ' waiting since ' + when(a.since))),
    el('h2', {}, 'Input'), pre(json(a.input), { class: 'input' }),
    a.call ? agentCall(a) : '',
    el('h2', {}, 'The request that will be sent on approval'),
    el('div', { class: 'kv request' },
      el('span', {}, 'service'), el('code', {}, req.service || '-'),
      el('span', {}, 'method, URL'), el('code', { class: 'url long' }, (req.method || '') + ' ' + (req.url || '')),
      el('span', {}, 'Idempotency-Key'), longValue(req.idempotency_key || a.key, 'idem-key', 'Idempotency-Key'),
      el('span', {}, 'args hash'), longValue(req.args_hash, 'args-hash', 'args hash'),
      el('span', {}, 'body SHA-256'), longValue(req.body_sha256 || '-', 'body-sha256', 'body SHA-256')),
    pre(json(req.body !== undefined ? req.body : req), { class: 'body' }),
    out);
  if (canOperate()) {
    const comment = el('input', { class: 'comment', type: 'text' });
    const reason = el('input', { class: 'reason', type: 'text' });
    const approve = el('button', { class: 'approve' }, 'Approve');
    const reject = el('button', { class: 'reject danger' }, 'Reject');
    const act = async (action, body) => {
      approve.disabled = reject.disabled = true;  // one answer per card
      const r = await api('POST', '/v1/instances/' + encodeURIComponent(a.instance_id) + '/steps/' +
                          encodeURIComponent(a.step) + '/' + action, body);
      out.replaceChildren(answerBox(r));
      if (r.status === 200) {
        card.dataset.answered = '1';
        card.classList.add('answered');
        out.append(el('div', { class: 'muted' }, action === 'approve' ? 'Approved: the request goes out now.'
          : a.call ? 'Rejected: the agent decides what comes next.' : 'Rejected: the saga turns back.'));
      } else {
        approve.disabled = reject.disabled = false;
      }
    };
    approve.addEventListener('click', () => act('approve', { comment: comment.value }));
    reject.addEventListener('click', () => act('reject', { reason: reason.value }));
    card.append(el('div', { class: 'row actions' },
      field('Comment', comment), approve, field('Reason', reason), reject));
  }
  return card;
}

// What an agent asked for, and why: the call of a run awaiting approval.
function agentCall(a) {
  const c = a.call;
  const meta = a.metadata || {};
  return el('div', { class: 'agent-call' },
    el('h2', {}, 'The agent\'s call'),
    el('div', { class: 'kv' },
      el('span', {}, 'tool'), el('code', { class: 'tool' }, c.tool || '-'),
      el('span', {}, 'call id'), el('code', { class: 'call-id long' }, c.call_id || a.step),
      el('span', {}, 'reason'), el('span', { class: 'call-reason' }, c.reason || '-'),
      el('span', {}, 'evidence'), el('span', { class: 'call-evidence' }, (c.evidence || []).map(String).join(', ') || '-'),
      el('span', {}, 'model'), el('span', { class: 'call-model' }, c.model || meta.model || '-'),
      el('span', {}, 'agent'), el('span', {}, meta.agent || '-')),
    pre(json(c.arguments || {}), { class: 'call-arguments' }));
}

// ---- routing ----
function highlight(name) {
  for (const a of document.querySelectorAll('header nav a')) {
    const on = a.id === 'nav-' + name;
    a.classList.toggle('active', on);
    if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
}

async function route() {
  newPage();
  if (!session.me) {
    const r = await signIn();
    if (r !== true) { signInPage(r.status === 401 && sessionStorage.getItem(TOKEN_KEY) ? 'Wrong token.' : ''); return; }
  }
  const hash = location.hash || '#/inbox';
  const [p, q] = hash.slice(1).split('?');
  const params = new URLSearchParams(q || '');
  if (p.startsWith('/instance/')) { highlight('instances'); instancePage(decodeURIComponent(p.slice(10))); }
  else if (p === '/instances') { highlight('instances'); instancesPage(params); }
  else if (p === '/services') { highlight('services'); servicesPage(); }
  else if (p === '/sagas') { highlight('sagas'); sagasPage(); }
  else { highlight('inbox'); inboxPage(); }
}

$('signout').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  session.me = null;
  signInPage('Signed out.');
});
// The skip link moves the focus to the page's content (the hash stays: it
// is the console's route).
$('skip').addEventListener('click', (e) => {
  e.preventDefault();
  $('main').focus();
});
window.addEventListener('hashchange', route);
route();
