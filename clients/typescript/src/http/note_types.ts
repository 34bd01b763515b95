/**
 * Notes beside facts (docs/notes.md) as the memory API answers them
 * (worker/api/note_models.py is the source): free-form context about the user that is
 * no settled fact, kept with supersession, found by search beside the facts and never
 * mixed into them. As in memory_types.ts: snake_case members, times as ISO strings.
 */
import type { SearchHit } from "./memory_types.js";

/** Which of the user's notes GET /users/{u}/notes lists: those kept now, or every version. */
export type NoteState = "active" | "all";
/** How a note ended: said anew in its session, removed by the user, or made a fact. */
export type NoteReason = "updated" | "removed" | "promoted";

/** One version of a note (GET /users/{u}/notes and every route that answers a note). */
export interface Note {
  id: number;
  text: string;
  /** When it was said. */
  observed_at: string;
  source_session_id: string | null;
  created_at: string;
  superseded_at: string | null;
  /** The later note of the same session that said it anew (`updated`). */
  superseded_by: number | null;
  superseded_reason: NoteReason | null;
  /** The fact the promotion job made of it and similar notes (`promoted`). */
  promoted_to: number | null;
}

/** A note a search found: `kind` marks it as a note, never a fact. */
export interface NoteHit {
  kind: "note";
  note: Note;
  /** Reciprocal Rank Fusion score (k = 60). */
  score: number;
  semantic_rank: number | null;
  lexical_rank: number | null;
}

/** GET /users/{u}/search as a whole: the facts' hits, and the notes' beside them. */
export interface SearchResults {
  results: SearchHit[];
  /** Empty from an API with notes off, for a search as of a time (`validAt`, `knownAt`),
   * and for the scopes `none` and `relationship` (notes are the user's, of no agent). */
  notes: NoteHit[];
}
