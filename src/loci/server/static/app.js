// The dashboard's shell: credentials, the error banner, the header's overview and the
// hash router (#memories, #state, #sessions/<id>, #context, #eval/<session>, #kb,
// #usage/<session>) that shows one view.

import {$, ApiError, api, credentials, el} from './lib.js';
import {initConsolidation, showPending} from './consolidate.js';
import {initContext, showContext} from './context.js';
import {initEval, showEval} from './eval.js';
import {initKb, showKb} from './kb.js';
import {initMemories, showMemories, showState} from './memories.js';
import {showSessions} from './sessions.js';
import {showUsage} from './usage.js';

function showError(error) {
  const text = error instanceof ApiError
    ? `${error.status} ${error.type}: ${error.message}`
    : `Error: ${error.message ?? error}`;
  $('#error-text').textContent = text;
  $('#error').hidden = false;
}

function hideError() {
  $('#error').hidden = true;
}

const app = {
  /** Wrap an event handler so a failure lands in the banner instead of the console. */
  guard: (handler) => async (...args) => {
    try {
      await handler(...args);
    } catch (error) {
      showError(error);
    }
  },

  async refreshOverview() {
    const overview = await api('/api/overview');
    for (const badge of document.querySelectorAll('[data-count]')) {
      const value = overview[badge.dataset.count];
      badge.textContent = typeof value === 'object'
        ? Object.values(value).reduce((a, b) => a + b, 0) : value;
    }
    $('#empty-hint').hidden = Boolean(overview.sessions || overview.state || overview.documents
      || Object.keys(overview.memories).length);
    $('#whoami').textContent = `${overview.user} · ${overview.agent} · ` +
      (overview.auth === 'key' ? 'API key' : 'open mode') +
      (overview.vectors_pending ? ` · ${overview.vectors_pending} waiting for vectors` : '');
  },
};

const VIEWS = {
  memories: () => Promise.all([showMemories(app), showPending(app)]),
  state: () => showState(app),
  sessions: (args) => showSessions(app, args),
  context: (args) => showContext(args),
  eval: (args) => showEval(args),
  kb: () => showKb(app),
  usage: (args) => showUsage(args),
};

/** A part of the address as written, or as it is when it is no valid escape. */
function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

async function route() {
  const [name, ...args] = location.hash.slice(1).split('/').map(decoded);
  const view = name in VIEWS ? name : 'memories';
  for (const section of document.querySelectorAll('.view')) {
    section.hidden = section.id !== `view-${view}`;
  }
  for (const tab of document.querySelectorAll('#tabs a')) {
    tab.toggleAttribute('aria-current', tab.dataset.view === view);
  }
  try {
    await Promise.all([VIEWS[view](args), app.refreshOverview()]);
    hideError();
  } catch (error) {
    showError(error);
  }
}

/** The users and agents the caller may open, offered by the User and Agent fields. */
async function fillPickers() {
  const scopes = await api('/api/scopes');
  const user = $('#user').value || 'default';
  const options = (values) => [...new Set(values)].sort().map((v) => el('option', {value: v}));
  $('#known-users').replaceChildren(...options(scopes.map((s) => s.user)));
  $('#known-agents').replaceChildren(...options(
    scopes.filter((s) => s.user === user).map((s) => s.agent)));
}

function initAuth() {
  const form = $('#auth');
  const fill = () => {
    const saved = credentials.get();
    $('#api-key').value = saved.key;
    $('#user').value = saved.user;
    $('#agent').value = saved.agent;
    // With a key the key decides the user: the field would only cause a 403.
    $('#user').disabled = Boolean(saved.key);
  };
  fill();
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    credentials.set({key: $('#api-key').value, user: $('#user').value, agent: $('#agent').value});
    fill();
    route();
    app.guard(fillPickers)();
  });
  $('#user').addEventListener('change', app.guard(fillPickers));
  app.guard(fillPickers)();
}

initAuth();
initMemories(app);
initConsolidation(app);
initContext(app);
initEval(app);
initKb(app);
$('#error-close').addEventListener('click', hideError);
window.addEventListener('hashchange', route);
route();
