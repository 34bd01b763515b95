// The memory panel (docs/panel.md): the user's token comes in the address's fragment,
// #token=<JWT>, which no server ever receives. It is taken out of the address bar and
// the history at once and kept in this page's memory only (not sessionStorage or
// cookies): closing or reloading the tab forgets it, and the chat app hands out a
// fresh short-lived link.
import { ApiError, MemoryApi, claimsOf, tokenFromFragment } from './api.js';
import { Dialogs } from './dialogs.js';
import { el, factGroups, noteItem, personSection, proposalItem, searchResults } from './view.js';

const token = tokenFromFragment(window.location.hash);
if (window.location.hash) {
  window.history.replaceState(null, '', window.location.pathname + window.location.search);
}

const $ = (id) => document.getElementById(id);
const state = { api: null, facts: new Map(), agents: [], groups: [], query: '', busy: false };

function say(text) {
  $('alert').textContent = '';
  $('status').textContent = text;
}

function warn(text) {
  $('status').textContent = '';
  $('alert').textContent = text;
}

function signedOut(reason) {
  $('panel').hidden = true;
  $('signed-out-reason').textContent = reason;
  $('signed-out').hidden = false;
  $('status').textContent = '';
  document.title = 'Your memory: link not valid';
  $('signed-out-heading').focus();
}

/** Focus `selector` once the list is built again, or the list's heading: the button
 * the user pressed was replaced. */
function focus(selector) {
  const target = document.querySelector(selector) || $('facts-heading');
  target.focus();
}

function renderConsent(consent) {
  $('memory-on').checked = consent.enabled;
  $('memory-note').textContent = (consent.enabled
    ? 'On: what you say in conversations is remembered and used in later ones.'
    : 'Off: nothing new is learned and no assistant reads your memory. What is kept stays '
      + 'below until you remove it or forget everything.')
    + (consent.chosen ? '' : ' (The service’s default: you have not chosen yet.)');
}

function renderFacts() {
  if (state.query) return;
  const count = state.facts.size;
  $('facts-summary').textContent = count === 0 ? 'Nothing is remembered about you.'
    : `${count} ${count === 1 ? 'fact is' : 'facts are'} remembered. Pinned facts come first.`;
  $('facts').replaceChildren(...factGroups(state.groups));
}

async function renderProposals(list) {
  const current = new Map();
  for (const proposal of list) {
    if (proposal.fact_id === null) continue;  // an addition: held against no fact
    let fact = state.facts.get(proposal.fact_id) || null;
    if (!fact && !current.has(proposal.fact_id)) {
      // Stale: its fact changed since. Show the version it was held against.
      const versions = (await state.api.chain(proposal.fact_id)).versions;
      fact = versions.find((v) => v.id === proposal.fact_id) || null;
    }
    current.set(proposal.fact_id, fact || current.get(proposal.fact_id));
  }
  // reload renders the persons first: an addition about one of them names them.
  $('proposal-list').replaceChildren(...list.map((p) => proposalItem(p, current.get(p.fact_id),
    people.list.find((person) => person.id === p.person_id))));
  $('proposals').hidden = list.length === 0;
}

// The portrait's words for each state without one (docs/portrait.md); its text, when
// there is one, goes in as text (textContent), never as markup.
const PORTRAIT_WORDS = {
  none: 'No summary yet: one is written after your next conversations.',
  removed: 'You removed the summary. None is written until you ask for one again.',
  off: 'Memory is off: no summary is kept or given to your assistants.',
};

function renderPortrait(shown) {
  $('portrait-text').textContent = shown.portrait ? shown.portrait.text
    : PORTRAIT_WORDS[shown.state] || '';
  $('portrait-remove').hidden = !shown.portrait;
  $('portrait-ask').hidden = shown.state !== 'removed';
  $('portrait').hidden = false;
}

function renderNotes(notes) {
  $('note-list').replaceChildren(...notes.map(noteItem));
  $('notes').hidden = notes.length === 0;
}

async function reload() {
  const persons = loadPersons();
  const [facts, proposals, consent, portrait, notes] = await Promise.all(
    [state.api.facts(), state.api.proposals(), state.api.consent(), state.api.portrait(),
      state.api.notes()]);
  renderNotes(notes.notes);
  state.groups = facts.groups;
  state.facts = new Map(facts.groups.flatMap((g) => g.facts).map((f) => [f.id, f]));
  state.agents = [...new Set([...state.facts.values()].map((f) => f.agent_id)
    .filter(Boolean))].sort();
  renderConsent(consent);
  renderPortrait(portrait);
  renderFacts();
  renderPersons(await persons);
  await renderProposals(proposals.proposals);
  if (state.query) await search(state.query);
}

async function search(q) {
  state.query = q;
  $('search-clear').hidden = !q;
  if (!q) {
    renderFacts();
    return;
  }
  const hits = (await state.api.search(q)).results;
  $('facts-summary').textContent = hits.length === 0 ? `Nothing matches “${q}”.`
    : `${hits.length} ${hits.length === 1 ? 'fact matches' : 'facts match'} “${q}”.`;
  $('facts').replaceChildren(...searchResults(hits));
}

/** Run one write, show the state after it, and say what happened. A 409 (the view was
 * stale) shows the current state and says so; nothing the user typed is involved. */
async function act(work, focusAfter, changes = true) {
  if (state.busy) return;
  state.busy = true;
  try {
    const message = await work();
    if (changes) await reload();
    say(message);
  } catch (error) {
    await failed(error);
  } finally {
    state.busy = false;
    focus(focusAfter);
  }
}

async function failed(error) {
  if (!(error instanceof ApiError)) throw error;
  if (error.status === 401) {
    // The API's words say which (docs/api.md, "Tokens"); never the token itself.
    signedOut(/expired/.test(error.detail) ? 'It has expired.'
      : 'The memory service does not accept its sign-in token.');
    return;
  }
  if (error.status === 403) {
    signedOut('This link is for another person’s memory.');
    return;
  }
  if (error.status === 409 || error.status === 404) {
    await reload().catch(() => {});
    warn('That changed meanwhile (in another window, or a conversation), so nothing was '
      + 'done. The page now shows the current state.');
  } else if (error.status === 429) {
    warn(`Too many changes in a short time: try again in ${error.retryAfter || 'a few'} seconds.`);
  } else if (error.status === 0 || error.status >= 500) {
    warn('The memory service did not answer. Try again in a moment.');
  } else {
    warn(`That was refused: ${error.detail || `error ${error.status}`}.`);
  }
}

async function download() {
  const blob = await state.api.exportBlob();
  const url = URL.createObjectURL(blob);
  const name = `memory-export-${new Date().toISOString().slice(0, 10)}.json`;
  const link = el('a', { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return `Your data was downloaded as ${name}.`;
}

function wire(dialogs) {
  $('panel').addEventListener('click', (event) => {
    const button = event.target.closest('button[data-action]');
    if (!button) return;
    const id = Number(button.dataset.id);
    const fact = state.facts.get(id) || people.facts.get(id);
    if (!fact && ['edit', 'pin', 'remove'].includes(button.dataset.action)) return;
    switch (button.dataset.action) {
      case 'edit': dialogs.openEdit(fact); break;
      case 'history': dialogs.openHistory(id).catch(failed); break;
      case 'pin': act(async () => {
        await state.api.pin(id, !fact.pinned);
        return fact.pinned ? 'Unpinned.' : 'Pinned: a conversation cannot change it without '
          + 'asking you.';
      }, `[data-action="pin"][data-id="${id}"]`); break;
      case 'remove': act(async () => {
        await state.api.remove(id);
        return 'Removed. It is no longer used; its history keeps the old wording.';
      }, '#facts-heading'); break;
      case 'accept': act(async () => {
        await state.api.answer(id, 'accept');
        return 'Accepted: the fact now reads as suggested.';
      }, '#proposals:not([hidden]) button[data-action], #facts-heading'); break;
      case 'remove-note': act(async () => {
        await state.api.removeNote(id);
        return 'Removed. The note is no longer used.';
      }, '#note-list button[data-action], #facts-heading'); break;
      case 'dismiss': act(async () => {
        await state.api.answer(id, 'dismiss');
        return 'Dismissed: the fact stays as it was.';
      }, '#proposals:not([hidden]) button[data-action], #facts-heading'); break;
      default: break;
    }
  });
  $('memory-on').addEventListener('change', () => {
    const on = $('memory-on').checked;
    act(async () => {
      await state.api.setConsent(on);
      return on ? 'Memory is on.' : 'Memory is off: nothing new will be learned.';
    }, '#memory-on');
  });
  $('portrait-remove').addEventListener('click', () => act(async () => {
    await state.api.removePortrait();
    return 'The summary was removed. None is written until you ask for one again.';
  }, '#portrait-ask'));
  $('portrait-ask').addEventListener('click', () => act(async () => {
    const asked = await state.api.askPortrait();
    return asked.queued ? 'A new summary will be written shortly.'
      : 'Summaries are not written by this service.';
  }, '#portrait-remove:not([hidden]), #portrait-heading'));
  $('retry').addEventListener('click', firstLoad);
  $('add-open').addEventListener('click', () => dialogs.openAdd());
  $('forget-open').addEventListener('click', () => dialogs.openForget());
  $('export').addEventListener('click', () => act(download, '#export', false));
  $('search-form').addEventListener('submit', (event) => {
    event.preventDefault();
    search($('search-q').value.trim()).catch(failed);
  });
  $('search-clear').addEventListener('click', () => {
    $('search-q').value = '';
    search('').catch(failed);
    $('search-q').focus();
  });
}

// The people in the user's life (docs/persons.md): the facts about each, below the
// user's own; the person's actions and "who is it about" open dialogs.js's dialogs.
const people = { list: [], facts: new Map() };

/** The persons' read, beside reload's others; a failure is kept for renderPersons. */
function loadPersons() {
  return state.api.persons().then((answer) => answer.persons, (error) => error);
}

function renderPersons(loaded) {
  // A 404: an API whose store keeps no persons; the card stays hidden.
  const none = loaded instanceof ApiError && loaded.status === 404;
  if (loaded instanceof Error && !none) throw loaded;
  people.list = none ? [] : loaded;
  people.facts = new Map(people.list.flatMap((p) => p.facts).map((f) => [f.id, f]));
  $('person-list').replaceChildren(...people.list.map(
    (p) => personSection(p, people.list.length > 1)));
  $('persons').hidden = people.list.length === 0;
  // Without a person there is no one to move a fact to.
  $('panel').classList.toggle('no-persons', people.list.length === 0);
}

function wirePersons(dialogs) {
  $('panel').addEventListener('click', (event) => {
    const button = event.target.closest('button[data-action]');
    const id = Number(button?.dataset.id || button?.dataset.person);
    const person = people.list.find((p) => p.id === id);
    switch (button?.dataset.action) {
      case 'move': {
        const fact = state.facts.get(id) || people.facts.get(id);
        if (fact) dialogs.openMove(fact);
        break;
      }
      case 'person-edit': if (person) dialogs.openPerson(person); break;
      case 'person-merge': if (person) dialogs.openMerge(person); break;
      default: break;
    }
  });
}

async function start() {
  if (!token) {
    signedOut('It has no sign-in token.');
    return;
  }
  // Only who the token speaks for is read here; whether it is valid, expired included,
  // is the API's call (a device's clock may be off by minutes).
  const claims = claimsOf(token);
  if (!claims) {
    signedOut('Its sign-in token cannot be read.');
    return;
  }
  const root = window.location.pathname.replace(/\/panel\/?$/, '');
  state.api = new MemoryApi(token, claims.sub, root);
  const dialogs = new Dialogs({
    api: state.api, reload, say, focus, agents: () => state.agents,
    persons: () => people.list,
  });
  wire(dialogs);
  wirePersons(dialogs);
  await firstLoad();
}

// The first read: until it succeeds the page shows no list (an empty one would say
// "nothing is remembered"). A service that does not answer gets a Try again button, as a
// reload of the page would lose the token.
async function firstLoad() {
  try {
    await reload();
  } catch (error) {
    if (error instanceof ApiError && (error.status === 0 || error.status >= 500)) {
      $('unavailable').hidden = false;
      $('unavailable-heading').focus();
    } else {
      await failed(error);
    }
    return;
  }
  $('unavailable').hidden = true;
  $('panel').hidden = false;
  performance.mark('panel-ready');
}

start();
