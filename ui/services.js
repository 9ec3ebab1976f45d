// Downstream services (limits, calls in flight, steps queued, paused) with
// pause and resume for operators; and the sagas this sagad runs, each drawn
// as its graph.
import { api, answerBox, canOperate, el, poll, row, setMain, table, when } from './common.js';
import { stepGraph } from './graph.js';

const COLUMNS = ['Service', 'State', 'Paused by', 'Max in flight', 'Max per second', 'Connections', 'In flight', 'Queued', 'Action'];

export function servicesPage() {
  const list = table('services', COLUMNS, 'services-body');
  const out = el('div', { id: 'services-answer' });
  setMain(el('h1', {}, 'Services'),
    el('p', { class: 'muted' }, 'A paused service gets no new request; calls under way finish and ' +
      'unclear outcomes are still asked about.'),
    list.table, out);
  let refresh = null;
  const act = async (name, action) => {
    const a = await api('POST', '/v1/services/' + encodeURIComponent(name) + '/' + action, {});
    out.replaceChildren(answerBox(a));
    await refresh();
  };
  refresh = poll(async () => {
    const r = await api('GET', '/v1/services');
    if (r.status !== 200) { out.replaceChildren(answerBox(r)); return; }
    list.body.replaceChildren(...r.body.services.map((s) => {
      const button = !canOperate() ? '-'
        : s.paused ? el('button', { class: 'resume', onclick: () => act(s.name, 'resume') }, 'Resume ' + s.name)
        : el('button', { class: 'pause danger', onclick: () => act(s.name, 'pause') }, 'Pause ' + s.name);
      return row(COLUMNS, { 'data-service': s.name }, [
        s.name, el('td', { class: 'state' }, s.paused ? 'paused' : 'open'),
        el('td', { class: 'pause-note' }, pauseNote(s)),
        s.max_in_flight === null ? '-' : s.max_in_flight, s.max_per_second === null ? '-' : s.max_per_second,
        s.max_connections,
        el('td', { class: 'in-flight' }, s.in_flight), el('td', { class: 'queued' }, s.queued), button]);
    }));
  });
}

// Who paused a service, since when and why ("-" while it is open).
function pauseNote(s) {
  if (!s.paused || !s.pause) return '-';
  const why = s.pause.reason ? ' (' + s.pause.reason + ')' : '';
  return (s.pause.by || '?') + ' since ' + when(s.pause.since) + why;
}

export async function sagasPage() {
  const box = el('div', { id: 'sagas' });
  setMain(el('h1', {}, 'Sagas'), box);
  const r = await api('GET', '/v1/sagas');
  if (r.status !== 200) { box.replaceChildren(answerBox(r)); return; }
  box.replaceChildren(...r.body.sagas.map((d) => el('section', { class: 'card saga', 'data-saga': d.name + '@' + d.version },
    el('h2', {}, d.name + ' v' + d.version),
    el('p', { class: 'muted' }, d.steps.length + ' steps; required input: ' + ((d.required_input || []).join(', ') || 'none')),
    el('div', { class: 'graph-box' }, stepGraph(d.steps, 'Steps of ' + d.name + ' v' + d.version)))));
}
