// The eval page (`loci eval` in the browser): replay a stored session step by step in a
// scratch store (GET /api/sessions/<id>/eval) and show, per window, the share of the
// agent's trail (files, commands, errors, edits) the compiled context holds at each
// point of the session against the recency tail, as a line chart, and the classes at
// the last point as a table.

import {$, ApiError, api, el, empty, fmt, pickSessions, seg, svg} from './lib.js';

const LABELS = {loci: 'Loci', tail_at_loci_tokens: 'recency tail at Loci\'s tokens',
  tail_at_history_budget: 'recency tail at the history budget', whole: 'whole transcript'};
/** The chart's lines, one per baseline but the whole transcript: it holds every
 * artifact by definition (the table's last column). */
const SERIES = ['loci', 'tail_at_loci_tokens', 'tail_at_history_budget'];
const label = (baseline) => LABELS[baseline] ?? baseline.replaceAll('_', ' ');
const SIZE = {width: 560, height: 220, left: 44, right: 16, top: 12, bottom: 30};
const GRID = [0, 0.25, 0.5, 0.75, 1];

/** 0.846 -> "84.6%"; a class with nothing in the trail so far -> "–". */
const share = (value) => (value == null ? '–' : `${(100 * value).toFixed(1)}%`);
const at = (cut) => `${Math.round(100 * cut)}%`;

/** A report's figure at a point: its keys start with the point as Python writes it
 * ("1.0|all|loci"), which JavaScript writes otherwise ("1"), so the prefixes are read
 * from the report's own keys. */
function figures(report) {
  const prefixes = new Map(Object.keys(report).filter((key) => key.endsWith('|tokens_mean'))
    .map((key) => key.split('|')[0]).map((prefix) => [Number(prefix), prefix]));
  return (cut, ...rest) => report[[prefixes.get(cut), ...rest].join('|')];
}

function chart(report) {
  const figure = figures(report);
  const {width, height, left, right, top, bottom} = SIZE;
  const x = (cut) => left + cut * (width - left - right);
  const y = (value) => top + (1 - value) * (height - top - bottom);
  const grid = GRID.map((v) => svg('g', {class: 'grid'},
    svg('line', {x1: left, x2: width - right, y1: y(v), y2: y(v)}),
    svg('text', {x: left - 6, y: y(v) + 4, 'text-anchor': 'end'}, at(v))));
  const ticks = report.cuts.map((cut) => svg('text', {class: 'tick', x: x(cut),
    y: height - bottom + 16, 'text-anchor': 'middle'}, at(cut)));
  const lines = SERIES.map((name) => {
    // A point where the trail held nothing yet has no share: the line skips it.
    const held = report.cuts.map((cut) => [cut, figure(cut, 'all', name)])
      .filter(([, value]) => value != null);
    return svg('g', {class: `series s-${name}`, dataset: {series: name}},
      svg('polyline', {points: held.map(([cut, v]) => `${x(cut)},${y(v)}`).join(' ')}),
      held.map(([cut, value]) => svg('circle', {cx: x(cut), cy: y(value), r: 3.5,
        dataset: {cut, value}}, svg('title', {}, `${label(name)} at ${at(cut)} of the ` +
        `session: ${share(value)} of the trail` + (name === 'loci'
          ? ` in ${fmt(figure(cut, 'tokens_mean'))} tokens` : '')))));
  });
  return el('figure', {class: 'eval-chart'},
    svg('svg', {viewBox: `0 0 ${width} ${height}`, role: 'img', dataset: {window: report.window},
      'aria-label': `share of the trail held at each point, window ${report.window} tokens`},
    grid, ticks, lines),
    el('figcaption', {class: 'muted small'}, SERIES.map((name) => el('span',
      {class: 'legend'}, el('span', {class: `key s-${name}`}), ` ${label(name)} `)),
    '· x: point of the session (share of its messages), y: share of the trail so far held'));
}

function table(report, answer) {
  const last = Math.max(...report.cuts);
  const figure = figures(report);
  const rows = [...answer.classes, 'all'].map((kind) => el('tr', {dataset: {class: kind}},
    el('th', {}, kind),
    answer.baselines.map((name) => el('td', {dataset: {baseline: name}},
      share(figure(last, kind, name)))),
    el('td', {dataset: {baseline: 'found'}}, share(report[`missed_found|${kind}`]))));
  return el('table', {class: 'grid eval-table', dataset: {window: report.window}},
    el('caption', {class: 'muted small'}, `At ${at(last)} of the session: the share of each ` +
      'class of the trail held; the last column, of what Loci\'s context missed, the share ' +
      'search_conversation finds in its top 10'),
    el('thead', {}, el('tr', {}, el('th', {}, 'class'),
      answer.baselines.map((name) => el('th', {}, label(name))),
      el('th', {}, 'missed, found by search'))),
    el('tbody', {}, rows));
}

function windowBlock(report, answer) {
  const last = Math.max(...report.cuts);
  const figure = figures(report);
  return el('section', {class: 'card eval-window', dataset: {window: report.window}},
    el('h3', {}, `Window ${fmt(report.window)} tokens`),
    el('p', {class: 'muted small'}, `${fmt(report.contexts)} compiles (p50 ` +
      `${report.compile_p50_ms} ms), ${report.empty_histories} with an empty history, ` +
      `${report.broken_pairs} broken tool-call pairs`),
    chart(report),
    table(report, answer),
    el('dl', {class: 'figures'},
      [[`Loci's tokens at ${at(last)}`, fmt(figure(last, 'tokens_mean'))],
        ['fewer than the whole transcript', share(figure(last, 'reduction'))],
        ['task in the context', figure(last, 'task') ? 'yes' : 'no']]
        .map(([name, value]) => el('div', {dataset: {figure: name}}, el('dt', {}, name),
          el('dd', {}, value)))));
}

/** One replay at a time from this page (the server refuses a second one anyway). */
let busy = false;

async function run() {
  const session = $('#eval-session').value;
  if (!session || busy) return;
  const result = $('#eval-result');
  const button = $('#eval-run');
  button.disabled = busy = true;
  result.replaceChildren(el('p', {class: 'loading', id: 'eval-loading'},
    `Replaying ${session}: a context is compiled before each model call of the session, ` +
    'for each window. Seconds for a short session, longer for a long one.'));
  try {
    const answer = await api(`/api/sessions/${seg(session)}/eval`, {query: {
      windows: $('#eval-windows').value.trim(), points: $('#eval-points').value.trim()}});
    result.replaceChildren(el('h2', {}, 'Session ', el('code', {}, answer.session)),
      ...answer.reports.map((report) => windowBlock(report, answer)));
  } catch (error) {
    result.replaceChildren(el('p', {class: 'error', id: 'eval-error', role: 'alert'},
      error instanceof ApiError ? `${error.status} ${error.type}: ${error.message}`
        : `Error: ${error.message ?? error}`));
  } finally {
    button.disabled = busy = false;
  }
}

/** #eval/<session> preselects that session (the sessions view links here); the replay
 * runs when asked, not on arrival: it takes a while. */
export async function showEval([wanted]) {
  const sessions = await pickSessions($('#eval-session'), wanted);
  $('#eval-run').disabled = busy || !sessions.length;
  if (!sessions.length) {
    $('#eval-result').replaceChildren(empty('No sessions yet. Import an agent\'s log ' +
      'first, e.g. loci import --format claude-code ~/.claude/projects/PROJECT ' +
      '(or --format codex, openai, anthropic), then replay it here.'));
  }
}

export function initEval(app) {
  $('#eval-form').addEventListener('submit', app.guard(async (event) => {
    event.preventDefault();
    await run();
  }));
}
