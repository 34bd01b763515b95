/**
 * Redis mode's HandoverUnavailable says which Redis and why: its host:port (never the
 * URL, which may hold a password) and the cause's own words. ioredis fails a command
 * on a connection that is down with words that name nothing ("Connection is closed.",
 * "Reached the max retries per request limit"): the connection's own last error
 * ("connect ECONNREFUSED 127.0.0.1:6390", "getaddrinfo ENOTFOUND redis") says it, so
 * the connections this package opens keep it (watchErrors) until they are up again.
 */
import type { Redis } from "ioredis";

import { DeadlinePassed } from "./deadline.js";
import { HandoverUnavailable, MemfleetError } from "./errors.js";

const lastErrors = new WeakMap<Redis, Error>();

// ioredis's words for a command refused because the connection is not up.
const NOT_CONNECTED = /^(Connection is closed|Reached the max retries per request limit|Stream isn't writeable)/;

/** For a connection this package opened: its errors are kept for the next failed call
 * to name (and never thrown as an unhandled 'error' event: each call reports its own). */
export function watchErrors(redis: Redis): void {
  redis.on("error", (error: unknown) => {
    if (error instanceof Error) lastErrors.set(redis, error);
  });
  redis.on("ready", () => lastErrors.delete(redis));
}

/** host:port (or the socket's path) of a connection, never its password. */
export function redisAddress(redis: Redis): string {
  const options = redis.options;
  if (options.path) return options.path;
  return `${options.host ?? "localhost"}:${options.port ?? 6379}`;
}

function words(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return error.message || (typeof code === "string" ? code : error.name);
}

/** The HandoverUnavailable of a call on `redis` that failed with `error` (a
 * MemfleetError, e.g. a refusal of the script, goes through as it is). `what`:
 * "did not take the hand-over", "did not answer". */
export function redisUnavailable(error: unknown, redis: Redis, what: string,
  name = "Redis"): MemfleetError {
  if (error instanceof MemfleetError) return error;
  const last = lastErrors.get(redis);
  let reason = words(error);
  if (error instanceof DeadlinePassed) {
    reason = last === undefined ? error.message : `${error.message} (${words(last)})`;
  } else if (NOT_CONNECTED.test(reason) && last !== undefined) {
    reason = words(last);
  }
  return new HandoverUnavailable(`${name} at ${redisAddress(redis)} ${what}: ${reason}`,
    { cause: error });
}
