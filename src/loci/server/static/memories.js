// The memory viewer: facts grouped by type, sticky ones starred, expiry,
// tags, history, add, edit, delete and search; and the key/value state, set and deleted.

import {$, absolute, api, el, empty, relative, seg, tags, when} from './lib.js';

const TYPE_ORDER = ['sticky', 'user_preference', 'project_context', 'learned_pattern'];

function typeRank(type) {
  const rank = TYPE_ORDER.indexOf(type);
  return rank < 0 ? TYPE_ORDER.length : rank;
}

function groupByType(memories) {
  const groups = new Map();
  for (const memory of memories) {
    if (!groups.has(memory.type)) groups.set(memory.type, []);
    groups.get(memory.type).push(memory);
  }
  return [...groups].sort(([a], [b]) => typeRank(a) - typeRank(b) || a.localeCompare(b));
}

const isExpired = (memory) => memory.expires_at && Date.parse(memory.expires_at) <= Date.now();

function expiry(memory) {
  if (!memory.expires_at) return el('span', {class: 'expiry never'}, 'never expires');
  const past = isExpired(memory);
  return el('span', {class: past ? 'expiry expired' : 'expiry'},
    past ? 'expired ' : 'expires ', relative(memory.expires_at), ' · ',
    absolute(memory.expires_at));
}

function star(type) {
  return type === 'sticky'
    ? el('span', {class: 'star', title: 'sticky: in every prompt, never expires'}, '★') : null;
}

function memoryCard(memory, app) {
  const history = el('div', {class: 'history', hidden: true});
  return el('li', {class: isExpired(memory) ? 'card memory expired' : 'card memory',
    dataset: {id: memory.id, type: memory.type}},
  el('div', {class: 'card-head'}, star(memory.type),
    el('p', {class: 'content'}, memory.content)),
  el('div', {class: 'meta'}, memory.superseded_by
    ? el('span', {class: 'badge amber', title: `superseded by ${memory.superseded_by}`},
      'superseded')
    : isExpired(memory) ? el('span', {class: 'badge red'}, 'expired') : null,
    expiry(memory), tags(memory.tags),
    el('span', {class: 'muted'}, 'updated ', when(memory.updated_at)),
    el('code', {class: 'muted'}, memory.id)),
  el('div', {class: 'actions'},
    el('button', {type: 'button', class: 'edit',
      onclick: app.guard((event) => editMemory(event.target.closest('li'), memory, app))},
    'Edit'),
    el('button', {type: 'button', onclick: app.guard(() => toggleHistory(history, memory))},
      'History'),
    el('button', {type: 'button', class: 'danger',
      onclick: app.guard(() => deleteMemory(memory, app))}, 'Delete')),
  history);
}

async function toggleHistory(panel, memory) {
  if (!panel.hidden) { panel.hidden = true; return; }
  const versions = await api(`/api/memories/${seg(memory.id)}/history`);
  const items = versions.map((v) => el('li', {},
    el('div', {class: 'meta'}, el('strong', {}, `v${v.version}`), el('span', {class: 'tag'}, v.type),
      'superseded ', when(v.superseded_at), v.reason ? ` · ${v.reason}` : ''),
    el('p', {class: 'content'}, v.content)));
  panel.replaceChildren(el('h4', {}, 'Earlier versions'),
    items.length ? el('ol', {class: 'versions'}, items) : empty('No earlier versions.'));
  panel.hidden = false;
}

/** Edit a memory in place: its text in a box, saved as its next version. */
function editMemory(card, memory, app) {
  const box = el('textarea', {class: 'edit-content', rows: 3}, memory.content);
  const save = async () => {
    await api(`/api/memories/${seg(memory.id)}`, {method: 'PUT', body: {
      content: box.value, type: memory.type, tags: memory.tags}});
    await showMemories(app);
  };
  card.querySelector('.content').replaceWith(el('form', {class: 'editor',
    onsubmit: app.guard(async (event) => { event.preventDefault(); await save(); })},
  box, el('button', {type: 'submit'}, 'Save'),
  el('button', {type: 'button', onclick: app.guard(() => showMemories(app))}, 'Cancel')));
  box.focus();
}

async function addMemory(app) {
  const content = $('#memory-new').value.trim();
  if (!content) return;
  const labels = $('#memory-new-tags').value.split(',').map((t) => t.trim()).filter(Boolean);
  await api('/api/memories', {method: 'POST', body: {
    content, type: $('#memory-new-type').value, tags: labels}});
  $('#memory-new').value = '';
  $('#memory-new-tags').value = '';
  await Promise.all([showMemories(app), app.refreshOverview()]);
}

async function deleteMemory(memory, app) {
  const preview = memory.content.length > 200 ? `${memory.content.slice(0, 200)}…` : memory.content;
  if (!confirm(`Delete this ${memory.type} memory?\n\n${preview}`)) return;
  await api(`/api/memories/${seg(memory.id)}`, {method: 'DELETE'});
  await Promise.all([showMemories(app), app.refreshOverview()]);
}

/** The most memories one listing returns (the API's limit). */
const MEMORIES_SHOWN = 10000;

export async function showMemories(app) {
  const memories = await api('/api/memories',
    {query: {include_expired: $('#include-expired').checked, limit: MEMORIES_SHOWN}});
  const groups = groupByType(memories).map(([type, items]) =>
    el('section', {class: 'group', dataset: {type}},
      el('h2', {}, star(type), el('span', {class: 'type-name'}, type.replaceAll('_', ' ')),
        el('span', {class: 'count'}, items.length)),
      el('ul', {class: 'cards'}, items.map((m) => memoryCard(m, app)))));
  const capped = memories.length === MEMORIES_SHOWN && el('p', {class: 'muted', id: 'memories-capped'},
    `The newest ${MEMORIES_SHOWN.toLocaleString()} memories are shown: search finds the older ones.`);
  $('#memory-groups').replaceChildren(capped || '',
    ...(groups.length ? groups : [empty('No memories yet.')]));
}

async function search(app) {
  const query = $('#memory-query').value.trim();
  if (!query) { clearSearch(); return; }
  const hits = await api('/api/search', {method: 'POST', body: {query, limit: 20}});
  const items = hits.map((hit) => el('li', {class: 'card', dataset: {id: hit.id}},
    el('div', {class: 'card-head'}, star(hit.type), el('p', {class: 'content'}, hit.summary)),
    el('div', {class: 'meta'}, el('span', {class: 'tag type'}, hit.type), tags(hit.tags),
      el('span', {class: 'muted'}, `relevance ${Number(hit.relevance).toFixed(2)}`),
      el('code', {class: 'muted'}, hit.id))));
  $('#search-results').replaceChildren(el('section', {class: 'group results'},
    el('h2', {}, `Search results for “${query}”`, el('span', {class: 'count'}, hits.length)),
    items.length ? el('ul', {class: 'cards'}, items) : empty('Nothing found.')));
  $('#memory-search-clear').hidden = false;
}

function clearSearch() {
  $('#memory-query').value = '';
  $('#search-results').replaceChildren();
  $('#memory-search-clear').hidden = true;
}

export function initMemories(app) {
  $('#memory-search').addEventListener('submit', app.guard(async (event) => {
    event.preventDefault();
    await search(app);
  }));
  $('#memory-search-clear').addEventListener('click', clearSearch);
  $('#include-expired').addEventListener('change', app.guard(() => showMemories(app)));
  $('#memory-add').addEventListener('submit', app.guard(async (event) => {
    event.preventDefault();
    await addMemory(app);
  }));
  $('#state-set').addEventListener('submit', app.guard(async (event) => {
    event.preventDefault();
    const key = $('#state-key').value.trim();
    if (!key) return;
    await api(`/api/state/${seg(key)}`, {method: 'PUT', body: {value: $('#state-value').value}});
    $('#state-key').value = '';
    $('#state-value').value = '';
    await Promise.all([showState(app), app.refreshOverview()]);
  }));
}

async function deleteState(item, app) {
  if (!confirm(`Delete the state key “${item.key}”?`)) return;
  await api(`/api/state/${seg(item.key)}`, {method: 'DELETE'});
  await Promise.all([showState(app), app.refreshOverview()]);
}

export async function showState(app) {
  const items = await api('/api/state');
  const rows = items.map((item) => el('tr', {dataset: {key: item.key}},
    el('td', {}, el('code', {}, item.key)), el('td', {class: 'value'}, item.value),
    el('td', {}, when(item.updated_at), el('div', {class: 'muted small'}, absolute(item.updated_at))),
    el('td', {}, el('button', {type: 'button', class: 'edit', onclick: () => {
      $('#state-key').value = item.key;
      $('#state-value').value = item.value;
      $('#state-value').focus();
    }}, 'Edit'), el('button', {type: 'button', class: 'danger',
      onclick: app.guard(() => deleteState(item, app))}, 'Delete'))));
  $('#state-table').replaceChildren(rows.length
    ? el('table', {class: 'grid'},
      el('thead', {}, el('tr', {}, ['Key', 'Value', 'Updated', ''].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows))
    : empty('No state yet.'));
}
