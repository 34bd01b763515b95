/**
 * The stand-in commit events name a session by: the first 16 hex digits of
 * HMAC-SHA-256 over the session key (`{<user>}:<session id>`, UTF-8), keyed by
 * MEMFLEET_TELEMETRY_ID_KEY (UTF-8) (docs/protocol.md, "The commit events").
 */
import { createHmac } from "node:crypto";

import { sessionKey } from "./keys.js";

export function sessionTag(userId: string, sessionId: string, telemetryIdKey: string): string {
  return createHmac("sha256", Buffer.from(telemetryIdKey, "utf8"))
    .update(sessionKey(userId, sessionId), "utf8")
    .digest("hex")
    .slice(0, 16);
}
