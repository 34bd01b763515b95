/**
 * One request to the memory API: the credential, the bound, and the error that says
 * what failed. Every error names the call (`operation`: its method and route, e.g.
 * "PATCH /users/{user}/facts/{id}", never an id or a text) and the API
 * (`origin`: scheme://host:port, never a key or token), with the cause's own words
 * ("connect ECONNREFUSED 127.0.0.1:8088", "no answer within 2000 ms"). A call the API
 * does not answer is a MemoryApiUnavailable, or a HandoverUnavailable for the
 * hand-over itself; an answer that is not a success is the error http/answers.ts names.
 */
import { DeadlinePassed } from "../deadline.js";
import {
  ConfigurationError,
  HandoverUnavailable,
  InvalidRequest,
  MemfleetError,
  MemoryApiUnavailable,
} from "../errors.js";
import { idFault } from "../protocol/validation.js";
import { errorFor } from "./answers.js";

/** An end user's token (a JWT whose `sub` is the user), or a function that mints a
 * fresh one for each request (tokens are short-lived). */
export type UserToken = string | (() => string | Promise<string>);

/** One call: `operation` names it in errors; `path` is the real path (ids encoded). */
export interface Call {
  operation: string;
  path: string;
  body?: unknown;
  /** The hand-over route: its refusals are the hand-over's errors. */
  handover?: boolean;
  /** A long poll: this much longer than the bound. */
  waitMs?: number;
  /** More request headers (a conditional request's If-None-Match). */
  headers?: Record<string, string>;
  /** 304 Not Modified is an answer: `json` returns undefined for it. */
  conditional?: boolean;
}

/** The API's scheme://host:port, the port written even when it is the default. */
export function originOf(url: URL): string {
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return `${url.protocol}//${url.hostname}:${port}`;
}

/** `apiUrl` checked: an absolute http(s) URL without credentials, query or fragment
 * (a path prefix is kept). A ConfigurationError says what is wrong, never echoing it
 * (a URL written without its scheme may hold a password). */
export function checkedApiUrl(apiUrl: unknown): URL {
  const refuse = (why: string): never => {
    throw new ConfigurationError(`MemfleetHttpClient: apiUrl ${why}; write it as `
      + "http://host:port or https://host:port (e.g. http://memory.internal:8088)");
  };
  if (typeof apiUrl !== "string" || apiUrl.trim() === "") refuse("is missing");
  const text = (apiUrl as string).trim();
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) refuse("has no scheme (http:// or https://)");
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return refuse("is not a URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    refuse(`has the scheme ${url.protocol.slice(0, 20)}, not http: or https:`);
  }
  if (url.username || url.password) {
    refuse("holds a user name or password (the credential goes in serviceKey or userToken)");
  }
  if (url.search || url.hash) refuse("has a query or a fragment");
  return url;
}

/** The cause's own words: the innermost error's message (every one of an
 * AggregateError's: a name that resolves to several addresses), its code, or its name. */
export function causeText(error: unknown): string {
  if (error instanceof DeadlinePassed) return error.message;
  let inner: unknown = error;
  for (let depth = 0; depth < 8; depth += 1) {
    const cause = (inner as { cause?: unknown } | null)?.cause;
    if (!(inner instanceof Error) || cause === undefined || cause === inner) break;
    inner = cause;
  }
  const one = (e: unknown): string => {
    if (!(e instanceof Error)) return String(e);
    const code = (e as { code?: unknown }).code;
    return e.message || (typeof code === "string" ? code : e.name);
  };
  if (inner instanceof AggregateError && inner.errors.length > 0) {
    return [...new Set(inner.errors.map(one))].join("; ");
  }
  return one(inner);
}

export class HttpTransport {
  /** The API's base URL, without a trailing slash. */
  readonly apiUrl: string;
  /** scheme://host:port, what errors name. */
  readonly origin: string;
  readonly timeoutMs: number;
  // True private fields: console.log, JSON.stringify and spreading show neither.
  readonly #credential: UserToken;
  #closed = new AbortController();

  constructor(apiUrl: unknown, credential: UserToken, timeoutMs: number) {
    const url = checkedApiUrl(apiUrl);
    this.origin = originOf(url);
    this.apiUrl = url.href.replace(/\/+$/, "");
    this.#credential = credential;
    this.timeoutMs = timeoutMs;
  }

  /** Aborted by close(): every request and stream of this client ends. */
  get closing(): AbortSignal {
    return this.#closed.signal;
  }

  close(): void {
    this.#closed.abort();
  }

  /** The Authorization header. A token function's failure is its own error, as thrown. */
  async authorization(): Promise<Record<string, string>> {
    const credential = typeof this.#credential === "function"
      ? await this.#credential() : this.#credential;
    if (typeof credential !== "string" || !/^[\x21-\x7e]+$/.test(credential)) {
      // Never echoed: it may be most of a secret.
      throw new ConfigurationError("the service key or user token is empty or holds"
        + " characters a header cannot carry");
    }
    return { Authorization: `Bearer ${credential}` };
  }

  /** The API did not answer `call` (a network failure, or no answer within the bound). */
  unavailable(call: Pick<Call, "operation" | "handover">, error: unknown): MemfleetError {
    if (error instanceof MemfleetError) return error;
    const ErrorClass = call.handover ? HandoverUnavailable : MemoryApiUnavailable;
    const failure = new ErrorClass(`the memory API at ${this.origin} did not answer `
      + `${call.operation}: ${causeText(error)}`, { cause: error });
    return this.named(failure, call);
  }

  /** The error of an answer that is not a success. The hand-over's refusals of its
   * input and budget read word for word as in Redis mode and Python; every other one
   * names the API and the call before the API's reason. */
  refusal(call: Pick<Call, "operation" | "handover">, status: number, body: unknown,
    retryAfter: string | null): MemfleetError {
    const own = (call.handover ?? false) && [400, 413, 422, 429].includes(status);
    const prefix = own ? ""
      : `the memory API at ${this.origin} answered ${call.operation} with ${status}: `;
    return this.named(errorFor(status, body, retryAfter, call.handover ?? false, prefix), call);
  }

  /** The error of a call made after close(), or cut short by it. */
  closedError(call: Pick<Call, "operation">): MemfleetError {
    return this.named(new MemfleetError(`${call.operation} at ${this.origin}: the client `
      + "was closed"), call);
  }

  /** `call` as JSON: the answer's body, or the error that says why not. */
  async json(method: string, call: Call): Promise<unknown> {
    if (this.closing.aborted) throw this.closedError(call);
    const bound = this.timeoutMs + (call.waitMs ?? 0);
    const timeout = AbortSignal.timeout(Math.ceil(bound)); // whole ms, or node throws
    // A token function's failure is its own, thrown as it is: not the API's.
    const headers: Record<string, string> = { ...call.headers, ...await this.authorization(),
      ...(call.body === undefined ? {} : { "Content-Type": "application/json" }) };
    let response: Response;
    let text: string;
    try {
      response = await fetch(this.apiUrl + call.path, {
        method, headers,
        body: call.body === undefined ? null : JSON.stringify(call.body),
        signal: AbortSignal.any([timeout, this.closing]),
      });
      text = await response.text();
    } catch (error) {
      if (this.closing.aborted) throw this.closedError(call);
      throw this.unavailable(call, timeout.aborted ? new DeadlinePassed(bound) : error);
    }
    if (call.conditional === true && response.status === 304) return undefined;
    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!response.ok) {
      throw this.refusal(call, response.status, body, response.headers.get("Retry-After"));
    }
    if (body === undefined) {
      throw this.named(new MemoryApiUnavailable(`the memory API at ${this.origin} answered `
        + `${call.operation} with ${response.status} without JSON`), call);
    }
    return body;
  }

  private named(error: MemfleetError, call: Pick<Call, "operation">): MemfleetError {
    error.operation = call.operation;
    error.origin = this.origin;
    return error;
  }
}

/** `/users/<id>` for a user id the API could take; an InvalidRequest otherwise
 * (an empty id would change the path; the length limit is the server's). */
export function userPath(userId: string): string {
  const fault = idFault(userId, Number.POSITIVE_INFINITY);
  if (fault !== null) throw new InvalidRequest(`user_id ${fault}`);
  return `/users/${encodeURIComponent(userId)}`;
}

/** A fact's or held proposal's id: a whole number from 1. */
export function idPart(what: string, id: number): string {
  if (!Number.isSafeInteger(id) || id < 1) {
    throw new InvalidRequest(`${what} must be a whole number from 1`);
  }
  return String(id);
}
