/**
 * Every Redis key name this client touches, built here and nowhere else: the
 * client's rows of the table in docs/protocol.md, "Keys" (worker/protocol/keys.py
 * is the reference; a unit test compares the keys and arguments of one
 * hand-over with the Python side's).
 */

export const DEFAULT_QUEUE = "memfleet:queue";

const HANDOVER_PREFIX = "memfleet:handover:";
const META_PREFIX = "memfleet:handover-meta:";
const BACKLOG_PREFIX = "memfleet:backlog:";
const QUEUED_PREFIX = "memfleet:queued:";
const USER_SESSIONS_PREFIX = "memfleet:sessions:";
const USER_ACTIVE_PREFIX = "memfleet:active:";
const USER_JOBS_PREFIX = "memfleet:jobs:";
const USER_MOVED_PREFIX = "memfleet:moved:";
const PENDING_PREFIX = "memfleet:pending:";
const WAITING_PREFIX = "memfleet:waiting:";
const EVENTS_PREFIX = "memfleet:events:";
export const ARQ_JOB_PREFIX = "arq:job:";
export const ARQ_IN_PROGRESS_PREFIX = "arq:in-progress:";

// '%' first: it escapes the others.
const ESCAPES: readonly [string, string][] = [["%", "%25"], ["{", "%7B"], ["}", "%7D"]];

/** `{<user>}`: the hash tag every key of the user carries. */
export function userTag(userId: string): string {
  let escaped = userId;
  for (const [raw, code] of ESCAPES) escaped = escaped.split(raw).join(code);
  return `{${escaped}}`;
}

/** `{<user>}:<session id>`: what every per-session key ends in. */
export function sessionKey(userId: string, sessionId: string): string {
  return `${userTag(userId)}:${sessionId}`;
}

export const handoverKey = (u: string, s: string): string => HANDOVER_PREFIX + sessionKey(u, s);
export const metaKey = (u: string, s: string): string => META_PREFIX + sessionKey(u, s);
export const backlogKey = (u: string, s: string): string => BACKLOG_PREFIX + sessionKey(u, s);
export const queuedKey = (u: string, s: string): string => QUEUED_PREFIX + sessionKey(u, s);
export const userSessionsKey = (u: string): string => USER_SESSIONS_PREFIX + userTag(u);
export const userActiveKey = (u: string): string => USER_ACTIVE_PREFIX + userTag(u);
/** enqueue.lua's KEYS 10: the user's jobs, so that an erase finds them without the queue. */
export const userJobsKey = (u: string): string => USER_JOBS_PREFIX + userTag(u);
/** Set by enqueue.lua's `hold` on a moving user's old shard: the user's hand-overs go on. */
export const userMovedKey = (u: string): string => USER_MOVED_PREFIX + userTag(u);
/** The prefix of the user's other sessions' meta keys, for enqueue.lua's ARGV 16. */
export const userMetaPrefix = (u: string): string => `${META_PREFIX}${userTag(u)}:`;
/** The same of backlog keys, for ARGV 17. */
export const userBacklogPrefix = (u: string): string => `${BACKLOG_PREFIX}${userTag(u)}:`;
export const pendingKey = (queue: string): string => PENDING_PREFIX + queue;
export const waitingKey = (queue: string): string => WAITING_PREFIX + queue;
export const eventsKey = (queue: string): string => EVENTS_PREFIX + queue;
