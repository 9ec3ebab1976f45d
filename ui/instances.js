// The instances list: filters, search by Idempotency-Key or a business key,
// paging, and bulk actions on the rows selected (a checkbox per row, one for
// the whole page; kept across the list's refreshes) or on everything the
// filter lists.
import { api, answerBox, canOperate, el, field, poll, row, setMain, statusBadge, table,
         when } from './common.js';

const COLUMNS = ['Instance', 'Saga', 'Status', 'Waiting for', 'Current step', 'Updated'];
const BULK_MAX = 1000;  // the API's bound on one bulk request

export function instancesPage(params) {
  const f = filters(params);
  const counts = el('div', { id: 'counts', class: 'counts card', 'aria-label': 'Unfinished instances by status' });
  const operate = canOperate();
  const cols = operate ? ['Select', ...COLUMNS] : COLUMNS;
  const list = table('instances', cols, 'instances-body');
  const selected = new Set();  // instance ids, across refreshes and pages
  let pageIds = [];
  const empty = el('p', { id: 'instances-empty', class: 'muted', hidden: true }, 'No instance matches.');
  const more = el('div', { class: 'row' });
  const query = new URLSearchParams(params);
  query.delete('cursor');
  const bulk = operate ? bulkActions(query, selected) : null;
  const selectPage = el('input', { id: 'select-page', type: 'checkbox', 'aria-label': 'Select every instance on this page',
    onchange: () => {
      for (const id of pageIds) { if (selectPage.checked) selected.add(id); else selected.delete(id); }
      for (const box of list.body.querySelectorAll('input.row-select')) box.checked = selected.has(box.dataset.id);
      bulk.update();
    } });
  if (operate) list.table.querySelector('th').replaceChildren(selectPage);
  const selectBox = (id) => el('input', { type: 'checkbox', class: 'row-select', 'data-id': id,
    'aria-label': 'Select ' + id, checked: selected.has(id),
    onchange: (e) => {
      if (e.target.checked) selected.add(id); else selected.delete(id);
      selectPage.checked = pageIds.length > 0 && pageIds.every((x) => selected.has(x));
      bulk.update();
    } });
  setMain(el('h1', {}, 'Instances'), counts,
    el('form', { class: 'row card filters', onsubmit: (e) => { e.preventDefault(); f.apply(); } },
      ...f.controls, el('button', { id: 'f-apply', type: 'submit' }, 'Filter')),
    bulk, list.table, empty, more);
  const cursor = params.get('cursor') || '';
  const page = new URLSearchParams(params);
  page.set('limit', '50');
  poll(async () => {
    const [c, r] = await Promise.all([api('GET', '/v1/counts'), api('GET', '/v1/instances?' + page.toString())]);
    if (c.status === 200) {
      counts.replaceChildren(...Object.entries(c.body.unfinished).map(([s, n]) =>
        el('span', { 'data-status': s }, statusBadge(s), ' ' + n)));
    }
    if (r.status !== 200) { more.replaceChildren(answerBox(r)); return; }
    pageIds = r.body.instances.map((i) => i.id);
    list.body.replaceChildren(...r.body.instances.map((i) => row(cols, { 'data-id': i.id }, [
      ...(operate ? [selectBox(i.id)] : []),
      el('a', { href: '#/instance/' + encodeURIComponent(i.id), class: 'long' }, i.id),
      i.saga + ' v' + i.saga_version, statusBadge(i.status),
      el('span', { class: 'waiting' }, i.waiting_for ||
        (i.idle_until ? 'its agent, until ' + when(i.idle_until) : '-')),
      (i.current_steps || []).join(', ') || i.current_step || '-', when(i.updated_at)])));
    selectPage.checked = pageIds.length > 0 && pageIds.every((x) => selected.has(x));
    list.table.hidden = r.body.instances.length === 0;
    empty.hidden = r.body.instances.length > 0;
    more.replaceChildren();
    if (cursor) more.append(el('a', { href: '#/instances' }, 'First page'), ' ');
    if (r.body.next_cursor) {
      const next = new URLSearchParams(params);
      next.set('cursor', r.body.next_cursor);
      more.append(el('a', { id: 'next-page', href: '#/instances?' + next.toString() }, 'Next page'));
    }
  });
}

function filters(params) {
  const status = el('select', { id: 'f-status' },
    ['', 'RUNNING', 'OPEN', 'AWAITING_APPROVAL', 'COMPENSATING', 'NEEDS_REVIEW', 'COMPLETED', 'COMPENSATED']
      .map((s) => el('option', { value: s, selected: params.get('status') === s }, s || 'any')));
  const saga = el('input', { id: 'f-saga', type: 'text', value: params.get('saga') || '' });
  const waiting = el('select', { id: 'f-waiting' },
    ['', 'approval', 'retry', 'review'].map((s) =>
      el('option', { value: s, selected: params.get('waiting') === s }, s || 'anything')));
  const key = el('input', { id: 'f-key', type: 'text', value: params.get('idempotency_key') || '' });
  const fieldParam = [...params.keys()].find((k) => k.startsWith('input.'));
  const business = el('input', { id: 'f-field', type: 'text', placeholder: 'order=A-17',
    value: fieldParam ? fieldParam.slice(6) + '=' + params.get(fieldParam) : '' });
  const apply = () => {
    const q = new URLSearchParams();
    if (status.value) q.set('status', status.value);
    if (saga.value) q.set('saga', saga.value);
    if (waiting.value) q.set('waiting', waiting.value);
    if (key.value) q.set('idempotency_key', key.value);
    const eq = business.value.indexOf('=');  // a business key: order=A-17
    if (eq > 0) q.set('input.' + business.value.slice(0, eq), business.value.slice(eq + 1));
    location.hash = '#/instances?' + q.toString();
  };
  return { apply, controls: [field('Status', status), field('Saga', saga), field('Waiting for', waiting),
    field('Idempotency-Key', key), field('Business key (field=value)', business)] };
}

// The ids the filter lists now, every page of them (at most BULK_MAX).
async function listedIds(query) {
  const ids = [];
  let cursor = '';
  do {
    const q = new URLSearchParams(query);
    q.set('limit', '200');
    if (cursor) q.set('cursor', cursor);
    const r = await api('GET', '/v1/instances?' + q.toString());
    if (r.status !== 200) return { error: r };
    ids.push(...r.body.instances.map((i) => i.id));
    cursor = r.body.next_cursor || '';
  } while (cursor && ids.length < BULK_MAX);
  return { ids: ids.slice(0, BULK_MAX), more: !!cursor };
}

// Bulk retry / cancel / approve / reject: the operator picks the action and
// what it acts on (the rows selected, or everything the filter lists), is
// told how many instances that is, confirms, and sees each one's result
// (each is judged as its single action would be).
function bulkActions(query, selected) {
  const action = el('select', { id: 'bulk-action' },
    ['retry', 'cancel', 'approve', 'reject'].map((a) => el('option', { value: a }, a)));
  const text = el('input', { id: 'bulk-text', type: 'text' });
  const out = el('div', { id: 'bulk-out' });
  const confirmFor = async (ids, what) => {
    const verb = action.value;
    // Approve: exactly the approvals shown now, each bound to its digest
    // (an agent's call or an irreversible step is never approved unseen).
    if (verb === 'approve') return confirmSeen(ids, what, text, out);
    const n = ids.length + ' instance' + (ids.length === 1 ? '' : 's');
    const Verb = verb[0].toUpperCase() + verb.slice(1);
    const confirm = el('button', { id: 'bulk-confirm', type: 'button', class: verb === 'retry' || verb === 'approve' ? '' : 'danger',
      onclick: () => runBulk(verb, ids, text.value, out) }, Verb + ' ' + n);
    const back = el('button', { type: 'button', class: 'secondary', onclick: () => out.replaceChildren() }, 'Back');
    out.replaceChildren(el('div', { class: 'confirm', role: 'alertdialog', 'aria-label': 'Confirm the bulk action' },
      el('p', { id: 'bulk-question' }, Verb + ' ' + n + ' ' + what + '?'),
      el('div', { class: 'row' }, confirm, back)));
    confirm.focus();
  };
  const prepare = el('button', { id: 'bulk-prepare', type: 'button', onclick: async () => {
    out.replaceChildren(el('div', { class: 'answer', role: 'status' }, 'Counting…'));
    const t = await listedIds(query);
    if (t.error) { out.replaceChildren(answerBox(t.error)); return; }
    if (t.ids.length === 0) {
      out.replaceChildren(el('div', { class: 'answer error', role: 'status' }, 'No instance is listed.')); return;
    }
    confirmFor(t.ids, 'listed by this filter' + (t.more ? ' (the first ' + BULK_MAX + ')' : ''));
  } }, 'Act on all listed…');
  const count = el('span', { id: 'bulk-selected-count', class: 'muted', role: 'status' }, 'None selected');
  const prepareSelected = el('button', { id: 'bulk-prepare-selected', type: 'button', disabled: true,
    onclick: () => {
      const ids = [...selected].slice(0, BULK_MAX);
      if (ids.length > 0) confirmFor(ids, 'selected');
    } }, 'Act on selected…');
  const section = el('section', { class: 'card bulk', 'aria-labelledby': 'bulk-title' },
    el('h2', { id: 'bulk-title' }, 'Bulk action'),
    el('div', { class: 'row' }, field('Action', action), field('Comment or reason', text), prepareSelected, prepare, count), out);
  section.update = () => {
    prepareSelected.disabled = selected.size === 0;
    count.textContent = selected.size === 0 ? 'None selected' : selected.size + ' selected';
  };
  return section;
}

// The approvals of `ids` as /v1/approvals shows them now: the operator
// confirms that list, and exactly it is sent, with each request's digest.
async function confirmSeen(ids, what, text, out) {
  const r = await api('GET', '/v1/approvals');
  if (r.status !== 200) { out.replaceChildren(answerBox(r)); return; }
  const wanted = new Set(ids);
  const cards = r.body.approvals.filter((c) => wanted.has(c.instance_id) && c.digest);
  if (cards.length === 0) {
    out.replaceChildren(el('div', { class: 'answer error', role: 'status' }, 'Nothing listed awaits approval.'));
    return;
  }
  const list = el('ul', { id: 'bulk-approvals' }, ...cards.map((c) => el('li', { 'data-id': c.instance_id },
    c.instance_id + ' · ' + c.step + (c.call ? ' (' + c.call.tool + ')' : '') + (c.irreversible ? ' — irreversible' : ''))));
  const n = cards.length + ' approval' + (cards.length === 1 ? '' : 's');
  const m = ids.length + ' instance' + (ids.length === 1 ? '' : 's');
  const seen = cards.map((c) => ({ instance_id: c.instance_id, step: c.step, digest: c.digest }));
  const confirm = el('button', { id: 'bulk-confirm', type: 'button',
    onclick: () => runSeen(seen, text.value, out) }, 'Approve ' + n);
  const back = el('button', { type: 'button', class: 'secondary', onclick: () => out.replaceChildren() }, 'Back');
  out.replaceChildren(el('div', { class: 'confirm', role: 'alertdialog', 'aria-label': 'Confirm the approvals' },
    el('p', { id: 'bulk-question' }, 'Approve ' + m + ' ' + what + ': the ' + n +
      ' below, each exactly as shown?'), list,
    el('div', { class: 'row' }, confirm, back)));
  confirm.focus();
}

async function runSeen(seen, comment, out) {
  out.replaceChildren(el('div', { class: 'answer', role: 'status' }, 'Sending…'));
  const r = await api('POST', '/v1/approvals/actions/approve', { approvals: seen, comment });
  if (r.status !== 200 && r.status !== 409) { out.replaceChildren(answerBox(r)); return; }
  showResults('approve', r.body.results.map((x) => ({ id: x.instance_id, http_status: x.http_status,
    detail: x.step + ': ' + x.detail })), out);
}

async function runBulk(verb, ids, text, out) {
  out.replaceChildren(el('div', { class: 'answer', role: 'status' }, 'Sending…'));
  const body = { ids };
  body[verb === 'reject' || verb === 'cancel' ? 'reason' : 'comment'] = text;
  const r = await api('POST', '/v1/instances/actions/' + verb, body);
  if (r.status !== 200) { out.replaceChildren(answerBox(r)); return; }
  showResults(verb, r.body.results, out);
}

function showResults(verb, results, out) {
  const done = results.filter((x) => x.http_status >= 200 && x.http_status < 300).length;
  const headers = ['Instance', 'Answer', 'Detail'];
  const t = table('bulk-results', headers, 'bulk-results-body');
  t.body.replaceChildren(...results.map((x) => row(headers, { 'data-id': x.id, 'data-status': x.http_status }, [
    el('a', { href: '#/instance/' + encodeURIComponent(x.id), class: 'long' }, x.id), String(x.http_status), x.detail])));
  out.replaceChildren(el('p', { id: 'bulk-summary', class: 'answer ' + (done === results.length ? 'ok' : 'error'), role: 'status' },
    verb + ': ' + done + ' of ' + results.length + ' accepted, ' + (results.length - done) + ' refused'), t.table);
}
