// The panel's dialogs (native <dialog>, opened modal: the browser keeps focus inside,
// Escape closes, and focus goes back to the button that opened it). A refused write
// keeps the dialog open with the user's text in it and says why.
import { ApiError } from './api.js';
import { CATEGORY_LABELS, el, historyItems } from './view.js';

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
  /** ctx: { api, reload(), say(text), facts(): Map, agents(): string[], focus(sel) } */
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
      const saved = target.mode === 'edit' ? await api.edit(target.id, text)
        : await api.add({ text, category: target.fact.category, scope: target.fact.scope,
          agent_id: target.fact.agent_id });
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
