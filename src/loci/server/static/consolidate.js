// Consolidation you can review: the pending proposal (or a new one) as a diff of
// merges, supersessions, retirements and retypes; nothing changes until Accept, which
// applies that proposal by its id (refused if its memories changed since).

import {$, api, el, empty, seg, when} from './lib.js';
import {showMemories} from './memories.js';

const SIGNS = {merge: ['=', '-'], supersede: ['-', '+'], retire: ['-'], retype: ['~']};

function changeItem(change) {
  const signs = SIGNS[change.kind] ?? ['·'];
  const lines = change.ids.map((id, n) => {
    const sign = signs[Math.min(n, signs.length - 1)];
    return el('div', {class: 'diff-line', dataset: {sign}},
      el('code', {class: 'muted'}, `${sign} ${id}`), ' ', change.texts[n] ?? '');
  });
  return el('li', {class: 'card change', dataset: {kind: change.kind}},
    el('div', {class: 'meta'}, el('span', {class: 'badge grey'}, change.kind),
      change.type ? el('span', {class: 'tag'}, `→ ${change.type}`) : null,
      el('span', {class: 'muted'}, change.reason)),
    ...lines);
}

function render(proposal, app) {
  const counts = Object.entries(proposal.counts).filter(([, n]) => n)
    .map(([kind, n]) => `${n} ${kind}`).join(', ');
  const acceptButton = el('button', {type: 'button', id: 'consolidation-accept',
    onclick: app.guard(() => accept(proposal, app))}, 'Accept');
  $('#consolidation').replaceChildren(el('section', {class: 'group consolidation',
    dataset: {id: proposal.id}},
  el('h2', {}, 'Consolidation proposal', el('span', {class: 'count'}, proposal.changes.length)),
  el('p', {class: 'hint'}, `${proposal.id} by ${proposal.proposer}, `, when(proposal.created_at),
    counts ? ` · ${counts}` : ' · nothing to change'),
  ...proposal.notes.map((note) => el('p', {class: 'hint'}, note)),
  proposal.changes.length ? el('ul', {class: 'cards'}, proposal.changes.map(changeItem))
    : empty('The memories need no consolidation.'),
  el('div', {class: 'actions'}, proposal.changes.length ? acceptButton : null,
    el('button', {type: 'button', onclick: () => $('#consolidation').replaceChildren()},
      'Close'))));
}

async function accept(proposal, app) {
  const done = await api(`/api/memories/consolidation/${seg(proposal.id)}/apply`,
    {method: 'POST'});
  const counts = Object.entries(done.counts).filter(([, n]) => n)
    .map(([kind, n]) => `${n} ${kind}`).join(', ');
  $('#consolidation').replaceChildren(el('p', {class: 'hint', id: 'consolidation-done'},
    `Applied ${counts}. Earlier versions are in each memory's history; `,
    'retired memories can be restored (loci restore ID).'));
  await Promise.all([showMemories(app), app.refreshOverview()]);
}

/** Show the pending proposal, if there is one (the server may have prepared it). */
export async function showPending(app) {
  try {
    render(await api('/api/memories/consolidation'), app);
  } catch (error) {
    if (error.status !== 404) throw error;
    $('#consolidation').replaceChildren();
  }
}

export function initConsolidation(app) {
  $('#consolidation-propose').addEventListener('click', app.guard(async () => {
    render(await api('/api/memories/consolidation', {method: 'POST'}), app);
  }));
}
