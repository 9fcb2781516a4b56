// Shared helpers: building DOM from data (always as text), formatting, and the API call.
//
// Nothing in the dashboard parses data as HTML: every value from the server reaches the page
// through el(), which appends strings as text nodes, so a memory that contains markup
// is shown as the characters it is.

/** el('li', {class: 'card', dataset: {id}}, 'text', childNode, [more]) */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// The SVG namespace is a name, not an address: nothing is fetched from it.
const SVG_NS = 'http://www.w3.org/2000/svg';

/** svg('line', {x1: 0, class: 'grid'}, child): el() for SVG elements (attributes only,
 * text as text nodes). */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export const $ = (selector) => document.querySelector(selector);

export function empty(text) {
  return el('p', {class: 'empty'}, text);
}

export function tags(list) {
  return (list ?? []).map((tag) => el('span', {class: 'tag'}, tag));
}

export const fmt = (n) => Number(n ?? 0).toLocaleString('en-US');

const UNITS = [['year', 31536e6], ['month', 2592e6], ['day', 864e5], ['hour', 36e5],
  ['minute', 6e4], ['second', 1e3]];
const rtf = new Intl.RelativeTimeFormat('en', {numeric: 'auto'});

/** "in 3 months", "10 days ago" */
export function relative(iso, now = Date.now()) {
  const delta = Date.parse(iso) - now;
  for (const [unit, ms] of UNITS) {
    if (Math.abs(delta) >= ms || unit === 'second') return rtf.format(Math.round(delta / ms), unit);
  }
  return '';
}

/** "2027-02-20 01:43 UTC": the same text whatever the browser's locale. */
export function absolute(iso) {
  return new Date(iso).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
}

export function when(iso) {
  return el('time', {datetime: iso, title: absolute(iso)}, relative(iso));
}

/** An error the server answered with: its status and its JSON error type and message. */
export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

const STORE = {key: 'loci.apiKey', user: 'loci.user', agent: 'loci.agent'};

export const credentials = {
  get: () => Object.fromEntries(Object.entries(STORE).map(
    ([name, item]) => [name, localStorage.getItem(item) ?? ''])),
  set(values) {
    for (const [name, item] of Object.entries(STORE)) {
      const value = (values[name] ?? '').trim();
      if (value) localStorage.setItem(item, value);
      else localStorage.removeItem(item);
    }
  },
};

function headers(json) {
  const {key, user, agent} = credentials.get();
  const result = {Accept: 'application/json'};
  // With a key the key alone decides the user; naming another one would be refused.
  if (key) result.Authorization = `Bearer ${key}`;
  else if (user) result['X-Loci-User'] = user;
  if (agent) result['X-Loci-Agent'] = agent;
  if (json) result['Content-Type'] = 'application/json';
  return result;
}

/** Call the REST API; resolves to the JSON answer (null for 204), throws ApiError. */
export async function api(path, {method = 'GET', query, body} = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value != null && value !== '') url.searchParams.set(name, value);
  }
  const response = await fetch(url, {
    method, headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: reported below */ }
  if (!response.ok) {
    const error = data?.error ?? {};
    throw new ApiError(response.status, error.type ?? 'HTTPError',
      error.message ?? (text || response.statusText));
  }
  return data;
}

/** A path segment for the API: ids and keys may hold any character. */
export const seg = encodeURIComponent;

/** Fill a session picker with the stored sessions, keeping ``wanted`` (or the current
 * choice) selected when it is still there; the sessions, for the caller's empty state. */
export async function pickSessions(select, wanted) {
  const current = wanted ?? select.value;
  const sessions = await api('/api/sessions');
  select.replaceChildren(...sessions.map((s) => el('option', {value: s.id}, s.id)));
  if (sessions.some((s) => s.id === current)) select.value = current;
  return sessions;
}
