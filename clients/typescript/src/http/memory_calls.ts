/**
 * The memory API's routes for a user's memory (docs/api.md, "Endpoints"): the facts
 * by scope, agent and time, adding, correcting, removing, pinning, a fact's chain,
 * the held proposals and their answers, search, the known-facts block, the prompt
 * split (prompt-blocks, stable-block), the user's portrait, the people in the user's
 * life (persons), the notes beside the facts, consent, export and erase.
 * MemfleetHttpClient (http_client.ts) adds the hand-over and following it. Each method names the service key scope it needs; an end user's
 * token reaches all of these for its own user (another user's path: AccessDenied).
 */
import type { HttpTransport } from "./transport.js";
import { idPart, userPath } from "./transport.js";
import type {
  ActiveFacts,
  Consent,
  ConsentChanged,
  ConsentChoice,
  Erased,
  Fact,
  FactChain,
  FactCorrection,
  FactsQuery,
  HeldAnswer,
  HeldProposal,
  KnownFacts,
  KnownFactsQuery,
  Moment,
  NewFact,
  NewPerson,
  Person,
  PersonChanges,
  PersonWithFacts,
  PromptBlocks,
  PromptBlocksQuery,
  ProposalState,
  SearchHit,
  SearchQuery,
  StableBlock,
  UserExport,
  UserPortrait,
} from "./memory_types.js";
import type { Note, NoteHit, NoteState, SearchResults } from "./note_types.js";

type Query = Record<string, string | number | Moment | undefined>;

function iso(moment: Moment): string {
  return moment instanceof Date ? moment.toISOString() : moment;
}

/** `?a=1&b=2` of the members given (none: ""). */
function queryString(query: Query): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    params.set(name, value instanceof Date ? value.toISOString() : String(value));
  }
  return params.size > 0 ? `?${params}` : "";
}

/** The members given (undefined left out, null kept: it clears), times as ISO strings. */
function bodyOf(fields: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    body[name] = value instanceof Date ? iso(value) : value;
  }
  return body;
}

const FACTS = "/users/{user}/facts";
const FACT = `${FACTS}/{id}`;
const PROPOSAL = "/users/{user}/held-proposals/{id}";
const PERSONS = "/users/{user}/persons";
const PERSON = `${PERSONS}/{id}`;
const NOTES = "/users/{user}/notes";

export class MemoryCalls {
  protected readonly transport: HttpTransport;

  constructor(transport: HttpTransport) {
    this.transport = transport;
  }

  /** The memory API's base URL, without a trailing slash. */
  get apiUrl(): string {
    return this.transport.apiUrl;
  }

  /** GET /users/{u}/facts (`read`): the active facts, or those of one time
   * (`validAt`: true then; `knownAt`: believed then), grouped by category. */
  async facts(userId: string, query: FactsQuery = {}): Promise<ActiveFacts> {
    const path = userPath(userId) + "/facts" + queryString({ scope: query.scope,
      agent_id: query.agentId, valid_at: query.validAt, known_at: query.knownAt });
    return await this.get(`GET ${FACTS}`, path) as ActiveFacts;
  }

  /** POST /users/{u}/facts (`admin`): a fact added by hand; answers it. */
  async addFact(userId: string, fact: NewFact): Promise<Fact> {
    const body = bodyOf({ text: fact.text, category: fact.category,
      importance: fact.importance, scope: fact.scope, agent_id: fact.agentId,
      valid_from: fact.validFrom, valid_to: fact.validTo, expires_at: fact.expiresAt,
      pinned: fact.pinned, via: fact.via, if_memory_on: fact.ifMemoryOn });
    return await this.transport.json("POST", { operation: `POST ${FACTS}`,
      path: `${userPath(userId)}/facts`, body }) as Fact;
  }

  /** PATCH /users/{u}/facts/{id} (`admin`): the version is superseded by the user's
   * text, in the same chain; answers the new version (a new id). WriteConflict (409): the
   * version is no longer the active one; read the chain and correct the current one. */
  async correctFact(userId: string, factId: number, correction: FactCorrection):
    Promise<Fact> {
    const body = bodyOf({ text: correction.text, category: correction.category,
      importance: correction.importance, valid_from: correction.validFrom,
      valid_to: correction.validTo, expires_at: correction.expiresAt, via: correction.via });
    return await this.transport.json("PATCH", { operation: `PATCH ${FACT}`,
      path: this.factPath(userId, factId), body }) as Fact;
  }

  /** DELETE /users/{u}/facts/{id} (`admin`): the fact is superseded, nothing deleted;
   * answers the version it ended. */
  async removeFact(userId: string, factId: number): Promise<Fact> {
    return await this.transport.json("DELETE", { operation: `DELETE ${FACT}`,
      path: this.factPath(userId, factId) }) as Fact;
  }

  /** PUT /users/{u}/facts/{id}/pin (`admin`): consolidation holds its changes to it. */
  async pinFact(userId: string, factId: number): Promise<Fact> {
    return await this.transport.json("PUT", { operation: `PUT ${FACT}/pin`,
      path: `${this.factPath(userId, factId)}/pin` }) as Fact;
  }

  /** DELETE /users/{u}/facts/{id}/pin (`admin`). */
  async unpinFact(userId: string, factId: number): Promise<Fact> {
    return await this.transport.json("DELETE", { operation: `DELETE ${FACT}/pin`,
      path: `${this.factPath(userId, factId)}/pin` }) as Fact;
  }

  /** GET /users/{u}/facts/{id}/chain (`read`): every version, oldest first. */
  async factChain(userId: string, factId: number): Promise<FactChain> {
    return await this.get(`GET ${FACT}/chain`, `${this.factPath(userId, factId)}/chain`) as
      FactChain;
  }

  /** GET /users/{u}/held-proposals (`read`): the open ones (default), resolved, or all. */
  async heldProposals(userId: string, options: { state?: ProposalState } = {}):
    Promise<HeldProposal[]> {
    const answer = await this.get("GET /users/{user}/held-proposals",
      `${userPath(userId)}/held-proposals${queryString({ state: options.state })}`) as
      { proposals: HeldProposal[] };
    return answer.proposals;
  }

  /** POST .../held-proposals/{id}/accept (`admin`): applied if its fact is still the
   * version it was held against; WriteConflict if answered before or stale. */
  async acceptProposal(userId: string, proposalId: number): Promise<HeldAnswer> {
    return await this.answerProposal(userId, proposalId, "accept");
  }

  /** POST .../held-proposals/{id}/dismiss (`admin`): the user's refusal, recorded. */
  async dismissProposal(userId: string, proposalId: number): Promise<HeldAnswer> {
    return await this.answerProposal(userId, proposalId, "dismiss");
  }

  /** GET /users/{u}/search (`read`): active facts (or those of one time) by meaning and
   * by words. */
  async search(userId: string, query: SearchQuery): Promise<SearchHit[]> {
    return (await this.searchWithNotes(userId, query)).results;
  }

  /** GET /users/{u}/search (`read`), the whole answer: the facts' hits, and the user's
   * notes for the query beside them, never mixed in (docs/notes.md; none from an API
   * with notes off, or as of a time). */
  async searchWithNotes(userId: string, query: SearchQuery): Promise<SearchResults> {
    const path = `${userPath(userId)}/search${queryString({ q: query.q, k: query.k,
      scope: query.scope, agent_id: query.agentId, valid_at: query.validAt,
      known_at: query.knownAt })}`;
    const answer = await this.get("GET /users/{user}/search", path) as
      { results: SearchHit[]; notes?: NoteHit[] };
    return { results: answer.results, notes: answer.notes ?? [] };
  }

  /** GET /users/{u}/known-facts (`read`): the system-prompt block ("" while the
   * user's memory is off). */
  async knownFacts(userId: string, query: KnownFactsQuery = {}): Promise<KnownFacts> {
    const path = `${userPath(userId)}/known-facts${queryString({ q: query.q,
      scope: query.scope, agent_id: query.agentId })}`;
    return await this.get("GET /users/{user}/known-facts", path) as KnownFacts;
  }

  /** GET /users/{u}/prompt-blocks (`read`): the prompt split (docs/prompt.md), the
   * stable block with its `version` (the cacheable prefix) and the volatile block for
   * `q`; both empty while the user's memory is off. */
  async promptBlocks(userId: string, query: PromptBlocksQuery = {}): Promise<PromptBlocks> {
    const path = `${userPath(userId)}/prompt-blocks${queryString({ q: query.q,
      agent_id: query.agentId })}`;
    return await this.get("GET /users/{user}/prompt-blocks", path) as PromptBlocks;
  }

  /** GET /users/{u}/stable-block (`read`): the stable block alone; null when
   * `knownVersion` is still its version (the API's 304 to If-None-Match). */
  async stableBlock(userId: string,
    options: { agentId?: string; knownVersion?: string } = {}): Promise<StableBlock | null> {
    const path = `${userPath(userId)}/stable-block${queryString({
      agent_id: options.agentId })}`;
    const answer = await this.transport.json("GET", {
      operation: "GET /users/{user}/stable-block", path, conditional: true,
      headers: options.knownVersion === undefined ? undefined
        : { "If-None-Match": `"${options.knownVersion}"` } });
    return answer === undefined ? null : answer as StableBlock;
  }

  /** GET /users/{u}/portrait (`read`): the user's portrait and its state; null when
   * `knownTag` (`portraitTag` of what was shown) is still current (the API's 304). */
  async portrait(userId: string, options: { knownTag?: string } = {}):
    Promise<UserPortrait | null> {
    const answer = await this.transport.json("GET", {
      operation: "GET /users/{user}/portrait", path: `${userPath(userId)}/portrait`,
      conditional: true, headers: options.knownTag === undefined ? undefined
        : { "If-None-Match": `"${options.knownTag}"` } });
    return answer === undefined ? null : answer as UserPortrait;
  }

  /** DELETE /users/{u}/portrait (`admin`): remove it; none is made until
   * `refreshPortrait`. The version that ended, or null. */
  async removePortrait(userId: string): Promise<number | null> {
    const answer = await this.transport.json("DELETE", {
      operation: "DELETE /users/{user}/portrait", path: `${userPath(userId)}/portrait` }) as
      { removed_version: number | null };
    return answer.removed_version;
  }

  /** POST /users/{u}/portrait/refresh (`admin`): ask for a portrait (again); whether a
   * refresh was queued. */
  async refreshPortrait(userId: string): Promise<boolean> {
    const answer = await this.transport.json("POST", {
      operation: "POST /users/{user}/portrait/refresh",
      path: `${userPath(userId)}/portrait/refresh` }) as { queued: boolean };
    return answer.queued;
  }

  /** DELETE /users/{u} (`admin`): erase everything about the user; what went per table. */
  async eraseUser(userId: string): Promise<Erased> {
    return await this.transport.json("DELETE", { operation: "DELETE /users/{user}",
      path: userPath(userId) }) as Erased;
  }

  /** GET /users/{u}/export (`admin`): everything held about the user. */
  async exportUser(userId: string): Promise<UserExport> {
    return await this.get("GET /users/{user}/export", `${userPath(userId)}/export`) as
      UserExport;
  }

  /** GET /users/{u}/consent (`read`): whether memfleet remembers the user. */
  async getConsent(userId: string): Promise<Consent> {
    return await this.get("GET /users/{user}/consent", `${userPath(userId)}/consent`) as
      Consent;
  }

  /** PUT /users/{u}/consent (`admin`): on or off; `{ enabled: false, forget: true }`
   * also erases everything held. */
  async setConsent(userId: string, choice: ConsentChoice): Promise<ConsentChanged> {
    return await this.transport.json("PUT", { operation: "PUT /users/{user}/consent",
      path: `${userPath(userId)}/consent`,
      body: bodyOf({ enabled: choice.enabled, forget: choice.forget }) }) as ConsentChanged;
  }

  // The people in the user's life (docs/persons.md) ----------------------------------
  // A fact about a person is theirs, never the user's: it is in none of the user's reads
  // above. Each change is one of the user's manual writes (RateLimited, 429). A merged
  // person answers a change with WriteConflict (409), as does a fact no longer active;
  // another user's person or fact id is NotFound (404).

  /** GET /users/{u}/persons (`read`): the people in the user's life, each with the
   * active facts about them; `includeMerged`: the persons merged into another too. */
  async persons(userId: string, options: { includeMerged?: boolean } = {}):
    Promise<PersonWithFacts[]> {
    const path = `${userPath(userId)}/persons${queryString({
      include_merged: options.includeMerged === true ? "true" : undefined })}`;
    const answer = await this.get(`GET ${PERSONS}`, path) as { persons: PersonWithFacts[] };
    return answer.persons;
  }

  /** POST /users/{u}/persons (`admin`): a person made by hand, with a name, a relation,
   * or both (neither: InvalidRequest, the API's 422). */
  async createPerson(userId: string, person: NewPerson): Promise<Person> {
    const body = bodyOf({ display_name: person.displayName, relation: person.relation,
      aliases: person.aliases ?? [] });
    return await this.transport.json("POST", { operation: `POST ${PERSONS}`,
      path: `${userPath(userId)}/persons`, body }) as Person;
  }

  /** PATCH /users/{u}/persons/{id} (`admin`): rename, change the relation or the aliases
   * (a member left out is kept, null clears it): a new label version. */
  async updatePerson(userId: string, personId: number, changes: PersonChanges):
    Promise<Person> {
    const body = bodyOf({ display_name: changes.displayName, relation: changes.relation,
      aliases: changes.aliases });
    return await this.transport.json("PATCH", { operation: `PATCH ${PERSON}`,
      path: this.personPath(userId, personId), body }) as Person;
  }

  /** POST /users/{u}/persons/{id}/aliases (`admin`): one more name the person goes by. */
  async addAlias(userId: string, personId: number, alias: string): Promise<Person> {
    return await this.transport.json("POST", { operation: `POST ${PERSON}/aliases`,
      path: `${this.personPath(userId, personId)}/aliases`, body: { alias } }) as Person;
  }

  /** POST /users/{u}/persons/{id}/merge (`admin`): `personId` merged `into` the other,
   * which stays and is answered: the facts follow (new versions), the names become its
   * aliases. WriteConflict: merged before, or into itself. */
  async mergePersons(userId: string, personId: number, into: number): Promise<Person> {
    return await this.transport.json("POST", { operation: `POST ${PERSON}/merge`,
      path: `${this.personPath(userId, personId)}/merge`,
      body: { into: Number(idPart("into", into)) } }) as Person;
  }

  /** PUT /users/{u}/facts/{id}/person (`admin`): who the fact is about, a person or the
   * user (`personId` null). A correction: the new version in the fact's chain is
   * answered; the old one was never true as attributed. */
  async moveFact(userId: string, factId: number, personId: number | null): Promise<Fact> {
    const person = personId === null ? null : Number(idPart("person_id", personId));
    return await this.transport.json("PUT", { operation: `PUT ${FACT}/person`,
      path: `${this.factPath(userId, factId)}/person`, body: { person_id: person } }) as Fact;
  }

  // Notes beside facts (docs/notes.md) ----------------------------------------------
  // Free-form context about the user, kept apart from the facts. A removal is one of the
  // user's manual writes (RateLimited, 429); a note that is not an active note of the
  // user is NotFound (404).

  /** GET /users/{u}/notes (`read`): the user's notes, `active` (oldest first, the
   * default) or `all` (every version, by id, with how each ended). */
  async notes(userId: string, options: { state?: NoteState } = {}): Promise<Note[]> {
    const path = `${userPath(userId)}/notes${queryString({ state: options.state })}`;
    const answer = await this.get(`GET ${NOTES}`, path) as { notes: Note[] };
    return answer.notes;
  }

  /** DELETE /users/{u}/notes/{id} (`admin`): the note is superseded as `removed`, never
   * deleted; answers the version it ended. */
  async removeNote(userId: string, noteId: number): Promise<Note> {
    return await this.transport.json("DELETE", { operation: `DELETE ${NOTES}/{id}`,
      path: `${userPath(userId)}/notes/${idPart("note_id", noteId)}` }) as Note;
  }

  /** GET /users/{u}/facts/{id}/notes (`read`): the notes the promotion job made the fact
   * from (none for any other fact). */
  async factNotes(userId: string, factId: number): Promise<Note[]> {
    const answer = await this.get(`GET ${FACT}/notes`,
      `${this.factPath(userId, factId)}/notes`) as { notes: Note[] };
    return answer.notes;
  }

  private async get(operation: string, path: string): Promise<unknown> {
    return await this.transport.json("GET", { operation, path });
  }

  private personPath(userId: string, personId: number): string {
    return `${userPath(userId)}/persons/${idPart("person_id", personId)}`;
  }

  private factPath(userId: string, factId: number): string {
    return `${userPath(userId)}/facts/${idPart("fact_id", factId)}`;
  }

  private async answerProposal(userId: string, proposalId: number,
    answer: "accept" | "dismiss"): Promise<HeldAnswer> {
    return await this.transport.json("POST", { operation: `POST ${PROPOSAL}/${answer}`,
      path: `${userPath(userId)}/held-proposals/${idPart("proposal_id", proposalId)}/${answer}`,
    }) as HeldAnswer;
  }
}
