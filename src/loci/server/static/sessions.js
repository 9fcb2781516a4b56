// Sessions: the list with counts, and one session's event log and compactions.
// Archived events (compacted away, still stored) and masked tool outputs (history shows
// a short stand-in) are marked, so what the model sees is distinguishable from the log.

import {$, absolute, api, el, empty, fmt, seg, when} from './lib.js';

function sessionLink(session, selected) {
  return el('a', {href: `#sessions/${seg(session.id)}`, dataset: {session: session.id},
    class: session.id === selected ? 'item selected' : 'item'},
  el('strong', {}, session.id),
  el('span', {class: 'muted small'},
    `${fmt(session.event_count)} events · ${fmt(session.message_count)} messages · `,
    `${fmt(session.active_token_count)} / ${fmt(session.token_count)} tokens live`),
  el('span', {class: 'muted small'}, 'updated ', when(session.updated_at)));
}

function eventBody(event) {
  const parts = [];
  if (event.type === 'tool_call') {
    parts.push(el('div', {class: 'tool'}, '→ ', el('code', {}, event.tool_name ?? 'tool'),
      event.args ? el('code', {class: 'args'}, JSON.stringify(event.args)) : null));
  }
  if (event.type === 'tool_result' || event.tool_call_id) {
    parts.push(el('div', {class: 'muted small'}, `call ${event.tool_call_id ?? '?'}`));
  }
  if (event.masked != null) {
    parts.push(el('pre', {class: 'content masked-text'}, event.masked),
      el('details', {}, el('summary', {}, 'original content'),
        el('pre', {class: 'content'}, event.content)));
  } else if (event.content) {
    parts.push(el('pre', {class: 'content'}, event.content));
  }
  return parts;
}

function eventRow(event) {
  const flags = [event.archived ? el('span', {class: 'badge grey'}, 'archived') : null,
    event.masked != null ? el('span', {class: 'badge amber'}, 'masked') : null];
  const classes = ['event', `role-${event.role}`, `type-${event.type}`,
    event.archived ? 'archived' : '', event.masked != null ? 'masked' : ''];
  return el('tr', {class: classes.join(' ').trim(), dataset: {id: event.id}},
    el('td', {class: 'muted'}, `#${event.id}`),
    el('td', {}, el('span', {class: `role ${event.role}`}, event.role),
      el('div', {class: 'muted small'}, event.type.replace('_', ' ')), flags),
    el('td', {class: 'body'}, eventBody(event)),
    el('td', {class: 'muted small'}, `${fmt(event.tokens)} tok`, el('br'), when(event.timestamp)));
}

function compactionItem(c) {
  return el('li', {class: 'card compaction', dataset: {id: c.id}},
    el('div', {class: 'meta'}, el('strong', {}, `#${c.id} ${c.strategy}`),
      el('span', {}, `events ${c.first_event_id}–${c.last_event_id}`),
      el('span', {}, `${fmt(c.tokens_before)} → ${fmt(c.tokens_after)} tokens`),
      el('span', {}, absolute(c.created_at))),
    c.summary ? el('pre', {class: 'content'}, c.summary) : empty('(masking only, no summary)'));
}

async function eraseSession(id, app) {
  const plan = await api(`/api/sessions/${seg(id)}`, {method: 'DELETE', query: {dry_run: true}});
  const derived = [...plan.memories.map((m) => `memory ${m}`), ...plan.documents];
  const list = derived.length ? `\n\nWith what came from it:\n${derived.join('\n')}` : '';
  if (!confirm(`Erase session “${id}”: ${plan.events} events?${list}\n\nThis cannot be undone.`)) {
    return;
  }
  await api(`/api/sessions/${seg(id)}`, {method: 'DELETE'});
  location.hash = '#sessions';
  await app.refreshOverview();
}

/** Events are read a page at a time (the API gives at most 10,000 a call). */
const EVENTS_PAGE = 10000;

/** A button that appends the session's next page of events to ``rows``. */
function moreEvents(id, app, rows, count, shown) {
  let last = shown.length ? shown[shown.length - 1].id : 0;
  let total = shown.length;
  const button = el('button', {class: 'small', id: 'more-events',
    hidden: shown.length < EVENTS_PAGE}, `Show the next ${EVENTS_PAGE.toLocaleString()} events`);
  button.addEventListener('click', app.guard(async () => {
    const next = await api(`/api/sessions/${seg(id)}/events`,
      {query: {limit: EVENTS_PAGE, after: last}});
    rows.append(...next.map(eventRow));
    total += next.length;
    count.textContent = total;
    if (next.length) last = next[next.length - 1].id;
    button.hidden = next.length < EVENTS_PAGE;
  }));
  return button;
}

async function showSession(id, app) {
  const [events, compactions] = await Promise.all([
    api(`/api/sessions/${seg(id)}/events`, {query: {limit: EVENTS_PAGE}}),
    api(`/api/sessions/${seg(id)}/compactions`)]);
  const rows = el('tbody', {}, events.map(eventRow));
  const count = el('span', {class: 'count'}, events.length);
  $('#session-detail').replaceChildren(
    el('h2', {}, 'Session ', el('code', {}, id), ' ',
      el('a', {href: `#context/${seg(id)}`, class: 'small', id: 'inspect-context'},
        'inspect its context →'), ' ',
      el('a', {href: `#eval/${seg(id)}`, class: 'small', id: 'evaluate-session'},
        'replay it (eval) →'), ' ',
      el('button', {class: 'danger small', id: 'erase-session',
        onclick: app.guard(() => eraseSession(id, app))}, 'Erase…')),
    el('h3', {}, 'Compactions ', el('span', {class: 'count'}, compactions.length)),
    compactions.length ? el('ol', {class: 'cards', id: 'compactions'}, compactions.map(compactionItem))
      : empty('Never compacted.'),
    el('h3', {}, 'Events ', count),
    el('table', {class: 'grid events', id: 'events'}, rows),
    moreEvents(id, app, rows, count, events));
}

export async function showSessions(app, [selected]) {
  const sessions = await api('/api/sessions');
  $('#session-list').replaceChildren(el('h2', {}, 'Sessions'),
    ...(sessions.length ? sessions.map((s) => sessionLink(s, selected)) : [empty('No sessions yet.')]));
  if (selected) await showSession(selected, app);
  else $('#session-detail').replaceChildren(empty('Pick a session to see its events.'));
}
