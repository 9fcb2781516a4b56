// The knowledge base: the folder tree, a document read page by page, new
// documents and edits (each save a new version, refused if someone saved one since).

import {$, absolute, api, el, empty, fmt, tags} from './lib.js';

const PAGE = 100000;  // the most one read may return
let selected = null;

function node(item, app) {
  if (item.children) {
    return el('li', {class: 'folder'},
      el('span', {class: 'folder-name'}, '▾ ', item.name, el('span', {class: 'count'}, item.count)),
      el('ul', {}, item.children.map((child) => node(child, app))));
  }
  return el('li', {class: 'doc'},
    el('button', {type: 'button', class: item.path === selected ? 'link selected' : 'link',
      dataset: {path: item.path}, title: item.path,
      onclick: app.guard(() => openDocument(item, app))}, item.name),
    el('span', {class: 'muted small'}, ` v${item.version} · ${fmt(item.chars)} chars`));
}

/** The SHA-256 (hex) of a text as the server computes a document's (UTF-8). */
async function sha256(text) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** Edit the open document: its text in a box, saved as its next version only if the
 * version read is still the latest (else the server's 409 shows in the banner). */
async function editDocument(page, doc, app) {
  const seen = await sha256(page.content);
  const box = el('textarea', {id: 'kb-editor', rows: 20}, page.content);
  $('#kb-content').replaceWith(el('form', {class: 'editor doc-editor',
    onsubmit: app.guard(async (event) => {
      event.preventDefault();
      await api('/api/kb/doc', {method: 'PUT', query: {path: page.path},
        body: {content: box.value, expected_sha256: seen}});
      await showKb(app);
      await openDocument({path: page.path, updated_at: new Date().toISOString()}, app);
    })},
  box, el('button', {type: 'submit'}, 'Save'),
  el('button', {type: 'button', onclick: app.guard(() => openDocument(doc, app))}, 'Cancel')));
  box.focus();
}

async function openDocument({path, updated_at: updated}, app) {
  selected = path;
  for (const button of document.querySelectorAll('#kb-tree button.link')) {
    button.classList.toggle('selected', button.dataset.path === path);
  }
  const page = await api('/api/kb/read', {query: {path, limit: PAGE}});
  $('#kb-doc').replaceChildren(
    el('h2', {}, page.title || path),
    el('div', {class: 'meta'}, el('code', {}, path), el('span', {}, `version ${page.version}`),
      el('span', {}, `${fmt(page.total_chars)} chars`), tags(page.tags),
      el('span', {}, 'updated ', absolute(updated))),
    el('p', {class: 'muted', hidden: page.next_offset == null},
      `Showing the first ${fmt(PAGE)} characters.`),
    // A document longer than one page is edited with the CLI or the API.
    page.next_offset == null ? el('div', {class: 'actions'}, el('button', {type: 'button',
      id: 'kb-edit', onclick: app.guard(() => editDocument(page, {path, updated_at: updated},
        app))}, 'Edit')) : null,
    el('pre', {class: 'doc', id: 'kb-content'}, page.content));
}

async function newDocument(app) {
  const path = $('#kb-new-path').value.trim();
  if (!path) return;
  await api('/api/kb/doc', {method: 'PUT', query: {path},
    body: {content: $('#kb-new-content').value, expected_sha256: ''}});
  $('#kb-new-path').value = '';
  $('#kb-new-content').value = '';
  await Promise.all([showKb(app), app.refreshOverview()]);
  await openDocument({path, updated_at: new Date().toISOString()}, app);
}

export function initKb(app) {
  $('#kb-new').addEventListener('submit', app.guard(async (event) => {
    event.preventDefault();
    await newDocument(app);
  }));
}

export async function showKb(app) {
  const tree = await api('/api/kb/tree');
  $('#kb-tree').replaceChildren(el('h2', {}, 'Knowledge base'),
    tree.count ? el('ul', {class: 'tree'}, tree.children.map((child) => node(child, app)))
      : empty('No documents yet.'));
  if (!selected) $('#kb-doc').replaceChildren(empty('Pick a document to read it.'));
}
