/**
 * Redis mode: the hand-over protocol spoken directly (docs/protocol.md), as the
 * Python client (worker/client/handover.py) speaks it. For a chat server that
 * can reach the fleet's Redis; one that can only reach the memory API uses
 * MemfleetHttpClient.
 *
 * Every call is bounded (`timeoutMs`, 1 s by default): a Redis that is down or
 * does not answer is a HandoverUnavailable within the bound, never a hung chat
 * turn. The client made from a URL connects with that timeout, times each
 * command out after it and keeps no command waiting through reconnects; a
 * client passed in keeps its own settings, and the bound still holds.
 */
import { randomUUID } from "node:crypto";

import { Redis, type RedisOptions } from "ioredis";

import { sleep, withDeadline } from "./deadline.js";
import { type Limits, limitsWith } from "./limits.js";
import { enqueueCall, readEnqueueReply } from "./protocol/enqueue.js";
import { parseCommitEvent } from "./protocol/events.js";
import { backlogKey, DEFAULT_QUEUE, eventsKey, metaKey } from "./protocol/keys.js";
import { isoUtc } from "./protocol/payload.js";
import { prepareHandover } from "./protocol/prepare.js";
import { enqueueLua } from "./protocol/scripts.js";
import { sessionTag } from "./protocol/session_tag.js";
import { redisUnavailable, watchErrors } from "./redis_errors.js";
import {
  type CommitEvent,
  covers,
  type EventsQuery,
  type HandoverRequest,
  type HandoverResult,
  type SessionRef,
  type SessionStatus,
} from "./types.js";

export interface RedisClientOptions {
  /** The fleet's Redis (MEMFLEET_REDIS_URL), when `redis` is not given. */
  redisUrl?: string;
  /** The chat server's own ioredis client, used as it is. */
  redis?: Redis;
  /** MEMFLEET_QUEUE_NAME of the fleet. */
  queueName?: string;
  /** The fleet's MEMFLEET_MAX_* settings, when not the defaults. */
  limits?: Partial<Limits>;
  /** MEMFLEET_TELEMETRY_ID_KEY, for `sessionTag` (events name sessions by it). */
  telemetryIdKey?: string | null;
  /** The bound on each call, in ms (1000). */
  timeoutMs?: number;
}

export interface WaitOptions {
  timeoutMs: number;
}

/** W3C trace context to carry in the payload, when the caller has one. */
export interface HandoverOptions {
  trace?: { traceparent: string; tracestate?: string };
  /** The hand-over's time, for tests; now by default. */
  now?: Date;
}

/** ioredis settings that keep every call within `timeoutMs`. */
export function boundedOptions(timeoutMs: number): RedisOptions {
  return {
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    // A command waits for a connection at most its own timeout, and is not
    // sent again after a reconnect: the caller decides whether to hand over again.
    maxRetriesPerRequest: 0,
    retryStrategy: (times: number) => Math.min(50 * 2 ** times, 2000),
    lazyConnect: true,
  };
}

export class MemfleetRedisClient {
  readonly queueName: string;
  readonly limits: Limits;
  readonly timeoutMs: number;
  // True private fields: the connections' options hold the Redis password and the
  // telemetry id key is a secret; console.log or JSON.stringify of the client shows neither.
  readonly #redis: Redis;
  readonly #owned: boolean;
  readonly #telemetryIdKey: string | null;
  // XREAD BLOCK holds its connection: never the one hand-overs go through.
  #blocking: Redis | undefined;

  constructor(options: RedisClientOptions) {
    this.queueName = options.queueName ?? DEFAULT_QUEUE;
    this.limits = limitsWith(options.limits);
    this.timeoutMs = options.timeoutMs ?? 1000;
    this.#telemetryIdKey = options.telemetryIdKey || null;
    if (options.redis !== undefined) {
      this.#redis = options.redis;
      this.#owned = false;
    } else if (options.redisUrl !== undefined) {
      this.#redis = new Redis(options.redisUrl, boundedOptions(this.timeoutMs));
      watchErrors(this.#redis); // each call reports its own failure, naming the cause
      this.#owned = true;
    } else {
      throw new TypeError("MemfleetRedisClient needs redisUrl or redis");
    }
  }

  /**
   * Hand a session's messages over: check them, cut a long session to its most
   * recent window that fits, store the payload and queue a job, all in one
   * enqueue.lua call. InvalidHandover / HandoverTooLarge for bad input (nothing
   * sent); HandoverBacklogFull, SessionBytesFull, UserSessionsFull when Redis
   * refuses it (nothing stored: hand it over again later); HandoverUnavailable
   * when Redis does not take it within the bound.
   */
  async handOver(request: HandoverRequest, options: HandoverOptions = {}):
    Promise<HandoverResult> {
    const limits = this.limits;
    const { userId, sessionId, payload } = prepareHandover(request, limits, {
      handedOverAt: isoUtc(options.now ?? new Date()), trace: options.trace ?? {},
    });
    const call = enqueueCall({
      userId, sessionId, payload, queueName: this.queueName, limits,
      jobId: `memfleet-${randomUUID().replaceAll("-", "")}`, nowMs: Date.now(),
    });
    let reply: unknown;
    try {
      reply = await withDeadline(this.connected().then(
        () => enqueueLua().call(this.#redis, call.keys, call.args)), this.timeoutMs);
    } catch (error) {
      throw redisUnavailable(error, this.#redis, "did not take the hand-over");
    }
    return readEnqueueReply(reply, limits);
  }

  /** Where the session's memory stands, in one round trip. */
  async status(session: SessionRef): Promise<SessionStatus> {
    const { userId, sessionId } = session;
    try {
      const answer = await withDeadline(this.connected().then(() => this.#redis.pipeline()
        .hmget(metaKey(userId, sessionId), "q", "d")
        .llen(backlogKey(userId, sessionId))
        .exec()), this.timeoutMs);
      const [[metaError, meta], [lenError, older]] = answer as [[Error | null, unknown],
        [Error | null, unknown]];
      if (metaError || lenError) throw metaError ?? lenError;
      const [latest, finished] = meta as (string | null)[];
      return { latest: Number(latest ?? 0), finished: Number(finished ?? 0),
        olderLists: Number(older) };
    } catch (error) {
      throw redisUnavailable(error, this.#redis, "did not answer");
    }
  }

  /**
   * Wait until a commit has covered hand-over `handoverId` (or a later one of
   * the session): true, or false when `timeoutMs` passes first. Polls every
   * 50 ms, doubling up to 500 ms, as the Python client does.
   */
  async waitForMemory(session: SessionRef, handoverId: number, options: WaitOptions):
    Promise<boolean> {
    const deadline = performance.now() + options.timeoutMs;
    let delay = 50;
    for (;;) {
      if (covers(await this.status(session), handoverId)) return true;
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await sleep(Math.min(delay, left));
      delay = Math.min(delay * 2, 500); // a slow job need not be polled 20 times a second
    }
  }

  /** Commit events after stream id `after` ("0": the oldest kept; "$": only new ones,
   * which needs `blockMs`), oldest first. Pass the last event's `id` to read on. */
  async events(query: EventsQuery = {}): Promise<CommitEvent[]> {
    const { after = "$", count = 100, blockMs } = query;
    const key = eventsKey(this.queueName);
    try {
      let answer: unknown;
      if (blockMs === undefined) {
        answer = await withDeadline(this.connected().then(
          () => this.#redis.xread("COUNT", count, "STREAMS", key, after)), this.timeoutMs);
      } else {
        const blocking = this.blockingConnection();
        answer = await withDeadline(blocking.connect().catch(() => undefined).then(
          () => blocking.xread("COUNT", count, "BLOCK", blockMs, "STREAMS", key, after)),
        blockMs + this.timeoutMs).catch((error: unknown) => {
          this.dropBlocking(); // a read that outlived its bound must not be reused
          throw error;
        });
      }
      const streams = (answer ?? []) as [string, [string, string[]][]][];
      return streams.flatMap(([, entries]) => entries.map(
        ([id, fields]) => parseCommitEvent(id, fields)));
    } catch (error) {
      throw redisUnavailable(error, this.#redis, "did not answer");
    }
  }

  /** The stand-in events name the session by; null without MEMFLEET_TELEMETRY_ID_KEY. */
  sessionTag(session: SessionRef): string | null {
    return this.#telemetryIdKey === null ? null
      : sessionTag(session.userId, session.sessionId, this.#telemetryIdKey);
  }

  /** The Redis clock in us: what hand-overs are numbered from, for `listedAtUs`. */
  async redisClock(): Promise<number> {
    try {
      const [seconds, micros] = await withDeadline(
        this.connected().then(() => this.#redis.time()), this.timeoutMs);
      return Number(seconds) * 1_000_000 + Number(micros);
    } catch (error) {
      throw redisUnavailable(error, this.#redis, "did not answer");
    }
  }

  /** Close the connections this client opened (not a client passed in). */
  async close(): Promise<void> {
    this.dropBlocking();
    if (this.#owned) this.#redis.disconnect();
  }

  private async connected(): Promise<void> {
    // lazyConnect: the first call connects, within its own bound; later calls
    // find the connection up, or ioredis reconnecting, and fail fast.
    if (this.#redis.status === "wait") await this.#redis.connect();
  }

  private blockingConnection(): Redis {
    if (this.#blocking === undefined) {
      this.#blocking = this.#redis.duplicate({
        ...boundedOptions(this.timeoutMs), commandTimeout: undefined,
      });
      watchErrors(this.#blocking);
    }
    return this.#blocking;
  }

  private dropBlocking(): void {
    this.#blocking?.disconnect();
    this.#blocking = undefined;
  }
}
