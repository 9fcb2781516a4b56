// Usage: the LLM calls recorded for the caller's sessions (GET /api/usage): per session
// calls, input tokens, cache-hit rate and cost beside the cost of sending the whole log
// uncached; for one session a chart of input tokens per call, cached and uncached, with
// the calls after a compaction marked.

import {$, api, el, empty, fmt, seg, when} from './lib.js';

const money = (value) => (value == null ? '–' : `$${value.toFixed(4)}`);
const percent = (value) => (value == null ? '–' : `${Math.round(100 * value)}%`);

function figures(totals, id) {
  return el('dl', {class: 'figures', id},
    [['calls', fmt(totals.calls)], ['input tokens', fmt(totals.input_tokens)],
      ['cache hits', percent(totals.hit_rate)], ['cost', money(totals.cost)],
      ['whole log, uncached', money(totals.full_cost)], ['saved', percent(totals.saving)],
      ['compactions', fmt(totals.compactions)]]
      .map(([name, value]) => el('div', {dataset: {figure: name}}, el('dt', {}, name),
        el('dd', {}, value))));
}

/** One column per call: cached input at the bottom, the rest above, heights through the
 * CSSOM (the page's CSP forbids style attributes); a mark before each call that followed
 * a compaction. */
function chart(calls) {
  const top = Math.max(1, ...calls.map((c) => c.input_tokens));
  const part = (kind, tokens, call) => {
    const node = el('div', {class: kind, dataset: {call: call.id, tokens}});
    node.style.height = `${((100 * tokens) / top).toFixed(2)}%`;
    return node;
  };
  let seen = 0;
  const columns = calls.map((call, n) => {
    const after = call.compactions > seen;
    seen = call.compactions;
    return el('div', {class: 'call', title: `call ${n + 1}: ${fmt(call.input_tokens)} input, ` +
      `${fmt(call.cached_tokens)} cached`},
    after ? el('div', {class: 'compaction', dataset: {call: call.id}}) : null,
    part('uncached', call.input_tokens - call.cached_tokens, call),
    part('cached', call.cached_tokens, call));
  });
  return el('figure', {class: 'card chart'},
    el('div', {class: 'axis muted small'}, el('span', {}, fmt(top)), el('span', {}, '0')),
    el('div', {id: 'usage-chart', class: 'columns', role: 'img',
      'aria-label': 'input tokens per call, cached and uncached'}, columns),
    el('figcaption', {class: 'muted small'},
      el('span', {class: 'key cached'}), ' cached ', el('span', {class: 'key uncached'}),
      ' uncached input tokens per call; a dashed line marks a call after a compaction'));
}

function sessionRow(item, selected) {
  return el('tr', {class: item.session === selected ? 'selected' : '',
    dataset: {session: item.session}},
  el('td', {}, el('a', {href: `#usage/${seg(item.session)}`}, item.session),
    el('div', {class: 'muted small'}, item.agent)),
  el('td', {}, fmt(item.calls)), el('td', {}, fmt(item.input_tokens)),
  el('td', {}, percent(item.hit_rate)), el('td', {}, money(item.cost)),
  el('td', {}, money(item.full_cost)), el('td', {}, when(item.last)));
}

export async function showUsage([session]) {
  const overview = await api('/api/usage');
  const parts = [];
  if (!overview.sessions.length) {
    $('#usage-view').replaceChildren(empty('No LLM calls recorded yet: calls through the ' +
      'proxy, or POST /api/usage, are recorded here.'));
    return;
  }
  parts.push(figures(overview.totals, 'usage-figures'), el('table', {class: 'usage-table'},
    el('thead', {}, el('tr', {}, ['session', 'calls', 'input', 'cache hits', 'cost',
      'whole log, uncached', 'last call'].map((h) => el('th', {}, h)))),
    el('tbody', {}, overview.sessions.map((item) => sessionRow(item, session)))));
  if (session) {
    const report = await api('/api/usage', {query: {session}});
    parts.push(el('h3', {}, `Session ${session}`),
      figures(report.totals, 'usage-session-figures'), chart(report.calls));
  }
  if (overview.unpriced.length) {
    parts.push(el('p', {class: 'muted small'}, 'Not priced (add them under [prices] in ' +
      `loci.toml): ${overview.unpriced.join(', ')}`));
  }
  $('#usage-view').replaceChildren(...parts);
}
