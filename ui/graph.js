// A saga's steps drawn as a graph, by the console itself (SVG, no library).
// Each step sits one row below the last of the steps it runs after; a list
// saga is a column, parallel steps stand side by side. Each node is coloured
// by its status (a definition's nodes are plain).
import { svgEl } from './common.js';

const W = 168, H = 44, GAP_X = 20, GAP_Y = 34, PAD = 8;

// The steps each step runs after: `after` when given (a graph), else the
// step before it (a list; the instance view fills `after` itself).
function dependencies(steps) {
  return steps.map((s, i) => (Array.isArray(s.after) ? s.after : i > 0 ? [steps[i - 1].name] : []));
}

function levels(steps, deps) {
  const index = new Map(steps.map((s, i) => [s.name, i]));
  const level = steps.map(() => 0);
  for (let i = 0; i < steps.length; i++)  // steps come in dependency order
    for (const d of deps[i]) if (index.has(d)) level[i] = Math.max(level[i], level[index.get(d)] + 1);
  return level;
}

let graphs = 0;  // each graph's arrow marker has an id of its own
const short = (s, n) => (s.length > n ? s.slice(0, n - 1) + '…' : s);

// steps: [{name, after, status?}]. Returns an <svg> that scales to its box.
export function stepGraph(steps, label) {
  const arrow = 'arrow-' + ++graphs;
  const deps = dependencies(steps);
  const level = levels(steps, deps);
  const rows = [];
  steps.forEach((s, i) => (rows[level[i]] = rows[level[i]] || []).push(i));
  const widest = Math.max(1, ...rows.map((r) => r.length));
  const width = widest * W + (widest - 1) * GAP_X + 2 * PAD;
  const height = rows.length * H + (rows.length - 1) * GAP_Y + 2 * PAD;
  const pos = [];
  rows.forEach((r, y) => {
    const offset = (width - (r.length * W + (r.length - 1) * GAP_X)) / 2;
    r.forEach((i, k) => { pos[i] = { x: offset + k * (W + GAP_X), y: PAD + y * (H + GAP_Y) }; });
  });
  const index = new Map(steps.map((s, i) => [s.name, i]));
  const edges = [];
  steps.forEach((s, i) => deps[i].forEach((d) => {
    if (!index.has(d)) return;
    const a = pos[index.get(d)], b = pos[i];
    edges.push(svgEl('line', { class: 'edge', x1: a.x + W / 2, y1: a.y + H, x2: b.x + W / 2, y2: b.y - 3,
                               'marker-end': 'url(#' + arrow + ')', 'data-from': d, 'data-to': s.name }));
  }));
  const nodes = steps.map((s, i) => svgEl('g', { class: 'node ' + (s.status || 'plain'), 'data-step': s.name },
    svgEl('title', {}, s.name + (s.status ? ': ' + s.status : '')),
    svgEl('rect', { x: pos[i].x, y: pos[i].y, width: W, height: H, rx: 7 }),
    svgEl('text', { x: pos[i].x + W / 2, y: pos[i].y + (s.status ? 18 : 27), 'text-anchor': 'middle' }, short(s.name, 22)),
    s.status ? svgEl('text', { class: 'sub', x: pos[i].x + W / 2, y: pos[i].y + 35, 'text-anchor': 'middle' },
      s.status) : null));
  const summary = steps.map((s, i) => s.name + (deps[i].length ? ' after ' + deps[i].join(' and ') : '') +
    (s.status ? ' (' + s.status + ')' : '')).join('; ');
  return svgEl('svg', { class: 'graph', viewBox: '0 0 ' + width + ' ' + height, role: 'img',
                        'aria-label': label + ': ' + summary, width, 'data-steps': steps.length },
    svgEl('defs', {}, svgEl('marker', { id: arrow, viewBox: '0 0 10 10', refX: 9, refY: 5,
                                        markerWidth: 7, markerHeight: 7, orient: 'auto' },
      svgEl('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))),
    edges, nodes);
}
