// The context inspector: compile the context a
// session's next call would get and show every layer's tokens against its budget.

import {$, api, el, empty, fmt, pickSessions, seg} from './lib.js';

const SECTIONS = ['static', 'dynamic', 'history', 'retrieved', 'message'];
const WARN_AT = 0.8;
const OVER_AT = 0.95;

/** 'ok' | 'warn' | 'over' for `used` of `budget` (dropped items mean it overflowed). */
function level(used, budget, dropped = 0) {
  if (dropped > 0 || (budget > 0 && used / budget >= OVER_AT)) return 'over';
  if (budget > 0 && used / budget >= WARN_AT) return 'warn';
  return 'ok';
}

const pct = (used, budget) => (budget > 0 ? Math.round((100 * used) / budget) : 0);

function bar(used, budget, status) {
  const fill = el('div', {class: 'fill'});
  // Through the CSSOM: the page's CSP forbids style attributes.
  fill.style.width = `${Math.min(100, budget > 0 ? (100 * used) / budget : 0).toFixed(1)}%`;
  return el('div', {class: `bar ${status}`, role: 'meter', 'aria-valuemin': 0,
    'aria-valuemax': budget, 'aria-valuenow': used}, fill);
}

// The message layer's budget is the message's own size: always "full", never a warning.
const sizedToContent = (layer) => layer.section === 'message';

/** What an item says (a memory id alone tells nothing), as text. */
function said(layer, item) {
  const text = layer.texts?.[item];
  return text && text !== item ? el('span', {class: 'item-text'}, ` — ${text}`) : null;
}

function layerRow(layer) {
  const status = sizedToContent(layer) ? 'ok' : level(layer.used, layer.budget, layer.dropped.length);
  return el('div', {class: `layer ${status}${layer.used ? '' : ' unused'}`,
    dataset: {layer: layer.name, level: status}},
  el('div', {class: 'layer-head'}, el('span', {class: 'name'}, layer.name),
    el('span', {class: 'tokens'}, `${fmt(layer.used)} / ${fmt(layer.budget)} tokens`,
      sizedToContent(layer) ? '' : ` · ${pct(layer.used, layer.budget)}%`)),
  bar(layer.used, layer.budget, status),
  layer.included.length || layer.dropped.length ? el('ul', {class: 'items'},
    layer.included.map((item) => el('li', {class: 'included'}, '+ ', item, said(layer, item))),
    layer.dropped.map((d) => el('li', {class: 'dropped'}, '− ', d.item, said(layer, d.item),
      el('em', {}, ` (${d.reason})`))))
    : null);
}

function sectionBlock(name, layers) {
  const used = layers.reduce((sum, l) => sum + l.used, 0);
  const budget = layers.reduce((sum, l) => sum + l.budget, 0);
  return el('section', {class: 'section', dataset: {section: name}},
    el('h3', {}, el('span', {class: 'name'}, name),
      el('span', {class: 'muted small'}, ` ${fmt(used)} / ${fmt(budget)} tokens`)),
    layers.map(layerRow));
}

/** The inspector's own warnings (layers and total near or over their budget), then the
 * compiler's. */
function warningsFor(result) {
  const own = [];
  for (const layer of result.layers) {
    const status = level(layer.used, layer.budget, layer.dropped.length);
    if (status === 'ok' || sizedToContent(layer)) continue;
    const tokens = `(${fmt(layer.used)} / ${fmt(layer.budget)} tokens)`;
    own.push([status, layer.dropped.length
      ? `${layer.section}/${layer.name} is full: ${layer.dropped.length} item(s) dropped ${tokens}`
      : `${layer.section}/${layer.name} at ${pct(layer.used, layer.budget)}% of its budget ${tokens}`]);
  }
  const total = level(result.total_tokens, result.budget);
  if (total !== 'ok') {
    own.push([total, `total at ${pct(result.total_tokens, result.budget)}% of the budget`]);
  }
  return [...own, ...result.warnings.map((text) => ['compiler', text])];
}

function summary(result) {
  const status = level(result.total_tokens, result.budget);
  return el('div', {class: 'summary card', id: 'context-summary'},
    el('div', {class: 'totals'},
      el('div', {}, el('span', {class: 'big'}, fmt(result.total_tokens)), ' tokens'),
      el('div', {}, 'budget ', el('strong', {}, fmt(result.budget)),
        ` (${pct(result.total_tokens, result.budget)}% used)`),
      el('div', {}, 'window ', el('strong', {}, fmt(result.window)), ` · ${result.model}`),
      el('div', {class: 'muted'}, 'prefix hash ', el('code', {id: 'prefix-hash'}, result.prefix_hash)),
      el('div', {class: 'muted small'}, result.token_method)),
    bar(result.total_tokens, result.budget, status),
    el('div', {class: 'muted small'}, `budget is ${pct(result.budget, result.window)}% of the window`));
}

function render(result) {
  const warnings = warningsFor(result);
  const bySection = SECTIONS.map((name) => [name, result.layers.filter((l) => l.section === name)])
    .filter(([, layers]) => layers.length);
  $('#context-result').replaceChildren(
    summary(result),
    el('div', {class: 'warnings', id: 'context-warnings'},
      el('h3', {}, 'Warnings ', el('span', {class: 'count'}, warnings.length)),
      warnings.length
        ? el('ul', {}, warnings.map(([kind, text]) => el('li', {class: `warning ${kind}`}, text)))
        : empty('Everything fits comfortably.')),
    el('div', {class: 'sections'}, bySection.map(([name, layers]) => sectionBlock(name, layers))),
    el('details', {class: 'card'}, el('summary', {}, 'Compiled messages'),
      el('pre', {class: 'content'}, JSON.stringify(result.messages, null, 2))));
}

async function compile() {
  const session = $('#context-session').value;
  if (!session) return;
  const body = {message: $('#context-message').value || null,
    model: $('#context-model').value.trim() || null};
  render(await api(`/api/sessions/${seg(session)}/context`, {method: 'POST', body}));
}

/** #context/<session> preselects that session (the sessions view links here). */
export async function showContext([wanted]) {
  const sessions = await pickSessions($('#context-session'), wanted);
  if (!sessions.length) {
    $('#context-result').replaceChildren(empty('No sessions yet: append events to compile a context.'));
  }
}

const LIVE_DELAY_MS = 400;

export function initContext(app) {
  $('#context-form').addEventListener('submit', app.guard(async (event) => {
    event.preventDefault();
    await compile();
  }));
  // The token counter follows the message as it is typed: the next call's tokens.
  let timer = null;
  $('#context-message').addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(app.guard(compile), LIVE_DELAY_MS);
  });
}
