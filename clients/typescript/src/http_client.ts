/**
 * HTTP mode: the same calls over the memory API (docs/api.md), with a service
 * key (`memfleet keys create`): the `handover` scope to hand over, `handover` or
 * `read` for status, wait and events, `read` for known facts and search. For a
 * chat server that cannot reach the fleet's Redis. Uses node's own fetch.
 *
 * Every request is bounded (`timeoutMs`, 2 s by default, plus the wait a long
 * poll asks for): a memory API that does not answer is a HandoverUnavailable,
 * never a hung chat turn. Refusals are the errors Redis mode raises, read from
 * the answer's `"error"` member (http/answers.ts). A wait or an event stream the
 * API has no slot for (429 TooManyLongPolls, 503 LongPollsFull) is asked again
 * after its Retry-After, within the wait's time or the stream's reconnects.
 */
import { DeadlinePassed, sleep } from "./deadline.js";
import { HandoverUnavailable, InvalidHandover, LongPollRefused, MemfleetError } from "./errors.js";
import { errorFor, pauseMs } from "./http/answers.js";
import { SseParser } from "./http/sse.js";
import { idFault } from "./protocol/validation.js";
import type {
  CommitEvent,
  EventsQuery,
  HandoverRequest,
  HandoverResult,
  SessionRef,
  SessionStatus,
} from "./types.js";

export interface HttpClientOptions {
  /** The memory API's base URL, e.g. http://memory.internal:8080 */
  apiUrl: string;
  /** A service key (`mfk_...`); a user's own token works for that user's status and wait. */
  serviceKey: string;
  /** The bound on each request, in ms, beyond any wait it asks for (2000). */
  timeoutMs?: number;
}

export type ReadScope = "none" | "profile" | "relationship" | "both" | "all";

export interface KnownFactsQuery {
  q?: string;
  scope?: ReadScope;
  agentId?: string;
}

export interface KnownFacts {
  /** The system-prompt block of the user's known facts ("" when none). */
  block: string;
  count: number;
}

export interface SearchQuery {
  q: string;
  k?: number;
  scope?: ReadScope;
  agentId?: string;
}

/** One hit of GET /users/{u}/search, as the API writes it (snake_case fields). */
export interface SearchHit {
  fact: Record<string, unknown> & { id: number; text: string };
  score: number;
  semantic_rank: number | null;
  lexical_rank: number | null;
}

export interface SessionStatusWithTag extends SessionStatus {
  /** The stand-in commit events name the session by; null when the API has no key for it. */
  sessionTag: string | null;
}

// Reconnects tried in a row after a dropped event stream, or after a stream refused
// a slot (429 TooManyLongPolls, 503 LongPollsFull), before giving up.
const RECONNECTS = 5;
// The wait route's own bound on one long poll (docs/api.md).
const MAX_WAIT_S = 30;

interface EventData {
  session: string; handover: number; older_lists: number; outcome: string;
  added: number; updated: number; deleted: number; at: number;
}

function enc(part: string): string {
  return encodeURIComponent(part);
}

export class MemfleetHttpClient {
  readonly apiUrl: string;
  readonly timeoutMs: number;
  // A true private field: `private` is only checked by tsc, and console.log,
  // JSON.stringify, Object.keys and spreading would show the key.
  readonly #serviceKey: string;

  constructor(options: HttpClientOptions) {
    if (!options.apiUrl || !options.serviceKey) {
      throw new TypeError("MemfleetHttpClient needs apiUrl and serviceKey");
    }
    this.apiUrl = options.apiUrl.replace(/\/+$/, "");
    this.#serviceKey = options.serviceKey;
    this.timeoutMs = options.timeoutMs ?? 2000;
  }

  /** POST /users/{u}/sessions/{s}/handover: the server checks, windows and enqueues. */
  async handOver(request: HandoverRequest): Promise<HandoverResult> {
    const body: Record<string, unknown> = { messages: request.messages };
    if (request.agentId !== undefined) body["agent_id"] = request.agentId;
    if (request.listedAtUs !== undefined) body["listed_at_us"] = request.listedAtUs;
    const answer = await this.request(
      "POST", `${this.session(request)}/handover`, { body, handover: true }) as
      { handover_id: number };
    return { handoverId: answer.handover_id, jobId: null, keptOlder: null };
  }

  /** GET /users/{u}/sessions/{s}/status */
  async status(session: SessionRef): Promise<SessionStatusWithTag> {
    const answer = await this.request("GET", `${this.session(session)}/status`) as
      { latest: number; finished: number; older_lists: number; session_tag: string | null };
    return { latest: answer.latest, finished: answer.finished, olderLists: answer.older_lists,
      sessionTag: answer.session_tag ?? null };
  }

  /**
   * Long polls of the wait route until a commit covers `handoverId`, or `timeoutMs`
   * passes. A wait the API has no slot for is asked again after its Retry-After;
   * when that would pass `timeoutMs`, the refusal (a LongPollRefused) is thrown.
   */
  async waitForMemory(session: SessionRef, handoverId: number, options: { timeoutMs: number }):
    Promise<boolean> {
    const deadline = performance.now() + options.timeoutMs;
    for (;;) {
      const left = (deadline - performance.now()) / 1000;
      const timeoutS = Math.min(MAX_WAIT_S, Math.max(left, 0.001));
      let answer: { covered: boolean };
      try {
        answer = await this.request("GET",
          `${this.session(session)}/handovers/${handoverId}/wait?timeout_s=${timeoutS}`,
          { waitMs: timeoutS * 1000 }) as { covered: boolean };
      } catch (error) {
        // The hand-over is kept; only the wait was refused: ask again when the API
        // says a slot is likely free, if that is still within the caller's time.
        if (!(error instanceof LongPollRefused)) throw error;
        const pause = pauseMs(error, 1000);
        if (performance.now() + pause >= deadline) throw error;
        await sleep(pause);
        continue;
      }
      if (answer.covered) return true;
      if (performance.now() >= deadline) return false;
    }
  }

  /** The session's stand-in, as the API computes it (its MEMFLEET_TELEMETRY_ID_KEY). */
  async sessionTag(session: SessionRef): Promise<string | null> {
    return (await this.status(session)).sessionTag;
  }

  /**
   * Commit events after stream id `after` over GET /events (server-sent events):
   * up to `count`, read until `blockMs` passes ("$": only new ones). Without
   * `blockMs` it reads what the stream already holds: until `count` arrive or
   * no event comes for a short while (an event stream never says "that was all").
   */
  async events(query: EventsQuery = {}): Promise<CommitEvent[]> {
    const { after = "$", count = 100, blockMs } = query;
    const found: CommitEvent[] = [];
    const quietMs = 300;
    const stop = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    // The last refusal of a slot, until a stream opens: thrown if time runs out on it.
    let refused: MemfleetError | undefined;
    const arm = (ms: number): void => {
      clearTimeout(timer);
      timer = setTimeout(() => stop.abort(), ms);
    };
    arm(blockMs === undefined ? this.timeoutMs : blockMs + this.timeoutMs);
    try {
      for await (const event of this.subscribe({ after, signal: stop.signal, onOpen: () => {
        refused = undefined;
        if (blockMs === undefined) arm(quietMs);
        else arm(blockMs);
      }, onRefused: (error) => {
        refused = error;
      } })) {
        found.push(event);
        if (found.length >= count) break;
        if (blockMs === undefined) arm(quietMs);
      }
    } catch (error) {
      if (!stop.signal.aborted) throw error;
    } finally {
      clearTimeout(timer);
    }
    if (refused !== undefined && found.length === 0) throw refused;
    return found;
  }

  /**
   * Follow the commit events as they come, resuming after a dropped connection
   * from the last event's id (`Last-Event-ID`). Ends when `signal` aborts.
   * `after`: "0" from the oldest kept, a stream id, or "$" (only new ones).
   * A stream the API has no slot for (429 TooManyLongPolls, 503 LongPollsFull: the
   * dropped stream may still hold its slot there), or once open any 503, is tried
   * again after its Retry-After like a drop (`onRefused` is told first); past the
   * reconnects in a row it allows, the refusal is thrown.
   */
  async *subscribe(options: { after?: string; signal?: AbortSignal; onOpen?: () => void;
    onRefused?: (error: MemfleetError) => void } = {}): AsyncGenerator<CommitEvent> {
    let lastId = options.after === "$" ? undefined : options.after;
    const signal = options.signal;
    let opened = false;
    let failures = 0;
    while (!signal?.aborted) {
      const headers: Record<string, string> = { ...this.auth(), Accept: "text/event-stream" };
      if (lastId !== undefined) headers["Last-Event-ID"] = lastId;
      // The bound is on the answer's head only: the stream itself runs on.
      const opening = new AbortController();
      const timer = setTimeout(() => opening.abort(new DeadlinePassed(this.timeoutMs)),
        this.timeoutMs);
      let response: Response;
      try {
        response = await fetch(`${this.apiUrl}/events`, {
          headers,
          signal: signal ? AbortSignal.any([signal, opening.signal]) : opening.signal,
        });
      } catch (error) {
        if (signal?.aborted) return;
        // A first connection that fails is the caller's to know; after a drop, a few
        // reconnects are tried (an API restarting) before giving up.
        if (!opened || ++failures > RECONNECTS) {
          throw new HandoverUnavailable(`the memory API did not answer: ${describe(error)}`,
            { cause: error });
        }
        await sleep(backoffMs(failures), signal);
        continue;
      } finally {
        clearTimeout(timer);
      }
      if (!response.ok) {
        const refusal = await this.refusal(response, false);
        const retry = refusal instanceof LongPollRefused || (opened && response.status === 503);
        if (signal?.aborted) return;
        if (!retry || ++failures > RECONNECTS) throw refusal;
        options.onRefused?.(refusal);
        await sleep(pauseMs(refusal, backoffMs(failures)), signal);
        continue;
      }
      opened = true;
      failures = 0;
      options.onOpen?.();
      const parser = new SseParser();
      const decoder = new TextDecoder();
      const body = response.body;
      if (body === null) return;
      try {
        const reader = body.getReader();
        const cancel = (): void => void reader.cancel().catch(() => undefined);
        signal?.addEventListener("abort", cancel, { once: true });
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            for (const sse of parser.push(decoder.decode(value, { stream: true }))) {
              if (sse.event !== "commit") continue;
              lastId = sse.id;
              yield toEvent(sse.id ?? "", JSON.parse(sse.data) as EventData);
            }
          }
        } finally {
          signal?.removeEventListener("abort", cancel);
          cancel();
        }
      } catch (error) {
        if (signal?.aborted) return;
        if (error instanceof SyntaxError) throw error;
        // A dropped connection: resume after the last event seen.
      }
      if (signal?.aborted) return;
      await sleep(200, signal);
    }
  }

  /** GET /users/{u}/known-facts: the system-prompt block (a key with the read scope). */
  async knownFacts(userId: string, query: KnownFactsQuery = {}): Promise<KnownFacts> {
    const params = new URLSearchParams();
    if (query.q !== undefined) params.set("q", query.q);
    if (query.scope !== undefined) params.set("scope", query.scope);
    if (query.agentId !== undefined) params.set("agent_id", query.agentId);
    const suffix = params.size > 0 ? `?${params}` : "";
    return await this.request("GET", `/users/${enc(userId)}/known-facts${suffix}`) as KnownFacts;
  }

  /** GET /users/{u}/search: facts by meaning and by words (a key with the read scope). */
  async search(userId: string, query: SearchQuery): Promise<SearchHit[]> {
    const params = new URLSearchParams({ q: query.q });
    if (query.k !== undefined) params.set("k", String(query.k));
    if (query.scope !== undefined) params.set("scope", query.scope);
    if (query.agentId !== undefined) params.set("agent_id", query.agentId);
    const answer = await this.request("GET", `/users/${enc(userId)}/search?${params}`) as
      { results: SearchHit[] };
    return answer.results;
  }

  private session(session: SessionRef): string {
    // An empty or control-character id would change the path (`/users//...` is a 404):
    // refused here as the server would refuse it; the length limit is the server's.
    for (const [what, id] of [["user_id", session.userId], ["session_id", session.sessionId]]) {
      const fault = idFault(id, Number.POSITIVE_INFINITY);
      if (fault !== null) throw new InvalidHandover(`${what} ${fault}`);
    }
    return `/users/${enc(session.userId)}/sessions/${enc(session.sessionId)}`;
  }

  private auth(): Record<string, string> {
    return { Authorization: `Bearer ${this.#serviceKey}` };
  }

  private async request(method: string, path: string,
    options: { body?: unknown; handover?: boolean; waitMs?: number } = {}): Promise<unknown> {
    const bound = this.timeoutMs + (options.waitMs ?? 0);
    let response: Response;
    let text: string;
    try {
      response = await fetch(this.apiUrl + path, {
        method,
        headers: { ...this.auth(), ...(options.body === undefined ? {}
          : { "Content-Type": "application/json" }) },
        body: options.body === undefined ? null : JSON.stringify(options.body),
        signal: AbortSignal.timeout(Math.ceil(bound)),  // a whole number of ms, or node throws
      });
      text = await response.text();
    } catch (error) {
      const reason = error instanceof DOMException && error.name === "TimeoutError"
        ? new DeadlinePassed(bound) : error;
      throw new HandoverUnavailable(`the memory API did not answer: ${describe(reason)}`,
        { cause: error });
    }
    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!response.ok) {
      throw errorFor(response.status, body, response.headers.get("Retry-After"),
        options.handover ?? false);
    }
    if (body === undefined) {
      throw new MemfleetError(`the memory API answered ${response.status} without JSON`);
    }
    return body;
  }

  private async refusal(response: Response, handover: boolean): Promise<MemfleetError> {
    let body: unknown;
    try {
      body = JSON.parse(await response.text());
    } catch {
      body = undefined;
    }
    return errorFor(response.status, body, response.headers.get("Retry-After"), handover);
  }
}

/** The pause before reconnect number `failures` (1, 2, ...) after a network failure. */
function backoffMs(failures: number): number {
  return Math.min(200 * 2 ** failures, 5000);
}

function describe(error: unknown): string {
  if (error instanceof DeadlinePassed) return "TimeoutError";
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.name} (${cause.name})` : error.name;
  }
  return "Error";
}

function toEvent(id: string, data: EventData): CommitEvent {
  return { id, session: data.session, handover: Number(data.handover),
    olderLists: Number(data.older_lists), outcome: data.outcome, added: Number(data.added),
    updated: Number(data.updated), deleted: Number(data.deleted), at: Number(data.at) };
}
