/**
 * The errors a chat server catches, named and nested as the Python client's
 * (worker/errors.py), so one `catch` reads the same in both languages:
 *
 *   MemfleetError
 *   ├── InvalidHandover            bad ids or messages: fix the call, do not retry
 *   │   └── HandoverTooLarge       a message or the hand-over over its byte budget
 *   ├── HandoverUnavailable        Redis (or the memory API) did not take it in time
 *   │   ├── HandoverBacklogFull    the session holds 32 unfinished older lists
 *   │   │   └── SessionBytesFull   the session's lists would pass the byte budget
 *   │   └── UserSessionsFull       the user has too many unfinished sessions
 *   ├── LongPollRefused            HTTP only: a wait or an event stream refused for now
 *   │   ├── TooManyLongPolls       the caller (key or user) holds its share of them (429)
 *   │   └── LongPollsFull          the API process holds its fill of them (503)
 *   ├── AccessDenied               HTTP only: the key is missing, wrong or lacks the scope
 *   └── ConfigurationError         settings that cannot work (a shard map): fix them first
 *
 * Every HandoverUnavailable is transient: hand the session over again later.
 * A LongPollRefused is transient too, but nothing was lost: the hand-over is
 * kept, only following it was refused; wait or subscribe again after
 * `retryAfterS` (waitForMemory and subscribe do so themselves while they may).
 */

export class MemfleetError extends Error {
  /** Trying the same call again later can succeed without anyone acting. */
  readonly transient: boolean = false;
  /** HTTP mode: the answer's status code, when there was an answer. */
  status?: number;
  /** HTTP mode: the answer's Retry-After, in seconds, when it had one. */
  retryAfterS?: number;

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

/** A long-lived request (GET .../wait, GET /events) the memory API has no slot for
 * now (docs/api.md, "Long-lived requests"). Not a HandoverUnavailable: the
 * hand-over itself was kept, so it must not be sent again. */
export class LongPollRefused extends MemfleetError {
  override readonly transient: boolean = true;
}

export class TooManyLongPolls extends LongPollRefused {}

export class LongPollsFull extends LongPollRefused {}

export class AccessDenied extends MemfleetError {}

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
} as const;

export type ErrorKind = keyof typeof ERROR_CLASSES;
