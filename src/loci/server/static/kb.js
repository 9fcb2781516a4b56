// The knowledge base: the folder tree, and a document read page by page (seeds/004).

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
      onclick: app.guard(() => openDocument(item))}, item.name),
    el('span', {class: 'muted small'}, ` v${item.version} · ${fmt(item.chars)} chars`));
}

async function openDocument({path, updated_at: updated}) {
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
    el('pre', {class: 'doc', id: 'kb-content'}, page.content));
}

export async function showKb(app) {
  const tree = await api('/api/kb/tree');
  $('#kb-tree').replaceChildren(el('h2', {}, 'Knowledge base'),
    tree.count ? el('ul', {class: 'tree'}, tree.children.map((child) => node(child, app)))
      : empty('No documents yet.'));
  if (!selected) $('#kb-doc').replaceChildren(empty('Pick a document to read it.'));
}
