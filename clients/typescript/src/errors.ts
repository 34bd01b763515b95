/**
 * The errors a chat server catches, named and nested as the Python client's
 * (worker/errors.py; tests/unit/typescript/test_error_tree.py holds them equal), so one
 * `catch` reads the same in both languages:
 *
 *   MemfleetError
 *   ├── InvalidHandover            bad ids or messages: fix the call, do not retry
 *   │   └── HandoverTooLarge       a message or the hand-over over its byte budget
 *   ├── HandoverUnavailable        Redis (or the memory API's hand-over route) did not take it in time
 *   │   ├── HandoverBacklogFull    the session holds 32 unfinished older lists
 *   │   │   └── SessionBytesFull   the session's lists would pass the byte budget
 *   │   └── UserSessionsFull       the user has too many unfinished sessions
 *   ├── MemoryApiError             HTTP only: the memory API refused a call, or did not answer
 *   │   ├── AccessDenied           the key or token is missing, wrong, lacks the scope, or
 *   │   │                          is another user's (401, 403)
 *   │   ├── NotFound               no such fact or held proposal for the user (404)
 *   │   ├── WriteConflict          the fact or proposal changed since it was read (409):
 *   │   │   │                      nothing written; read it again
 *   │   │   └── MemoryOff          an add asked with ifMemoryOn found the user's memory
 *   │   │                          off (409): nothing stored
 *   │   ├── InvalidRequest         the API refused a request's input (400, 413, 422)
 *   │   ├── RateLimited            the user's manual writes, erases or exports are over
 *   │   │                          their rate (429, retryAfterS)
 *   │   ├── MemoryApiUnavailable   no answer to a call other than the hand-over, or a 5xx
 *   │   │                          (its store or model away)
 *   │   └── LongPollRefused        a wait or an event stream refused for now
 *   │       ├── TooManyLongPolls   the caller (key or user) holds its share of them (429)
 *   │       └── LongPollsFull      the API process holds its fill of them (503)
 *   └── ConfigurationError         settings that cannot work (a shard map, an API URL
 *                                  without http:// or https://): fix them first
 *
 * Every error with `transient` true (HandoverUnavailable, MemoryApiUnavailable,
 * LongPollRefused, RateLimited) may succeed if the same call is made again later;
 * `retryAfterS` says when, when the API said. A HandoverUnavailable means nothing
 * was stored: hand the session over again later. A LongPollRefused lost nothing:
 * the hand-over is kept, only following it was refused; wait or subscribe again
 * after `retryAfterS` (waitForMemory and subscribe do so themselves while they may).
 *
 * HTTP mode's errors name what failed: `operation` (e.g. "GET /users/{user}/facts", the
 * route, never an id or a text) and `origin` (scheme://host:port of the API, never a
 * key or token), both in the message too, with the cause's own words (e.g.
 * "connect ECONNREFUSED 127.0.0.1:8088"). The hand-over's refusals of its input and
 * budget read word for word as in Redis mode and in Python.
 */

export class MemfleetError extends Error {
  /** Trying the same call again later can succeed without anyone acting. */
  readonly transient: boolean = false;
  /** HTTP mode: the answer's status code, when there was an answer. */
  status?: number;
  /** HTTP mode: the answer's Retry-After, in seconds, when it had one. */
  retryAfterS?: number;
  /** HTTP mode: the call, as its method and route ("PATCH /users/{user}/facts/{id}"). */
  operation?: string;
  /** HTTP mode: the memory API's scheme://host:port. */
  origin?: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class InvalidHandover extends MemfleetError {}

export class HandoverTooLarge extends InvalidHandover {
  /** The size in bytes and the limit, when known (over HTTP only the message says). */
  readonly size?: number;
  readonly limit?: number;

  constructor(message: string, figures?: { size: number; limit: number }) {
    super(message);
    if (figures) {
      this.size = figures.size;
      this.limit = figures.limit;
    }
  }

  /** The Python client's wording: "<what> is <size> bytes, over the limit of <limit>". */
  static of(what: string, size: number, limit: number): HandoverTooLarge {
    return new HandoverTooLarge(`${what} is ${size} bytes, over the limit of ${limit}`,
      { size, limit });
  }
}

export class HandoverUnavailable extends MemfleetError {
  override readonly transient: boolean = true;
}

export class HandoverBacklogFull extends HandoverUnavailable {}

export class SessionBytesFull extends HandoverBacklogFull {}

export class UserSessionsFull extends HandoverUnavailable {}

/** The memory API refused a call, or answered what the client cannot read, or did not
 * answer: the root of HTTP mode's own errors (the hand-over's are the classes above). */
export class MemoryApiError extends MemfleetError {}

/** A long-lived request (GET .../wait, GET /events) the memory API has no slot for
 * now (docs/api.md, "Long-lived requests"). Not a HandoverUnavailable: the
 * hand-over itself was kept, so it must not be sent again. */
export class LongPollRefused extends MemoryApiError {
  override readonly transient: boolean = true;
}

export class TooManyLongPolls extends LongPollRefused {}

export class LongPollsFull extends LongPollRefused {}

/** The memory API did not answer a call other than the hand-over within its bound,
 * or answered it with a 5xx (PostgreSQL, Redis or the embeddings away). Not a
 * HandoverUnavailable: no hand-over was involved. */
export class MemoryApiUnavailable extends MemoryApiError {
  override readonly transient: boolean = true;
}

/** 429 on a user's manual writes, erases or exports (docs/api.md, "Bounds one user
 * meets"): `retryAfterS` says when one goes. */
export class RateLimited extends MemoryApiError {
  override readonly transient: boolean = true;
}

export class AccessDenied extends MemoryApiError {}

export class NotFound extends MemoryApiError {}

export class WriteConflict extends MemoryApiError {}

/** 409 with error MemoryOff: an add asked only while the user's memory is on
 * (`ifMemoryOn`, as the memory tools ask) found it off. Nothing was stored. */
export class MemoryOff extends WriteConflict {}

export class InvalidRequest extends MemoryApiError {}

export class ConfigurationError extends MemfleetError {}

/** Every error class by its name, for the memory API's `"error"` member. */
export const ERROR_CLASSES = {
  InvalidHandover,
  HandoverTooLarge,
  HandoverUnavailable,
  HandoverBacklogFull,
  SessionBytesFull,
  UserSessionsFull,
  TooManyLongPolls,
  LongPollsFull,
  MemoryOff,
} as const;

export type ErrorKind = keyof typeof ERROR_CLASSES;
