// One instance: its graph, steps (a run's decisions and calls), recovery
// bundle, receipt, timeline, and the
// operator's actions, each enabled exactly when the server would accept it
// (the view's `actions`, decided by the server's own rules).
import { api, answerBox, canOperate, el, field, json, longValue, poll, pre, row, setMain,
         statusBadge, table, when } from './common.js';
import { stepGraph } from './graph.js';

// A run's calls, in the order its agent made them.
const CALL_COLUMNS = ['Call', 'Tool', 'Status', 'Arguments', 'Result', 'Reason', 'Evidence', 'Model', 'By'];

function callRow(c) {
  return row(CALL_COLUMNS, { 'data-call': c.call_id }, [
    c.call_id, el('td', { class: 'call-tool' }, c.tool || '-'),
    el('td', { class: 'call-status' }, statusBadge(c.status),
      c.guard ? el('span', { class: 'call-guard' }, ' held by guard ' + c.guard.name + ': ' + c.guard.why) : ''),
    pre(json(c.arguments || {}), { class: 'call-arguments' }),
    c.result === null || c.result === undefined ? '-' : pre(json(c.result), { class: 'call-result' }),
    el('td', { class: 'call-reason' }, c.reason || '-'),
    el('td', { class: 'call-evidence' }, (c.evidence || []).map(String).join(', ') || '-'),
    el('td', { class: 'call-model' }, c.model || '-'),
    el('td', { class: 'call-by' }, c.by || '-')]);
}

// A run's decisions, in the order recorded; each before the call it led to
// (its place among the calls: how many had been made).
const DECISION_COLUMNS = ['Decision', 'Value', 'Model', 'By', 'Recorded', 'Calls before'];

function decisionRow(d) {
  return row(DECISION_COLUMNS, { 'data-decision': d.decision_id }, [
    d.decision_id, pre(json(d.value), { class: 'decision-value' }),
    el('td', { class: 'decision-model' }, [d.model, d.prompt_version].filter(Boolean).join(' · ') || '-'),
    d.by || '-', when(d.recorded_at), String(d.after_calls ?? '-')]);
}

// The receipt (a hash chain an auditor checks with sagactl verify-receipt)
// as a file: fetched with the token, saved from memory.
function receiptButton(path, id) {
  return el('button', { id: 'receipt-download', type: 'button', onclick: async () => {
    const r = await api('GET', path + '/receipt');
    if (r.status !== 200) return;
    const a = el('a', { href: URL.createObjectURL(new Blob([JSON.stringify(r.body, null, 1)],
      { type: 'application/json' })), download: 'receipt-' + id + '.json' });
    document.body.append(a);
    a.click();
    a.remove();
  } }, 'Download receipt');
}

const STEP_COLUMNS = ['Step', 'After', 'Status', 'Attempts', 'Last error', 'Next retry',
                      'External ref', 'Compensation', 'Approval'];

export function instancePage(id) {
  const head = el('div', { id: 'instance-head', class: 'card' });
  const graph = el('div', { id: 'graph', class: 'card graph-box' });
  const steps = table('steps', STEP_COLUMNS, 'steps-body');
  const timeline = el('ol', { id: 'timeline', class: 'timeline' });
  const bundle = el('div', { id: 'bundle' });
  const forms = el('div', { id: 'forms' });
  const calls = table('calls', CALL_COLUMNS, 'calls-body');
  const callsBox = el('div', { id: 'calls-box', hidden: true }, el('h2', {}, 'Calls'), calls.table);
  const decisions = table('decisions', DECISION_COLUMNS, 'decisions-body');
  const decisionsBox = el('div', { id: 'decisions-box', hidden: true }, el('h2', {}, 'Decisions'),
    decisions.table);
  const path = '/v1/instances/' + encodeURIComponent(id);
  setMain(el('h1', {}, 'Instance ', longValue(id, 'instance-id', 'instance id')), head,
    el('p', {}, receiptButton(path, id)), decisionsBox, callsBox,
    el('h2', {}, 'Graph'), graph, el('h2', {}, 'Steps'), steps.table,
    forms, bundle, el('h2', {}, 'Timeline'), timeline);
  let built = null;  // the operator forms, built once (typing survives refreshes)
  const refresh = poll(async () => {
    const r = await api('GET', path);
    if (r.status !== 200) { head.replaceChildren(answerBox(r)); return; }
    const inst = r.body;
    head.replaceChildren(instanceHead(inst));
    graph.replaceChildren(stepGraph(inst.steps, 'Steps of ' + inst.saga));
    steps.body.replaceChildren(...inst.steps.map((s) => stepRow(s)));
    callsBox.hidden = inst.kind !== 'run';
    if (inst.kind === 'run') calls.body.replaceChildren(...(inst.calls || []).map(callRow));
    decisionsBox.hidden = !(inst.decisions || []).length;
    decisions.body.replaceChildren(...(inst.decisions || []).map(decisionRow));
    const ev = await api('GET', path + '/events');
    if (ev.status === 200) timeline.replaceChildren(...ev.body.events.map(timelineItem));
    await showBundle(bundle, path, inst);
    if (canOperate()) {
      if (!built) { built = operatorForms(id, inst, () => refresh()); forms.replaceChildren(built.node); }
      built.update(inst);
    }
  });
}

function instanceHead(inst) {
  return el('div', { class: 'kv' },
    el('span', {}, inst.kind === 'run' ? 'toolbox (a run)' : 'saga'),
    el('span', {}, el('a', { href: '#/sagas' }, inst.saga + ' v' + inst.saga_version)),
    el('span', {}, inst.kind === 'run' ? 'opened by' : 'submitted by'),
    el('span', { id: 'instance-owner' }, inst.owner || '-'),
    inst.kind === 'run' ? el('span', {}, 'agent') : '',
    inst.kind === 'run' ? pre(json(inst.metadata || {}), { id: 'run-metadata' }) : '',
    inst.idle_until ? el('span', {}, 'waits for its agent until') : '',
    inst.idle_until ? el('span', { id: 'idle-until' }, when(inst.idle_until)) : '',
    el('span', {}, 'status'), el('span', { id: 'instance-status' }, statusBadge(inst.status)),
    el('span', {}, 'waiting for'), el('span', {}, inst.waiting_for || '-'),
    el('span', {}, 'current steps'), el('span', { id: 'current-steps' }, (inst.current_steps || []).join(', ') || '-'),
    el('span', {}, 'review reason'), el('span', { id: 'review-reason' }, inst.review_reason || '-'),
    el('span', {}, 'created / updated'), el('span', {}, when(inst.created_at) + ' / ' + when(inst.updated_at)),
    el('span', {}, 'input'), pre(json(inst.input), { id: 'instance-input' }));
}

function stepRow(s) {
  const comp = s.compensation;
  const approval = s.approval ? (s.approval.decision || '') + ' by ' + (s.approval.by || '?') +
    (s.approval.comment ? ': ' + s.approval.comment : '') + (s.approval.reason ? ': ' + s.approval.reason : '') : '-';
  return row(STEP_COLUMNS, { 'data-step': s.name }, [
    s.name, (s.after || []).join(', ') || '-',
    el('td', { class: 'step-status' }, statusBadge(s.status), s.waiting_for ? ' waiting for ' + s.waiting_for : ''),
    s.attempts, el('td', { class: 'last-error' }, s.last_error || '-'), when(s.next_retry_at),
    el('td', { class: 'external-ref' }, s.external_ref || '-'),
    el('td', { class: 'compensation' }, comp ? el('span', {}, statusBadge(comp.status),
      comp.external_ref ? ' ' + comp.external_ref : '', comp.last_error ? ' — ' + comp.last_error : '') : '-'),
    el('td', { class: 'approval' }, approval)]);
}

function timelineItem(e) {
  const d = e.data || {};
  const detail = d.reason || d.error || d.comment;
  return el('li', { 'data-type': e.type, 'data-step': e.step || '', 'data-by': e.by || '' },
    el('time', {}, when(e.at)), ' ', e.type + (e.step ? ' · ' + e.step : '') + (detail ? ' — ' + detail : '') +
    (e.by && e.by !== 'sagad' ? ' (by ' + e.by + ')' : ''));
}

async function showBundle(bundle, path, inst) {
  if (inst.status !== 'NEEDS_REVIEW') { bundle.replaceChildren(); return; }
  const b = await api('GET', path + '/bundle');
  if (b.status !== 200) return;
  bundle.replaceChildren(el('h2', {}, 'Recovery bundle'),
    el('div', { class: 'card' },
      el('div', {}, el('strong', {}, 'Recommended: '), el('span', { id: 'recommended' }, b.body.recommended_action)),
      el('div', {}, 'Unknown effects: '), pre(json(b.body.unknown_effects), { id: 'unknown-effects' }),
      el('div', {}, 'Confirmed effects: '), pre(json(b.body.confirmed_effects), { id: 'confirmed-effects' })));
}

// The server's verdict on an action ({allowed, reason}); absent: not offered.
function verdict(inst, action, step) {
  const a = inst.actions || {};
  const v = step === undefined ? a[action] : ((a.steps || {})[step] || {})[action];
  return v || { allowed: false, reason: 'the server did not say this is possible' };
}

// The step an action should point at: the one the operator chose, else the
// first the server would accept it for, else the step the saga is at.
function defaultStep(inst, action) {
  const ok = inst.steps.find((s) => verdict(inst, action, s.name).allowed);
  if (ok) return ok.name;
  return (inst.current_steps || [])[0] || inst.steps[0].name;
}

// The forms for an instance. update() moves untouched step choices to the
// step that needs the operator and enables each button from the server's
// verdict; it never rebuilds the inputs.
function operatorForms(id, inst, refresh) {
  const out = el('div', { id: 'action-answer' });
  const base = '/v1/instances/' + encodeURIComponent(id);
  let current = inst;
  const send = async (p, body) => {
    out.replaceChildren(el('div', { class: 'answer', role: 'status' }, 'Sending…'));
    const r = await api('POST', base + p, body);
    out.replaceChildren(answerBox(r));
    await refresh();  // the result shows at once
  };
  const gates = [];  // [button, why, () => verdict]
  const why = () => el('span', { class: 'why' });
  const stepChoice = (cls, action) => {
    const sel = el('select', { class: cls }, inst.steps.map((s) => el('option', { value: s.name }, s.name)));
    sel.addEventListener('change', () => { sel.dataset.chosen = '1'; update(current); });
    sel.dataset.action = action;
    return sel;
  };
  const input = (cls) => el('input', { class: cls, type: 'text' });
  const stepOf = (sel) => encodeURIComponent(sel.value);

  const aStep = stepChoice('approve-step', 'approve');
  const aComment = input('approve-comment');
  const aBtn = el('button', { id: 'approve', onclick: () => send('/steps/' + stepOf(aStep) + '/approve', { comment: aComment.value }) }, 'Approve');
  const aReason = input('reject-reason');
  const jBtn = el('button', { id: 'reject', class: 'danger', onclick: () => send('/steps/' + stepOf(aStep) + '/reject', { reason: aReason.value }) }, 'Reject');
  const aWhy = why(), jWhy = why();

  const rStep = stepChoice('resolve-step', 'resolve');
  const rOutcome = el('select', { class: 'resolve-outcome' },
    el('option', { value: 'committed' }, 'committed (it happened)'),
    el('option', { value: 'not_executed' }, 'not executed (it did not)'));
  const rRef = input('resolve-ref'), rComment = input('resolve-comment');
  const rBtn = el('button', { id: 'resolve', onclick: () => send('/steps/' + stepOf(rStep) + '/resolve',
    { outcome: rOutcome.value, external_ref: rRef.value, comment: rComment.value }) }, 'Resolve');
  const rWhy = why();

  const tStep = stepChoice('retry-step', 'retry');
  const tBtn = el('button', { id: 'retry', onclick: () => send('/steps/' + stepOf(tStep) + '/retry', {}) }, 'Retry now');
  const tWhy = why();

  const sStep = stepChoice('skip-step', 'skip');
  const sResult = el('input', { class: 'skip-result', type: 'text', placeholder: '{"ref": "..."}' });
  const sRef = input('skip-ref');
  const sBtn = el('button', { id: 'skip', onclick: () => {
    let result;
    try { result = JSON.parse(sResult.value || '{}'); } catch (e) {
      out.replaceChildren(el('div', { class: 'answer error', role: 'status' }, 'The result is not JSON: ' + e.message)); return;
    }
    send('/steps/' + stepOf(sStep) + '/skip', { result, external_ref: sRef.value });
  } }, 'Skip with result');
  const sWhy = why();

  const cReason = input('compensate-reason');
  const cBtn = el('button', { id: 'compensate', class: 'danger', onclick: () => send('/compensate', { reason: cReason.value }) }, 'Compensate');
  const cWhy = why();
  const xReason = input('cancel-reason');
  const xBtn = el('button', { id: 'cancel', class: 'danger', onclick: () => send('/cancel', { reason: xReason.value }) }, 'Cancel');
  const xWhy = why();

  gates.push([aBtn, aWhy, (c) => verdict(c, 'approve', aStep.value)], [jBtn, jWhy, (c) => verdict(c, 'reject', aStep.value)],
    [rBtn, rWhy, (c) => verdict(c, 'resolve', rStep.value)], [tBtn, tWhy, (c) => verdict(c, 'retry', tStep.value)],
    [sBtn, sWhy, (c) => verdict(c, 'skip', sStep.value)], [cBtn, cWhy, (c) => verdict(c, 'compensate')],
    [xBtn, xWhy, (c) => verdict(c, 'cancel')]);
  const line = (name, ...items) => el('div', { class: 'row action-row' }, el('strong', { class: 'row-name' }, name), ...items);
  const node = el('section', { class: 'card operator-forms', 'aria-labelledby': 'actions-title' },
    el('h2', { id: 'actions-title' }, 'Operator actions'),
    line('Approve or reject', field('Step', aStep), field('Comment', aComment), aBtn, aWhy,
      field('Reason', aReason), jBtn, jWhy),
    line('Resolve', field('Step', rStep), field('Outcome', rOutcome), field('External ref', rRef),
      field('Comment', rComment), rBtn, rWhy),
    line('Retry', field('Step', tStep), tBtn, tWhy),
    line('Skip', field('Step', sStep), field('Result (JSON)', sResult), field('External ref', sRef), sBtn, sWhy),
    line('Compensate', field('Reason', cReason), cBtn, cWhy),
    line('Cancel', field('Reason', xReason), xBtn, xWhy),
    out);
  const update = (cur) => {
    current = cur;
    for (const sel of [aStep, rStep, tStep, sStep])
      if (!sel.dataset.chosen) sel.value = defaultStep(cur, sel.dataset.action);
    for (const [btn, whyNode, v] of gates) {
      const d = v(cur);
      btn.disabled = !d.allowed;
      whyNode.textContent = d.allowed ? '' : d.reason || '';
    }
  };
  return { node, update };
}
