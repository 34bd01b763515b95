/**
 * What the memory API's routes take and answer (docs/api.md; worker/api/memory_models.py
 * and panel_models.py are the source). Answers are the API's JSON as it is: snake_case
 * members, times as ISO 8601 strings, ids as numbers. Queries and bodies are written
 * in camelCase here and sent in the API's names; a time may be a Date or an ISO string.
 */

export type Category = "preference" | "fact" | "event" | "relationship" | "decision" | "general";
/** A fact's own scope: of the user (profile), or of one agent (relationship). */
export type FactScope = "profile" | "relationship";
/** What a read covers: also `both` (profile and the agent's), `none`, `all` (every agent's). */
export type ReadScope = "none" | "profile" | "relationship" | "both" | "all";
export type SourceKind = "extracted" | "manual" | "backfill" | "imported";
export type Basis = "stated" | "inferred";
export type SupersededReason = "updated" | "deleted" | "expired" | "removed";
/** How a manual fact was written (the fact's `written_via`). */
export type WrittenVia = "api" | "panel" | "tool" | "cli";
/** How a write through the API says it was made: by an application (`api`, the
 * default), by the user on the memory panel, or by the assistant with the memory tools. */
export type Via = "api" | "panel" | "tool";
/** A time: a Date, or an ISO 8601 string (without a zone: UTC). */
export type Moment = Date | string;

/** One version of a fact (GET /users/{u}/facts and every route that answers a fact). */
export interface Fact {
  id: number;
  text: string;
  category: Category;
  importance: number;
  observed_at: string;
  source_kind: SourceKind;
  source_session_id: string | null;
  superseded_at: string | null;
  superseded_by: number | null;
  created_at: string;
  scope: FactScope;
  agent_id: string | null;
  valid_from: string | null;
  valid_to: string | null;
  expires_at: string | null;
  pinned: boolean;
  basis: Basis;
  confidence: number;
  superseded_reason: SupersededReason | null;
  embedding_model: string | null;
  embedding_dim: number | null;
  /** A manual fact's way in: `api`, `panel`, `tool` or `cli`; null for an extracted or
   * imported fact, and for a manual one written before it was recorded. */
  written_via?: WrittenVia | null;
  /** Who the fact is about: null, the user; else one of the user's persons (docs/persons.md). */
  person_id?: number | null;
}

export interface CategoryGroup {
  category: Category;
  /** Pinned first, then by importance, confidence, and the newest first. */
  facts: Fact[];
}

/** GET /users/{u}/facts */
export interface ActiveFacts {
  user_id: string;
  count: number;
  /** One group per category that has facts. */
  groups: CategoryGroup[];
}

/** The facts list's filters: one of `validAt` (what was true then) or `knownAt`
 * (what memfleet believed then). Without `scope`: `both` with `agentId`, else `all`. */
export interface FactsQuery {
  scope?: ReadScope;
  agentId?: string;
  validAt?: Moment;
  knownAt?: Moment;
}

/** POST /users/{u}/facts: a fact added by hand (manual, stated, fully trusted). */
export interface NewFact {
  text: string;
  category?: Category;
  importance?: number;
  /** `relationship` needs `agentId`; `profile` (the default) takes none. */
  scope?: FactScope;
  agentId?: string;
  validFrom?: Moment;
  validTo?: Moment;
  expiresAt?: Moment;
  pinned?: boolean;
  /** How it was written; left out: `api`. */
  via?: Via;
  /** Store it only while the user's memory is on, checked in the write's own
   * transaction: else MemoryOff (409) and nothing stored or embedded. */
  ifMemoryOn?: boolean;
}

/** PATCH /users/{u}/facts/{id}, a merge patch: a member left out keeps the old
 * version's value; `validTo` or `expiresAt` null clears it. Without `validFrom` the
 * edit is a correction (the old text was never true); a later one: it changed then. */
export interface FactCorrection {
  text: string;
  category?: Category;
  importance?: number;
  validFrom?: Moment;
  validTo?: Moment | null;
  expiresAt?: Moment | null;
  /** How the correction was written; left out: `api`. */
  via?: Via;
}

/** GET /users/{u}/facts/{id}/chain */
export interface FactChain {
  fact_id: number;
  /** Every version, oldest first. */
  versions: Fact[];
}

export type ProposalState = "open" | "resolved" | "all";

/** A change consolidation proposed and held for the user (GET /users/{u}/held-proposals). */
export interface HeldProposal {
  id: number;
  /** The version it was held against; null for an ADD. */
  fact_id: number | null;
  run_id: number | null;
  event: "ADD" | "UPDATE" | "DELETE";
  reason: "pinned" | "outranked" | "undecided";
  /** An UPDATE's proposed text, an ADD's fact; null for a DELETE. */
  text: string | null;
  category: string | null;
  importance: number | null;
  scope: string | null;
  agent_id: string | null;
  /** An ADD's fact: who it is about (null: the user; else one of the user's persons,
   * whose fact an accept writes). Absent from a server of an earlier release. */
  person_id?: number | null;
  session_id: string | null;
  proposed_at: string;
  resolution: "accepted" | "dismissed" | null;
  resolved_at: string | null;
  /** `user`, or `key:<id>` for a service key. */
  resolved_by: string | null;
  result_fact_id: number | null;
  /** Open, but its fact is no longer that version: it can only be dismissed. */
  stale: boolean;
}

/** POST .../held-proposals/{id}/accept or /dismiss */
export interface HeldAnswer {
  proposal: HeldProposal;
  /** Accepted: the new version (UPDATE, ADD) or the one it ended (DELETE); dismissed: null. */
  fact: Fact | null;
}

/** One hit of GET /users/{u}/search. */
export interface SearchHit {
  fact: Fact;
  /** Reciprocal Rank Fusion score (k = 60). */
  score: number;
  semantic_rank: number | null;
  lexical_rank: number | null;
}

export interface SearchQuery {
  q: string;
  /** How many, 1 to 100 (10). */
  k?: number;
  scope?: ReadScope;
  agentId?: string;
  validAt?: Moment;
  knownAt?: Moment;
}

export interface KnownFactsQuery {
  q?: string;
  scope?: ReadScope;
  agentId?: string;
}

/** GET /users/{u}/known-facts */
export interface KnownFacts {
  /** The system-prompt block of the user's known facts ("" when none). */
  block: string;
  count: number;
}

export interface PromptBlocksQuery {
  /** The turn's message: the volatile block's query (none: the volatile block is ""). */
  q?: string;
  /** The assistant: its relationship facts join the profile's. */
  agentId?: string;
}

/** The stable block (docs/prompt.md): the same bytes from turn to turn until a commit
 * changes what it holds; `version` is a hash of them, the ETag over HTTP. */
export interface StableBlock {
  block: string;
  version: string;
  count: number;
}

/** The facts retrieved for the turn's message that the stable block lacks, re-ranked. */
export interface VolatileBlock {
  block: string;
  count: number;
}

/** GET /users/{u}/prompt-blocks */
export interface PromptBlocks {
  stable: StableBlock;
  volatile: VolatileBlock;
}

/** GET /users/{u}/portrait (docs/portrait.md): the user's portrait, `state` current
 * (`portrait` is it), none (not made yet), removed (by the user: none is made until
 * asked again) or off (memory is off). Its tag (the ETag) is `portraitTag`'s. */
export interface UserPortrait {
  user_id: string;
  state: "current" | "none" | "removed" | "off";
  portrait: {
    text: string;
    version: number;
    fact_count: number;
    model: string;
    created_at: string;
  } | null;
}

/** The portrait's entity tag, without quotes: its version, or its state without one. */
export function portraitTag(shown: UserPortrait): string {
  return shown.portrait === null ? shown.state : String(shown.portrait.version);
}

/** One of the people in the user's life (docs/persons.md), with the current label:
 * what the answers of POST /users/{u}/persons, PATCH .../persons/{id}, .../aliases
 * and .../merge are. */
export interface Person {
  id: number;
  /** Null until a name is known ("my wife"). */
  display_name: string | null;
  /** To the user: "sister", "wife", "boss". */
  relation: string | null;
  aliases: string[];
  /** Met in a conversation, or made by the user. */
  created_from: "conversation" | "user";
  source_session_id: string | null;
  created_at: string;
  /** When the current name, relation and aliases were set, and by whom. */
  labelled_at: string;
  label_set_by: "conversation" | "user" | "merge";
  /** Merged into that person: its facts are theirs now. */
  merged_into: number | null;
  merged_at: string | null;
}

/** One person of GET /users/{u}/persons, with the active facts about them (pinned first,
 * then by importance). */
export interface PersonWithFacts extends Person {
  facts: Fact[];
}

/** POST /users/{u}/persons: a person made by hand, with a name, a relation, or both. */
export interface NewPerson {
  displayName?: string;
  relation?: string;
  aliases?: string[];
}

/** PATCH /users/{u}/persons/{id}, a merge patch of the label: a member left out keeps
 * the current value, null clears it (a name or a relation must remain; `aliases: null`
 * clears them all). The old label stays in the person's history. */
export interface PersonChanges {
  displayName?: string | null;
  relation?: string | null;
  aliases?: string[] | null;
}

/** DELETE /users/{u}: what went, per table. */
export interface Erased {
  user_id: string;
  deleted: Record<string, number>;
}

/** GET /users/{u}/consent */
export interface Consent {
  enabled: boolean;
  /** False: the user never chose; the fleet's default applies. */
  chosen: boolean;
}

/** PUT /users/{u}/consent: `forget` (with `enabled` false) also erases everything. */
export interface ConsentChoice {
  enabled: boolean;
  forget?: boolean;
}

export interface ConsentChanged extends Consent {
  /** With forget: what went, as eraseUser answers. */
  deleted: Record<string, number> | null;
}

/** A fact row of the export: every column, active and superseded versions. */
export interface ExportFact extends Omit<Fact, "embedding_model" | "valid_from"> {
  run_id: number | null;
  embedding_model: string;
  valid_from: string;
}

export interface ExportSession {
  session_id: string;
  processed_count: number;
  user_turns_since_summary: number;
  summary: string | null;
  summary_updated_at: string | null;
  updated_at: string;
}

export interface ExportRun {
  id: number;
  session_id: string | null;
  outcome: string;
  error: string | null;
  slice_first_hash: string | null;
  slice_last_hash: string | null;
  slice_len: number;
  candidates: number;
  added: number;
  updated: number;
  deleted: number;
  unchanged: number;
  rejected: number;
  held: number;
  input_tokens: number;
  output_tokens: number;
  started_at: string;
  finished_at: string;
}

/** GET /users/{u}/export: everything memfleet holds about the user (right of access). */
export interface UserExport {
  user_id: string;
  exported_at: string;
  consent: { enabled: boolean; chosen: boolean; updated_at: string | null };
  facts: ExportFact[];
  sessions: ExportSession[];
  runs: ExportRun[];
  held_proposals: Omit<HeldProposal, "stale">[];
  /** Every version of the portrait (docs/portrait.md); absent from an older API. */
  portraits?: Record<string, unknown>[];
  /** Every person, merged ones too, with every label version (docs/persons.md); absent
   * from an older API. */
  persons?: Record<string, unknown>[];
}
