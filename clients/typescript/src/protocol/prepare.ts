/**
 * A hand-over from the caller's request to its payload, checked in the Python
 * client's order (session id, user id, messages, agent id): the same request
 * fails with the same reason in both, and a long session is cut to the same
 * window (worker/client/handover.py, schedule_memory_persistence).
 */
import type { Limits } from "../limits.js";
import type { HandoverRequest } from "../types.js";
import { fitHandover, type Handover } from "./payload.js";
import { checkId, checkListedAt, parseMessages, recentWindow } from "./validation.js";

export interface Prepared {
  userId: string;
  sessionId: string;
  /** The messages kept: all, or the most recent window that fits. */
  handover: Handover;
  payload: string;
}

export function prepareHandover(request: HandoverRequest, limits: Limits,
  at: { handedOverAt: string; trace?: Readonly<Record<string, string>> }): Prepared {
  const sessionId = checkId(request.sessionId, "session_id", limits);
  const userId = checkId(request.userId, "user_id", limits);
  const messages = parseMessages(recentWindow(request.messages, limits), limits);
  const agentId = request.agentId === undefined || request.agentId === null ? undefined
    : checkId(request.agentId, "agent_id", limits);
  const [handover, payload] = fitHandover({
    sessionId, userId, messages, handedOverAt: at.handedOverAt, trace: at.trace ?? {},
    agentId, listedAtUs: checkListedAt(request.listedAtUs),
  }, limits);
  return { userId, sessionId, handover, payload };
}
