/** The shapes a chat server passes and gets back, in either mode. */

export type Role = "user" | "assistant" | "system" | "tool";

export interface Message {
  role: Role;
  content: string;
}

export interface HandoverRequest {
  userId: string;
  sessionId: string;
  /** The session's whole current list, oldest first. */
  messages: readonly unknown[];
  /** The persona or agent instance of the session (docs/memory_model.md, "Scopes"). */
  agentId?: string;
  /** When the chat server read `messages`, in us on the Redis clock (`redisClock`):
   * a list read at or before an erase of the user stores nothing. */
  listedAtUs?: number;
}

export interface HandoverResult {
  /** The hand-over's number (0: none stored): `waitForMemory` waits for a commit covering it. */
  handoverId: number;
  /** The job queued for it; null when a job already queued reads it (always null over HTTP). */
  jobId: string | null;
  /** The previous list went to the session's backlog (null over HTTP: not told). */
  keptOlder: boolean | null;
}

export interface SessionRef {
  userId: string;
  sessionId: string;
}

/** Where a session's memory stands (docs/protocol.md, "Status and read-your-writes"). */
export interface SessionStatus {
  /** The latest hand-over's number (0: none kept). */
  latest: number;
  /** The number of the latest hand-over a commit finished (0: none). */
  finished: number;
  /** Older lists still waiting in the backlog. */
  olderLists: number;
}

/** One commit event (docs/protocol.md, "The commit events"): no id, no text. */
export interface CommitEvent {
  /** The stream entry's id: pass it as `after` to read on. */
  id: string;
  /** The session's stand-in (`sessionTag`). */
  session: string;
  handover: number;
  olderLists: number;
  outcome: string;
  added: number;
  updated: number;
  deleted: number;
  /** ms on the Redis clock. */
  at: number;
}

export interface EventsQuery {
  /** A stream id: "0" from the oldest kept, "$" only new ones (the default). */
  after?: string;
  count?: number;
  /** Wait this long for an event when none is there yet; undefined: do not wait. */
  blockMs?: number;
}

/** Every message of hand-over `handoverId` is in a committed slice. */
export function covers(state: SessionStatus, handoverId: number): boolean {
  return state.finished >= handoverId && state.olderLists === 0;
}

/** An event covers hand-over `handoverId` of its session. */
export function eventCovers(event: CommitEvent, handoverId: number): boolean {
  return event.handover >= handoverId && event.olderLists === 0;
}
