// The instances list: filters, search by Idempotency-Key or a business key,
// paging, and bulk actions on everything the filter lists.
import { api, answerBox, canOperate, el, field, poll, row, setMain, statusBadge, table,
         when } from './common.js';

const COLUMNS = ['Instance', 'Saga', 'Status', 'Waiting for', 'Current step', 'Updated'];
const BULK_MAX = 1000;  // the API's bound on one bulk request

export function instancesPage(params) {
  const f = filters(params);
  const counts = el('div', { id: 'counts', class: 'counts card', 'aria-label': 'Unfinished instances by status' });
  const list = table('instances', COLUMNS, 'instances-body');
  const empty = el('p', { id: 'instances-empty', class: 'muted', hidden: true }, 'No instance matches.');
  const more = el('div', { class: 'row' });
  const query = new URLSearchParams(params);
  query.delete('cursor');
  const bulk = canOperate() ? bulkActions(query) : null;
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
    list.body.replaceChildren(...r.body.instances.map((i) => row(COLUMNS, { 'data-id': i.id }, [
      el('a', { href: '#/instance/' + encodeURIComponent(i.id), class: 'long' }, i.id),
      i.saga + ' v' + i.saga_version, statusBadge(i.status), i.waiting_for || '-',
      (i.current_steps || []).join(', ') || i.current_step || '-', when(i.updated_at)])));
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
    ['', 'RUNNING', 'AWAITING_APPROVAL', 'COMPENSATING', 'NEEDS_REVIEW', 'COMPLETED', 'COMPENSATED']
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

// Bulk retry / cancel / approve / reject: the operator picks the action, is
// told how many instances the filter lists, confirms, and sees each one's
// result (each is judged as its single action would be).
function bulkActions(query) {
  const action = el('select', { id: 'bulk-action' },
    ['retry', 'cancel', 'approve', 'reject'].map((a) => el('option', { value: a }, a)));
  const text = el('input', { id: 'bulk-text', type: 'text' });
  const out = el('div', { id: 'bulk-out' });
  const prepare = el('button', { id: 'bulk-prepare', type: 'button', onclick: async () => {
    out.replaceChildren(el('div', { class: 'answer', role: 'status' }, 'Counting…'));
    const t = await listedIds(query);
    if (t.error) { out.replaceChildren(answerBox(t.error)); return; }
    if (t.ids.length === 0) {
      out.replaceChildren(el('div', { class: 'answer error', role: 'status' }, 'No instance is listed.')); return;
    }
    const verb = action.value;
    const confirm = el('button', { id: 'bulk-confirm', type: 'button', class: verb === 'retry' || verb === 'approve' ? '' : 'danger',
      onclick: () => runBulk(verb, t.ids, text.value, out) },
      verb[0].toUpperCase() + verb.slice(1) + ' ' + t.ids.length + ' instance' + (t.ids.length === 1 ? '' : 's'));
    const back = el('button', { type: 'button', class: 'secondary', onclick: () => out.replaceChildren() }, 'Back');
    out.replaceChildren(el('div', { class: 'confirm', role: 'alertdialog', 'aria-label': 'Confirm the bulk action' },
      el('p', { id: 'bulk-question' }, verb[0].toUpperCase() + verb.slice(1) + ' ' + t.ids.length + ' instance' + (t.ids.length === 1 ? '' : 's') +
        ' listed by this filter' + (t.more ? ' (the first ' + BULK_MAX + ')' : '') + '?'),
      el('div', { class: 'row' }, confirm, back)));
    confirm.focus();
  } }, 'Act on all listed…');
  return el('section', { class: 'card bulk', 'aria-labelledby': 'bulk-title' },
    el('h2', { id: 'bulk-title' }, 'Bulk action'),
    el('div', { class: 'row' }, field('Action', action), field('Comment or reason', text), prepare), out);
}

async function runBulk(verb, ids, text, out) {
  out.replaceChildren(el('div', { class: 'answer', role: 'status' }, 'Sending…'));
  const body = { ids };
  body[verb === 'reject' || verb === 'cancel' ? 'reason' : 'comment'] = text;
  const r = await api('POST', '/v1/instances/actions/' + verb, body);
  if (r.status !== 200) { out.replaceChildren(answerBox(r)); return; }
  const results = r.body.results;
  const done = results.filter((x) => x.http_status >= 200 && x.http_status < 300).length;
  const headers = ['Instance', 'Answer', 'Detail'];
  const t = table('bulk-results', headers, 'bulk-results-body');
  t.body.replaceChildren(...results.map((x) => row(headers, { 'data-id': x.id, 'data-status': x.http_status }, [
    el('a', { href: '#/instance/' + encodeURIComponent(x.id), class: 'long' }, x.id), String(x.http_status), x.detail])));
  out.replaceChildren(el('p', { id: 'bulk-summary', class: 'answer ' + (done === results.length ? 'ok' : 'error'), role: 'status' },
    verb + ': ' + done + ' of ' + results.length + ' accepted, ' + (results.length - done) + ' refused'), t.table);
}
