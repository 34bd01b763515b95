// Building the panel's DOM. Every text a user or a conversation wrote goes in as a
// text node (el's string children, textContent): never as markup.

/** An element with attributes (set as attributes, never parsed) and children
 * (strings become text nodes). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

const day = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const moment = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function when(iso, withTime = false) {
  if (!iso) return '';
  return (withTime ? moment : day).format(new Date(iso));
}

function timeEl(iso, withTime = false) {
  return el('time', { datetime: iso }, when(iso, withTime));
}

export const CATEGORY_LABELS = {
  fact: 'Facts about you', preference: 'Preferences', relationship: 'People in your life',
  decision: 'Decisions', event: 'Events and plans', general: 'Other',
};

const SOURCE_WORDS = {
  extracted: 'Said in a conversation', manual: 'Added by you',
  imported: 'Imported', backfill: 'Recovered from older memory',
};

function heldWords(fact) {
  const parts = [];
  const never = fact.valid_from && fact.valid_to
    && Date.parse(fact.valid_from) === Date.parse(fact.valid_to);
  if (never) {
    // A correction ends the old version where it began (docs/memory_model.md).
    parts.push('Never held: corrected as never true');
  } else if (fact.valid_from && fact.valid_to) {
    parts.push('Held from ', timeEl(fact.valid_from), ' to ', timeEl(fact.valid_to));
  } else if (fact.valid_from) {
    parts.push('Holds since ', timeEl(fact.valid_from));
  }
  if (fact.expires_at) parts.push(parts.length ? ', forgotten on ' : 'Forgotten on ',
    timeEl(fact.expires_at));
  return parts;
}

/** One active fact as a list item with its actions (data-action, data-id). */
export function factItem(fact) {
  const textId = `fact-text-${fact.id}`;
  const button = (action, label, extra = {}) => el('button', {
    type: 'button', 'data-action': action, 'data-id': fact.id,
    'aria-describedby': textId, ...extra,
  }, label);
  return el('li', { class: fact.pinned ? 'fact pinned' : 'fact', 'data-fact-id': fact.id },
    el('p', { class: 'fact-text', id: textId }, fact.text),
    el('p', { class: 'meta' },
      fact.pinned ? el('span', { class: 'badge' }, 'Pinned') : null,
      el('span', {}, `${SOURCE_WORDS[fact.source_kind] || 'Learned'} on `,
        timeEl(fact.observed_at)),
      el('span', {}, ...heldWords(fact))),
    el('div', { class: 'actions' },
      button('edit', 'Correct'),
      button('pin', fact.pinned ? 'Unpin' : 'Pin'),
      button('history', 'History'),
      button('move', 'Who is it about?'),
      button('remove', 'Remove', { class: 'danger' })));
}

function categorySections(facts, level) {
  const byCategory = new Map();
  for (const fact of facts) {
    if (!byCategory.has(fact.category)) byCategory.set(fact.category, []);
    byCategory.get(fact.category).push(fact);
  }
  return [...byCategory].map(([category, group]) => el('section', { class: 'category' },
    el(`h${level}`, {}, CATEGORY_LABELS[category] || category),
    el('ul', { class: 'plain facts' }, group.map(factItem))));
}

/** The API's category groups regrouped: the profile first, then each agent's
 * relationship facts, each by category in the API's order (pinned first). */
export function factGroups(groups) {
  const profile = [];
  const agents = new Map();
  for (const group of groups) {
    for (const fact of group.facts) {
      if (fact.scope === 'relationship' && fact.agent_id) {
        if (!agents.has(fact.agent_id)) agents.set(fact.agent_id, []);
        agents.get(fact.agent_id).push(fact);
      } else {
        profile.push(fact);
      }
    }
  }
  const parts = [];
  if (profile.length) {
    parts.push(el('section', { class: 'scope' }, el('h3', {}, 'About you, for every assistant'),
      categorySections(profile, 4)));
  }
  for (const [agent, facts] of [...agents].sort(([a], [b]) => a.localeCompare(b))) {
    parts.push(el('section', { class: 'scope' },
      el('h3', {}, 'Between you and the assistant ', el('q', {}, agent)),
      categorySections(facts, 4)));
  }
  return parts;
}

// The people in the user's life (docs/persons.md) -------------------------------------

/** What a person is called: the name, else "Your <relation>". */
export function personName(person) {
  return person.display_name || (person.relation ? `Your ${person.relation}` : 'Someone');
}

/** The name with the relation, as a heading or a choice: "Ana (sister)". */
export function personLabel(person) {
  return person.display_name && person.relation
    ? `${person.display_name} (${person.relation})` : personName(person);
}

/** One person: names, actions (data-action, data-person), the facts about them;
 * `others`: whether there is another person to merge with. */
export function personSection(person, others) {
  const nameId = `person-name-${person.id}`;
  const button = (action, label) => el('button', { type: 'button', 'data-action': action,
    'data-person': person.id, 'aria-describedby': nameId }, label);
  return el('section', { class: 'person', 'data-person-id': person.id },
    el('h3', { id: nameId, tabindex: -1 }, personLabel(person)),
    person.aliases.length ? el('p', { class: 'meta' },
      `Also called ${person.aliases.join(', ')}`) : null,
    el('div', { class: 'actions' }, button('person-edit', 'Change name or relation'),
      others ? button('person-merge', 'Merge with…') : null),
    person.facts.length ? el('ul', { class: 'plain facts' }, person.facts.map((f) => factItem(f)))
      : el('p', { class: 'note' }, 'No fact about them is kept now.'));
}

export function searchResults(hits) {
  return [el('ul', { class: 'plain facts' }, hits.map((hit) => factItem(hit.fact)))];
}

const ENDINGS = {
  removed: 'Removed by you',
  deleted: 'Ended: a conversation said it no longer holds',
  expired: 'Expired: it was only true for a while',
};

/** Why a version ended, from its reason and its successor's source. */
export function endedWords(version, next) {
  if (!version.superseded_at) return 'Current version';
  if (version.superseded_reason === 'updated') {
    return next && next.source_kind === 'manual' ? 'Corrected by you'
      : 'Updated by a conversation';
  }
  return ENDINGS[version.superseded_reason] || 'Ended';
}

export function historyItems(versions) {
  return versions.map((version, i) => el('li', { class: 'version' },
    el('p', { class: 'fact-text' }, version.text),
    el('p', { class: 'meta' },
      el('span', {}, `${SOURCE_WORDS[version.source_kind] || 'Learned'} on `,
        timeEl(version.observed_at, true)),
      version.superseded_at ? el('span', {}, 'Believed until ',
        timeEl(version.superseded_at, true)) : null,
      el('span', {}, ...heldWords(version))),
    el('p', { class: version.superseded_at ? 'ended' : 'ended current' },
      endedWords(version, versions[i + 1]))));
}

const REASONS = {
  pinned: 'Held because you pinned this fact.',
  outranked: 'Held because it was only inferred, and what you said before is more certain.',
  undecided: 'Held because it could not be told whether this is new or changes something '
    + 'already remembered: add it, or dismiss it.',
};

/** A held proposal, with the version it was held against (or null if unknown) and, for
 * an addition about one of the user's persons, that person (or undefined if not listed). */
export function proposalItem(proposal, current, person) {
  const textId = `proposal-text-${proposal.id}`;
  const said = el('span', {}, 'A conversation on ', timeEl(proposal.proposed_at));
  const what = proposal.event === 'ADD'
    ? el('p', { id: textId }, said, ' said ',
      el('q', { class: 'fact-text' }, proposal.text || ''), '.')
    : proposal.event === 'UPDATE'
    ? el('p', { id: textId }, said, ' suggested changing ',
      el('q', { class: 'fact-text' }, current ? current.text : 'a fact'), ' to ',
      el('q', { class: 'fact-text' }, proposal.text || ''), '.')
    : el('p', { id: textId }, said, ' suggested that ',
      el('q', { class: 'fact-text' }, current ? current.text : 'a fact'), ' no longer holds.');
  const accept = el('button', {
    type: 'button', 'data-action': 'accept', 'data-id': proposal.id,
    'aria-describedby': textId, disabled: proposal.stale,
  }, 'Accept');
  // Accepted, it is that person's fact, never the user's (docs/persons.md).
  const about = proposal.person_id == null ? null : el('p', { class: 'meta' },
    !person ? 'About someone in your life' : person.display_name
      ? `About ${personLabel(person)}` : `About your ${person.relation}`);
  return el('li', { class: 'proposal', 'data-proposal-id': proposal.id }, what, about,
    el('p', { class: 'note' }, REASONS[proposal.reason] || ''),
    proposal.stale ? el('p', { class: 'conflict' },
      'This fact has changed since, so this suggestion can only be dismissed.') : null,
    el('div', { class: 'actions' }, accept,
      el('button', { type: 'button', 'data-action': 'dismiss', 'data-id': proposal.id,
        'aria-describedby': textId }, 'Dismiss')));
}

/** One active note (docs/notes.md) as a list item: its text, when it was said, and a
 * Remove button (data-action remove-note). */
export function noteItem(note) {
  const textId = `note-text-${note.id}`;
  return el('li', { class: 'note-item', 'data-note-id': note.id },
    el('p', { class: 'fact-text', id: textId }, note.text),
    el('p', { class: 'meta' }, el('span', {}, 'Mentioned on ', timeEl(note.observed_at))),
    el('div', { class: 'actions' },
      el('button', { type: 'button', 'data-action': 'remove-note', 'data-id': note.id,
        'aria-describedby': textId, class: 'danger' }, 'Remove')));
}
