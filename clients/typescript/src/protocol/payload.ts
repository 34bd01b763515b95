/**
 * The payload and the ARQ job, byte for byte as the Python client writes them
 * (docs/protocol.md, "The payload" and "The ARQ job"): compact JSON, fields in
 * the documented order. `JSON.stringify` escapes exactly what the protocol says
 * (`"`, `\`, and control characters, which validation has already narrowed to
 * tab, newline and carriage return in messages and to none in ids) and writes
 * every other character as itself: a unit test compares the bytes with the
 * Python side's (tests/fixtures/protocol/).
 */
import { HandoverTooLarge } from "../errors.js";
import type { Limits } from "../limits.js";
import type { Message } from "../types.js";

export const JOB_FUNCTION = "persist_session_memory";

/** What a payload carries (the Handover model of worker/conversation.py). */
export interface Handover {
  sessionId: string;
  userId: string;
  messages: readonly Message[];
  /** ISO 8601 in UTC (`isoUtc`). */
  handedOverAt: string;
  /** W3C trace context (`traceparent`, optionally `tracestate`), or {}. */
  trace: Readonly<Record<string, string>>;
  agentId?: string | undefined;
  listedAtUs?: number | undefined;
}

/** A time as pydantic writes a UTC datetime: microseconds when there are any, and Z. */
export function isoUtc(at: Date): string {
  const text = at.toISOString(); // 2026-05-01T12:00:00.123Z
  const ms = at.getUTCMilliseconds();
  return ms === 0 ? `${text.slice(0, 19)}Z` : `${text.slice(0, 23)}000Z`;
}

/** The payload's JSON text. Optional fields are written only when given, last. */
export function encodePayload(handover: Handover): string {
  const body: Record<string, unknown> = {
    v: 1,
    session_id: handover.sessionId,
    user_id: handover.userId,
    messages: handover.messages.map(({ role, content }) => ({ role, content })),
    handed_over_at: handover.handedOverAt,
    trace: handover.trace,
  };
  if (handover.agentId !== undefined) body["agent_id"] = handover.agentId;
  if (handover.listedAtUs !== undefined) body["listed_at_us"] = handover.listedAtUs;
  return JSON.stringify(body);
}

function bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * The hand-over and its payload, cut to its most recent messages whose payload
 * fits `maxHandoverBytes` (payload.fit_handover); HandoverTooLarge when not even
 * the newest message fits beside the ids and the trace.
 */
export function fitHandover(handover: Handover, limits: Limits): [Handover, string] {
  let payload = encodePayload(handover);
  const limit = limits.maxHandoverBytes;
  if (bytes(payload) <= limit) return [handover, payload];
  // The envelope, then each message's JSON and its comma, newest first.
  let room = limit - bytes(encodePayload({ ...handover, messages: [] })) + 1;
  let keep = 0;
  for (let i = handover.messages.length - 1; i >= 0; i--) {
    const message = handover.messages[i] as Message;
    room -= bytes(JSON.stringify({ role: message.role, content: message.content })) + 1;
    if (room < 0) break;
    keep++;
  }
  while (keep > 0) {
    const window = { ...handover, messages: handover.messages.slice(-keep) };
    payload = encodePayload(window);
    if (bytes(payload) <= limit) return [window, payload];
    keep--;
  }
  const newest = encodePayload({ ...handover, messages: handover.messages.slice(-1) });
  throw HandoverTooLarge.of("the hand-over", bytes(newest), limit);
}

/** The ARQ job's JSON: `user_id` first, as the erase finds a user's jobs by that text. */
export function jobJson(userId: string, sessionId: string, enqueueMs: number): string {
  return JSON.stringify({
    t: null, f: JOB_FUNCTION, a: [], k: { user_id: userId, session_id: sessionId }, et: enqueueMs,
  });
}
