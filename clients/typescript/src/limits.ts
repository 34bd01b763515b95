/**
 * What a hand-over may hold (docs/protocol.md, "Ids, text and sizes"). The
 * defaults are the fleet's (worker/memory_rules.py); a fleet with other
 * MEMFLEET_MAX_* settings must be given the same here, since enqueue.lua keeps
 * the session and user budgets from the figures the client passes.
 */
export interface Limits {
  maxMessageChars: number;
  maxMessages: number;
  maxIdChars: number;
  maxMessageBytes: number;
  maxHandoverBytes: number;
  maxSessionBytes: number;
  maxUserSessions: number;
}

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxMessageChars: 32_000,
  maxMessages: 20_000,
  maxIdChars: 256,
  maxMessageBytes: 65_536,
  maxHandoverBytes: 1_048_576,
  maxSessionBytes: 4_194_304,
  maxUserSessions: 16,
});

export function limitsWith(overrides?: Partial<Limits>): Limits {
  return { ...DEFAULT_LIMITS, ...(overrides ?? {}) };
}
