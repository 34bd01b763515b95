/**
 * HTTP mode: the memory API (docs/api.md) with a service key (`memfleet keys create`:
 * `handover` to hand over, `handover` or `read` for status, wait and events, `read`
 * to read a user's memory, `admin` to change, export or erase it) or an end user's
 * token (every route of its own user but the hand-over and the events). For a chat
 * server that cannot reach the fleet's Redis, and for tools that show users their
 * memory. Uses node's own fetch. The routes of a user's memory are in
 * http/memory_calls.ts; this class adds the hand-over and following it.
 *
 * Every request is bounded (`timeoutMs`, 2 s by default, plus the wait a long poll
 * asks for): a memory API that does not answer is a MemoryApiUnavailable (for the
 * hand-over itself a HandoverUnavailable) naming the call and the API, never a hung
 * chat turn. Refusals are read from the answer's `"error"` member and status
 * (http/answers.ts). A wait or an event stream the API has no slot for (429
 * TooManyLongPolls, 503 LongPollsFull) is asked again after its Retry-After, within
 * the wait's time or the stream's reconnects.
 */
import { DeadlinePassed, sleep } from "./deadline.js";
import { ConfigurationError, InvalidHandover, LongPollRefused, MemfleetError } from "./errors.js";
import { MemoryCalls } from "./http/memory_calls.js";
import { pauseMs } from "./http/answers.js";
import { SseParser } from "./http/sse.js";
import { type Call, HttpTransport, type UserToken } from "./http/transport.js";
import { idFault } from "./protocol/validation.js";
import type {
  CommitEvent,
  EventsQuery,
  HandoverRequest,
  HandoverResult,
  SessionRef,
  SessionStatus,
} from "./types.js";

export type { UserToken } from "./http/transport.js";

export interface HttpClientOptions {
  /** The memory API's base URL, with its scheme: http://memory.internal:8088 */
  apiUrl: string;
  /** A service key, `mfk_<12 hex digits>_<64 hex digits>` (`memfleet keys create`). */
  serviceKey?: string;
  /** Instead of a service key: an end user's token (a JWT whose `sub` is the user,
   * docs/api.md "Tokens"), or a function minting one per request. */
  userToken?: UserToken;
  /** The bound on each request, in ms, beyond any wait it asks for (2000). */
  timeoutMs?: number;
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

const SESSION = "/users/{user}/sessions/{session}";
const EVENTS: Call = { operation: "GET /events", path: "/events" };

export class MemfleetHttpClient extends MemoryCalls {
  readonly timeoutMs: number;

  constructor(options: HttpClientOptions) {
    const given = [options.serviceKey, options.userToken].filter((c) => c !== undefined);
    if (given.length !== 1) {
      throw new ConfigurationError("MemfleetHttpClient needs a serviceKey or a userToken"
        + (given.length > 1 ? ", not both" : ""));
    }
    const timeoutMs = options.timeoutMs ?? 2000;
    // The credential is kept in the transport's true private field: console.log,
    // JSON.stringify, Object.keys and spreading never show it.
    super(new HttpTransport(options.apiUrl, given[0] as UserToken, timeoutMs));
    this.timeoutMs = timeoutMs;
  }

  /** The memory API's scheme://host:port, as errors name it. */
  get origin(): string {
    return this.transport.origin;
  }

  /** End every request and event stream of this client; later calls are refused.
   * (node's fetch keeps no connection that would hold a script open.) */
  async close(): Promise<void> {
    this.transport.close();
  }

  /** POST /users/{u}/sessions/{s}/handover: the server checks, windows and enqueues. */
  async handOver(request: HandoverRequest): Promise<HandoverResult> {
    const body: Record<string, unknown> = { messages: request.messages };
    if (request.agentId !== undefined) body["agent_id"] = request.agentId;
    if (request.listedAtUs !== undefined) body["listed_at_us"] = request.listedAtUs;
    const answer = await this.transport.json("POST", { operation: `POST ${SESSION}/handover`,
      path: `${this.session(request)}/handover`, body, handover: true }) as
      { handover_id: number };
    return { handoverId: answer.handover_id, jobId: null, keptOlder: null };
  }

  /** GET /users/{u}/sessions/{s}/status */
  async status(session: SessionRef): Promise<SessionStatusWithTag> {
    const answer = await this.transport.json("GET", { operation: `GET ${SESSION}/status`,
      path: `${this.session(session)}/status` }) as { latest: number; finished: number; older_lists: number; session_tag: string | null };
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
        answer = await this.transport.json("GET", {
          operation: `GET ${SESSION}/handovers/{id}/wait`,
          path: `${this.session(session)}/handovers/${handoverId}/wait?timeout_s=${timeoutS}`,
          waitMs: timeoutS * 1000 }) as { covered: boolean };
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
    let opened = false;
    const arm = (ms: number): void => {
      clearTimeout(timer);
      timer = setTimeout(() => stop.abort(), ms);
    };
    arm(blockMs === undefined ? this.timeoutMs : blockMs + this.timeoutMs);
    try {
      for await (const event of this.subscribe({ after, signal: stop.signal, onOpen: () => {
        opened = true;
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
    // A stream that never opened (an API that accepts and never answers) is no answer,
    // not an empty stream; close() ends it quietly.
    if (!opened && !this.transport.closing.aborted) {
      throw this.transport.unavailable(EVENTS, new DeadlinePassed(this.timeoutMs));
    }
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
    // The caller's signal, or close(): either ends the stream.
    const closing = this.transport.closing;
    const signal = options.signal ? AbortSignal.any([options.signal, closing]) : closing;
    let opened = false;
    let failures = 0;
    while (!signal.aborted) {
      const headers: Record<string, string> = { ...await this.transport.authorization(),
        Accept: "text/event-stream" };
      if (lastId !== undefined) headers["Last-Event-ID"] = lastId;
      // The bound is on the answer's head only: the stream itself runs on.
      const opening = new AbortController();
      const timer = setTimeout(() => opening.abort(), this.timeoutMs);
      let response: Response;
      try {
        response = await fetch(`${this.apiUrl}/events`, {
          headers, signal: AbortSignal.any([signal, opening.signal]),
        });
      } catch (error) {
        if (signal.aborted) return;
        // A first connection that fails is the caller's to know; after a drop, a few
        // reconnects are tried (an API restarting) before giving up.
        if (!opened || ++failures > RECONNECTS) {
          throw this.transport.unavailable(EVENTS,
            opening.signal.aborted ? new DeadlinePassed(this.timeoutMs) : error);
        }
        await sleep(backoffMs(failures), signal);
        continue;
      } finally {
        clearTimeout(timer);
      }
      if (!response.ok) {
        const refusal = await this.refusal(response);
        const retry = refusal instanceof LongPollRefused || (opened && response.status === 503);
        if (signal.aborted) return;
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
        signal.addEventListener("abort", cancel, { once: true });
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
          signal.removeEventListener("abort", cancel);
          cancel();
        }
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof SyntaxError) throw error;
        // A dropped connection: resume after the last event seen.
      }
      if (signal.aborted) return;
      await sleep(200, signal);
    }
  }

  private session(session: SessionRef): string {
    // An empty or control-character id would change the path (`/users//...` is a 404):
    // refused here as the server would refuse it; the length limit is the server's.
    for (const [what, id] of [["user_id", session.userId], ["session_id", session.sessionId]]) {
      const fault = idFault(id, Number.POSITIVE_INFINITY);
      if (fault !== null) throw new InvalidHandover(`${what} ${fault}`);
    }
    return `/users/${encodeURIComponent(session.userId)}/sessions/`
      + encodeURIComponent(session.sessionId);
  }

  private async refusal(response: Response): Promise<MemfleetError> {
    let body: unknown;
    try {
      body = JSON.parse(await response.text());
    } catch {
      body = undefined;
    }
    return this.transport.refusal(EVENTS, response.status, body,
      response.headers.get("Retry-After"));
  }
}

/** The pause before reconnect number `failures` (1, 2, ...) after a network failure. */
function backoffMs(failures: number): number {
  return Math.min(200 * 2 ** failures, 5000);
}

function toEvent(id: string, data: EventData): CommitEvent {
  return { id, session: data.session, handover: Number(data.handover),
    olderLists: Number(data.older_lists), outcome: data.outcome, added: Number(data.added),
    updated: Number(data.updated), deleted: Number(data.deleted), at: Number(data.at) };
}
