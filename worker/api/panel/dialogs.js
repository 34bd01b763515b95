// The panel's dialogs (native <dialog>, opened modal: the browser keeps focus inside,
// Escape closes, and focus goes back to the button that opened it). A refused write
// keeps the dialog open with the user's text in it and says why.
import { ApiError } from './api.js';
import { CATEGORY_LABELS, el, historyItems, personLabel } from './view.js';

const $ = (id) => document.getElementById(id);

function show(node, ...content) {
  node.replaceChildren(...content);
  node.hidden = content.length === 0;
}

/** Words for a refused write shown inside a dialog (the text typed stays). */
export function refusal(error) {
  if (!(error instanceof ApiError)) throw error;
  if (error.status === 401) {
    return 'Your link has expired, so this was not saved. Copy your text, then open your '
      + 'memory again from your chat app.';
  }
  if (error.status === 429) {
    return `Too many changes in a short time: nothing was saved. Try again in ${
      error.retryAfter || 'a few'} seconds.`;
  }
  if (error.status === 0 || error.status >= 500) {
    return 'The memory service did not answer. Try again in a moment.';
  }
  return `This was refused: ${error.detail || `error ${error.status}`}.`;
}

export class Dialogs {
  /** ctx: { api, reload(), say(text), facts(): Map, agents(): string[], persons(): [],
   * focus(sel) } */
  constructor(ctx) {
    this.ctx = ctx;
    this.target = null;
    for (const dialog of document.querySelectorAll('dialog')) {
      for (const cancel of dialog.querySelectorAll('.cancel')) {
        cancel.addEventListener('click', () => dialog.close());
      }
    }
    $('edit-form').addEventListener('submit', (e) => { e.preventDefault(); this.#saveEdit(); });
    $('add-form').addEventListener('submit', (e) => { e.preventDefault(); this.#saveAdd(); });
    $('forget-form').addEventListener('submit', (e) => { e.preventDefault(); this.#forget(); });
    $('forget-word').addEventListener('input', () => {
      $('forget-confirm').disabled = $('forget-word').value.trim().toLowerCase() !== 'forget';
    });
    $('add-category').replaceChildren(...Object.entries(CATEGORY_LABELS).map(
      ([value, label]) => el('option', { value, selected: value === 'general' }, label)));
    this.#wirePersons();
  }

  openEdit(fact) {
    this.target = { id: fact.id, fact, mode: 'edit' };
    $('edit-text').value = fact.text;
    show($('edit-conflict'));
    $('edit-save').textContent = 'Save';
    $('edit-dialog').showModal();
    $('edit-text').select();
  }

  async #saveEdit() {
    const text = $('edit-text').value.trim();
    if (!text) {
      show($('edit-conflict'), 'Write what should be remembered, or cancel.');
      return;
    }
    const { api } = this.ctx;
    const target = this.target;
    try {
      let saved = target.mode === 'edit' ? await api.edit(target.id, text)
        : await api.add({ text, category: target.fact.category, scope: target.fact.scope,
          agent_id: target.fact.agent_id });
      // A fact about a person stays theirs: an add is the user's until moved.
      if (target.mode === 'add' && target.fact.person_id) {
        saved = await api.moveFact(saved.id, target.fact.person_id);
      }
      $('edit-dialog').close();
      await this.ctx.reload();
      this.ctx.say(target.mode === 'edit' ? 'Corrected. The old wording is kept in its history.'
        : 'Added as a new fact.');
      this.ctx.focus(`[data-action="edit"][data-id="${saved.id}"]`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 409) await this.#changedMeanwhile();
      else show($('edit-conflict'), refusal(error));
    }
  }

  // The version being corrected changed since the page read it (another tab, the chat
  // server, a worker's commit): nothing was written. Show what it says now and keep
  // the user's text, to save onto the current version, or as a new fact if it ended.
  async #changedMeanwhile() {
    const { api } = this.ctx;
    let latest = null;
    try {
      const versions = (await api.chain(this.target.id)).versions;
      latest = versions[versions.length - 1];
    } catch (error) {
      show($('edit-conflict'), refusal(error));
      return;
    }
    const ended = latest.superseded_at
      || (latest.expires_at && Date.parse(latest.expires_at) <= Date.now());
    if (ended) {
      this.target = { id: null, fact: latest, mode: 'add' };
      $('edit-save').textContent = 'Add as a new fact';
      show($('edit-conflict'), 'This fact was removed or ended while you were writing, so '
        + 'nothing was saved. Your text is kept below: add it as a new fact, or cancel.');
    } else {
      this.target = { id: latest.id, fact: latest, mode: 'edit' };
      show($('edit-conflict'), 'This fact changed while you were writing, so nothing was '
        + 'saved. It now reads ', el('q', {}, latest.text), '. Your text is kept below: save '
        + 'to put it in place of the new wording, or cancel.');
    }
    await this.ctx.reload();
    $('edit-text').focus();
  }

  openAdd() {
    $('add-text').value = '';
    show($('add-error'));
    $('add-about').replaceChildren(el('option', { value: '' }, 'Every assistant (about you)'),
      ...this.ctx.agents().map((agent) => el('option', { value: agent },
        `Only the assistant “${agent}”`)));
    $('add-dialog').showModal();
    $('add-text').focus();
  }

  async #saveAdd() {
    const text = $('add-text').value.trim();
    if (!text) {
      show($('add-error'), 'Write what should be remembered, or cancel.');
      return;
    }
    const agent = $('add-about').value;
    const fact = { text, category: $('add-category').value,
      scope: agent ? 'relationship' : 'profile', agent_id: agent || null };
    try {
      const added = await this.ctx.api.add(fact);
      $('add-dialog').close();
      await this.ctx.reload();
      this.ctx.say('Added.');
      this.ctx.focus(`[data-action="edit"][data-id="${added.id}"]`);
    } catch (error) {
      show($('add-error'), refusal(error));
    }
  }

  async openHistory(id) {
    const versions = (await this.ctx.api.chain(id)).versions;
    $('history-list').replaceChildren(...historyItems(versions));
    $('history-dialog').showModal();
    $('history-dialog').querySelector('.cancel').focus();
  }

  // The people in the user's life (docs/persons.md): who a fact is about, a person's
  // name, relation and other names, and merging two (confirmed: it cannot be undone).
  #wirePersons() {
    $('move-form').addEventListener('submit', (e) => { e.preventDefault(); this.#move(); });
    $('person-form').addEventListener('submit', (e) => { e.preventDefault(); this.#rename(); });
    $('merge-form').addEventListener('submit', (e) => { e.preventDefault(); this.#merge(); });
    $('merge-into').addEventListener('change', () => {
      $('merge-confirm').disabled = !$('merge-into').value;
    });
  }

  #choices(select, first, persons, chosen) {
    select.replaceChildren(first, ...persons.map((p) => el('option',
      { value: p.id, selected: p.id === chosen }, personLabel(p))));
  }

  openMove(fact) {
    this.moving = fact;
    $('move-fact').textContent = fact.text;
    this.#moveChoices();
    show($('move-error'));
    $('move-dialog').showModal();
    $('move-to').focus();
  }

  #moveChoices() {
    const about = this.moving.person_id ?? null;
    this.#choices($('move-to'), el('option', { value: '', selected: about === null }, 'You'),
      this.ctx.persons(), about);
  }

  async #move() {
    const to = $('move-to').value ? Number($('move-to').value) : null;
    if (to === (this.moving.person_id ?? null)) {
      show($('move-error'), 'It is about them already: choose someone else, or cancel.');
      return;
    }
    const person = this.ctx.persons().find((p) => p.id === to);
    await this.#personWrite('move', () => this.ctx.api.moveFact(this.moving.id, to),
      `Moved: it is a fact about ${person ? personLabel(person) : 'you'} now.`,
      (moved) => `[data-action="move"][data-id="${moved.id}"]`);
  }

  openPerson(person) {
    this.person = person;
    $('person-name').value = person.display_name || '';
    $('person-relation').value = person.relation || '';
    $('person-aliases').value = person.aliases.join(', ');
    show($('person-error'));
    $('person-dialog').showModal();
    $('person-name').focus();
  }

  async #rename() {
    const field = (id) => $(id).value.trim() || null;
    const label = { display_name: field('person-name'), relation: field('person-relation'),
      aliases: $('person-aliases').value.split(',').map((a) => a.trim()).filter(Boolean) };
    if (!label.display_name && !label.relation) {
      show($('person-error'), 'Give a name or who they are to you, or cancel.');
      return;
    }
    const { id } = this.person;
    await this.#personWrite('person', () => this.ctx.api.updatePerson(id, label),
      'Saved. The old names stay in their history.',
      () => `[data-action="person-edit"][data-person="${id}"]`);
  }

  openMerge(person) {
    this.merging = person;
    const name = () => el('q', {}, personLabel(person));
    show($('merge-what'), 'Use this when two of them are one person. Every fact about ',
      name(), ' becomes a fact about the person you choose, and the names of ', name(),
      ' are added to theirs. This cannot be undone.');
    this.#mergeChoices();
    show($('merge-error'));
    $('merge-dialog').showModal();
    $('merge-into').focus();
  }

  #mergeChoices() {
    this.#choices($('merge-into'), el('option', { value: '' }, 'Choose a person'),
      this.ctx.persons().filter((p) => p.id !== this.merging.id), null);
    $('merge-confirm').disabled = true;
  }

  async #merge() {
    const into = Number($('merge-into').value);
    if (!into) return;
    const kept = this.ctx.persons().find((p) => p.id === into);
    await this.#personWrite('merge', () => this.ctx.api.mergePerson(this.merging.id, into),
      `Merged into ${kept ? personLabel(kept) : 'the person you chose'}.`,
      () => `#person-name-${into}`);
  }

  /** One write of a persons dialog. A 409 or 404 (merged, moved or removed meanwhile)
   * shows the current state behind the open dialog, its choices again, and says so. */
  async #personWrite(kind, work, message, focusOf) {
    try {
      const done = await work();
      $(`${kind}-dialog`).close();
      await this.ctx.reload();
      this.ctx.say(message);
      this.ctx.focus(focusOf(done));
    } catch (error) {
      if (!(error instanceof ApiError && [404, 409].includes(error.status))) {
        show($(`${kind}-error`), refusal(error));
        return;
      }
      await this.ctx.reload().catch(() => {});
      if (kind === 'move') this.#moveChoices();
      if (kind === 'merge') this.#mergeChoices();
      show($(`${kind}-error`), 'That changed meanwhile (in another window, or a '
        + 'conversation), so nothing was done. The page now shows the current state: '
        + 'choose again, or cancel.');
    }
  }

  openForget() {
    $('forget-word').value = '';
    $('forget-off').checked = false;
    $('forget-confirm').disabled = true;
    show($('forget-error'));
    $('forget-dialog').showModal();
    $('forget-word').focus();
  }

  async #forget() {
    if ($('forget-word').value.trim().toLowerCase() !== 'forget') return;
    const off = $('forget-off').checked;
    try {
      if (off) await this.ctx.api.setConsent(false, true);
      else await this.ctx.api.erase();
      $('forget-dialog').close();
      await this.ctx.reload();
      this.ctx.say(off ? 'Everything was forgotten, and memory is now off.'
        : 'Everything was forgotten.');
      this.ctx.focus('#facts-heading');
    } catch (error) {
      show($('forget-error'), refusal(error));
    }
  }
}
