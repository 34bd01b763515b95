/**
 * One call of enqueue.lua: its KEYS and ARGV exactly as worker/protocol/queue.py
 * passes them (docs/protocol.md, "enqueue.lua"), and its reply read into a
 * result or the Python client's error.
 */
import {
  HandoverBacklogFull,
  MemfleetError,
  HandoverTooLarge,
  SessionBytesFull,
  UserSessionsFull,
} from "../errors.js";
import type { Limits } from "../limits.js";
import type { HandoverResult } from "../types.js";
import {
  ARQ_IN_PROGRESS_PREFIX,
  ARQ_JOB_PREFIX,
  backlogKey,
  handoverKey,
  metaKey,
  pendingKey,
  queuedKey,
  sessionKey,
  userActiveKey,
  userBacklogPrefix,
  userJobsKey,
  userMetaPrefix,
  userMovedKey,
  userSessionsKey,
  waitingKey,
} from "./keys.js";
import { jobJson } from "./payload.js";
import type { ShardMode } from "./shards.js";

// Older lists a session may hold unfinished; one more refuses the hand-over.
export const BACKLOG_LIMIT = 32;
export const PAYLOAD_TTL_MS = 7 * 86_400_000;
// A job not claimed this long after it was due is looked at by the recovery pass.
export const PENDING_GRACE_MS = 10_000;
export const JOB_EXPIRES_MS = 86_400_000;

export interface EnqueueCall {
  keys: string[];
  args: (string | number)[];
}

export interface EnqueueInput {
  userId: string;
  sessionId: string;
  payload: string;
  queueName: string;
  limits: Limits;
  jobId: string;
  /** ms since the epoch, the caller's clock. */
  nowMs: number;
  /** On a moving user's old shard while a shard is added: ARGV 18 to 20. */
  mode?: ShardMode | null;
}

export function enqueueCall(input: EnqueueInput): EnqueueCall {
  const { userId: u, sessionId: s, queueName: queue, limits, nowMs: now } = input;
  return {
    keys: [handoverKey(u, s), queuedKey(u, s), queue, pendingKey(queue), metaKey(u, s),
      backlogKey(u, s), userSessionsKey(u), waitingKey(queue), userActiveKey(u),
      userJobsKey(u)],
    args: [input.payload, PAYLOAD_TTL_MS, input.jobId, jobJson(u, s, now), now,
      JOB_EXPIRES_MS, ARQ_JOB_PREFIX, ARQ_IN_PROGRESS_PREFIX, sessionKey(u, s),
      now + PENDING_GRACE_MS, BACKLOG_LIMIT, s, limits.maxHandoverBytes,
      limits.maxSessionBytes, limits.maxUserSessions, userMetaPrefix(u), userBacklogPrefix(u),
      ...(input.mode ? [input.mode, userMovedKey(u), PAYLOAD_TTL_MS] : [])],
  };
}

function asText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

/** The script's reply as a result, or the refusal as its error (queue.enqueue). */
export function readEnqueueReply(reply: unknown, limits: Limits): HandoverResult {
  const result = readShardReply(reply, limits);
  if (result === null) { // only a shard mode refuses so; there is none here
    throw new MemfleetError("the hand-over script refused a hand-over with no shard mode");
  }
  return result;
}

/** The same, on a moving user's old shard (queue.enqueue_on_old_shard): null when the
 * script refused (`{-5, 0}`) because the user's hand-overs go to the new shard now. */
export function readShardReply(reply: unknown, limits: Limits): HandoverResult | null {
  if (reply === -1) {
    throw new HandoverBacklogFull(
      `the session holds ${BACKLOG_LIMIT} older message lists no job has finished yet`);
  }
  if (!Array.isArray(reply) || reply.length < 2) {
    throw new TypeError("enqueue.lua answered something that is not a reply of it");
  }
  if (typeof reply[0] === "number") { // a refusal: {code, figure}
    const code = reply[0];
    const figure = Number(asText(reply[1]));
    if (code === -2) {
      throw new SessionBytesFull(`the session would hold ${figure} bytes of message lists no`
        + ` job has finished, over the limit of ${limits.maxSessionBytes}`);
    }
    if (code === -3) {
      throw new UserSessionsFull(`the user has ${limits.maxUserSessions} sessions with message`
        + " lists no job has finished, the limit");
    }
    if (code === -5) return null;
    throw HandoverTooLarge.of("the hand-over", figure, limits.maxHandoverBytes);
  }
  const [job, kept, number] = reply as [unknown, unknown, unknown];
  return {
    jobId: job === null || job === undefined ? null : asText(job),
    keptOlder: Number(kept) === 1,
    handoverId: Number(asText(number)),
  };
}
