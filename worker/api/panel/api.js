// The memory API as the panel calls it: same origin, the user's token as a bearer
// header, JSON in and out. The token lives in this module's memory only.

/** The token from the address's fragment (#token=...), or null. The caller removes
 * it from the address bar and the history at once. */
export function tokenFromFragment(hash) {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const token = params.get('token');
  return token && /^[\w-]+\.[\w-]+\.[\w-]+$/.test(token) ? token : null;
}

/** The token's claims, unverified (the API verifies it): who it speaks for, whose
 * path the page calls. */
export function claimsOf(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const bytes = Uint8Array.from(atob(part), (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes));
    return typeof claims.sub === 'string' && claims.sub ? claims : null;
  } catch {
    return null;
  }
}

export class ApiError extends Error {
  constructor(status, detail, retryAfter) {
    super(detail);
    this.status = status;
    this.detail = detail;
    this.retryAfter = retryAfter;
  }
}

function detailOf(body) {
  if (body && typeof body.detail === 'string') return body.detail;
  if (body && Array.isArray(body.detail) && body.detail.length) {
    return body.detail.map((d) => String(d.msg || '')).join('; ');
  }
  return '';
}

export class MemoryApi {
  #token;

  /** root: the path the API is served under ('' at the origin's root; a reverse proxy
   * may mount it under a prefix, and the page at <prefix>/panel). */
  constructor(token, userId, root = '') {
    this.#token = token;
    this.base = `${root}/users/${encodeURIComponent(userId)}`;
  }

  async #send(method, path, body, asBlob = false) {
    const headers = { Authorization: `Bearer ${this.#token}`, Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let response;
    try {
      response = await fetch(this.base + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
      });
    } catch {
      throw new ApiError(0, 'the memory service did not answer', null);
    }
    if (response.ok) return asBlob ? response.blob() : response.json();
    let parsed = null;
    try { parsed = await response.json(); } catch { /* not JSON: the status says enough */ }
    throw new ApiError(response.status, detailOf(parsed), response.headers.get('Retry-After'));
  }

  facts() { return this.#send('GET', '/facts?scope=all'); }
  search(q) { return this.#send('GET', `/search?scope=all&k=50&q=${encodeURIComponent(q)}`); }
  chain(id) { return this.#send('GET', `/facts/${id}/chain`); }
  // via 'panel': the fact records that the user wrote it here (its written_via).
  add(fact) { return this.#send('POST', '/facts', { ...fact, via: 'panel' }); }
  edit(id, text) { return this.#send('PATCH', `/facts/${id}`, { text, via: 'panel' }); }
  remove(id) { return this.#send('DELETE', `/facts/${id}`); }
  pin(id, pinned) { return this.#send(pinned ? 'PUT' : 'DELETE', `/facts/${id}/pin`); }
  // The people in the user's life (docs/persons.md): listed with the facts about them,
  // renamed (a merge patch), merged; a fact moved to a person, or to the user (null).
  persons() { return this.#send('GET', '/persons'); }
  updatePerson(id, label) { return this.#send('PATCH', `/persons/${id}`, label); }
  mergePerson(id, into) { return this.#send('POST', `/persons/${id}/merge`, { into }); }
  moveFact(id, personId) { return this.#send('PUT', `/facts/${id}/person`, { person_id: personId }); }
  proposals() { return this.#send('GET', '/held-proposals'); }
  notes() { return this.#send('GET', '/notes'); }
  removeNote(id) { return this.#send('DELETE', `/notes/${id}`); }
  answer(id, verb) { return this.#send('POST', `/held-proposals/${id}/${verb}`); }
  consent() { return this.#send('GET', '/consent'); }
  setConsent(enabled, forget = false) {
    return this.#send('PUT', '/consent', forget ? { enabled, forget } : { enabled });
  }
  // The user's portrait (docs/portrait.md): shown, removed, asked for again.
  portrait() { return this.#send('GET', '/portrait'); }
  removePortrait() { return this.#send('DELETE', '/portrait'); }
  askPortrait() { return this.#send('POST', '/portrait/refresh'); }
  erase() { return this.#send('DELETE', ''); }
  exportBlob() { return this.#send('GET', '/export', undefined, true); }
}
