/**
 * Redis mode for a fleet with several Redis primaries (docs/protocol.md, "Shards"):
 * one connection per shard and the shard map, every call routed by the user as
 * worker/protocol/shards.py's ShardedRedis and worker/client/handover.py route
 * them. With one shard it behaves exactly as a MemfleetRedisClient on it.
 *
 * While a shard is added, a moving user's hand-over goes first to the home shard's
 * enqueue.lua with the shard mode (`stay` while the new shard is pending, `hold`
 * while it is joining); on its `{-5, 0}` the target shard takes it. Status and
 * read-your-writes read every shard the user's lists may be on.
 */
import { randomUUID } from "node:crypto";

import { Redis } from "ioredis";

import { sleep, withDeadline } from "./deadline.js";
import { ConfigurationError, MemfleetError } from "./errors.js";
import { type Limits, limitsWith } from "./limits.js";
import { enqueueCall, readShardReply } from "./protocol/enqueue.js";
import { DEFAULT_QUEUE } from "./protocol/keys.js";
import { isoUtc } from "./protocol/payload.js";
import { prepareHandover } from "./protocol/prepare.js";
import { enqueueLua } from "./protocol/scripts.js";
import { type Route, ShardMap } from "./protocol/shards.js";
import {
  boundedOptions,
  type HandoverOptions,
  MemfleetRedisClient,
  type WaitOptions,
} from "./redis_client.js";
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

/** A shard: its Redis URL, or the chat server's own ioredis client (used as it is). */
export type ShardTarget = string | Redis;

export interface ShardedRedisClientOptions {
  /** The shard map (MEMFLEET_REDIS_SHARDS) in its order: name to URL or client. Pairs
   * keep the order of names an object would sort (a name of digits alone). */
  shards: Record<string, ShardTarget> | readonly (readonly [string, ShardTarget])[];
  /** MEMFLEET_REDIS_SHARDS_PENDING: a shard being added that users do not move to yet. */
  pending?: Iterable<string>;
  /** MEMFLEET_REDIS_SHARDS_JOINING: a shard being added that users move to. */
  joining?: Iterable<string>;
  queueName?: string;
  limits?: Partial<Limits>;
  telemetryIdKey?: string | null;
  /** The bound on each call, in ms (1000). */
  timeoutMs?: number;
}

/** The events of one shard's stream: each shard has its own stream ids. */
export interface ShardEventsQuery extends EventsQuery {
  shard: string;
}

export class MemfleetShardedRedisClient {
  readonly map: ShardMap;
  readonly queueName: string;
  readonly limits: Limits;
  readonly timeoutMs: number;
  // True private fields: the connections' options hold the shards' passwords.
  readonly #redis = new Map<string, Redis>();
  readonly #clients = new Map<string, MemfleetRedisClient>();
  readonly #owned: Redis[] = [];

  constructor(options: ShardedRedisClientOptions) {
    const entries: (readonly [string, ShardTarget])[] = Array.isArray(options.shards)
      ? [...options.shards] : Object.entries(options.shards);
    if (entries.length === 0) {
      throw new ConfigurationError("a sharded Redis needs at least one shard");
    }
    this.map = new ShardMap(entries.map(([name]) => name), options.pending ?? [],
      options.joining ?? []);
    const known = new Set(this.map.names);
    const unknown = [...this.map.pending, ...this.map.joining].some((n) => !known.has(n));
    if (unknown || this.map.settled.length === 0 || known.size !== entries.length) {
      throw new ConfigurationError("pending and joining shards must be among the shards, "
        + "and at least one shard settled");
    }
    this.queueName = options.queueName ?? DEFAULT_QUEUE;
    this.limits = limitsWith(options.limits);
    this.timeoutMs = options.timeoutMs ?? 1000;
    for (const [name, target] of entries) {
      let redis: Redis;
      if (typeof target === "string") {
        redis = new Redis(target, boundedOptions(this.timeoutMs));
        watchErrors(redis); // each call reports its own failure, naming the cause
        this.#owned.push(redis);
      } else {
        redis = target;
      }
      this.#redis.set(name, redis);
      this.#clients.set(name, new MemfleetRedisClient({
        redis, queueName: this.queueName, limits: options.limits,
        telemetryIdKey: options.telemetryIdKey ?? null, timeoutMs: this.timeoutMs }));
    }
  }

  /** The shards' names, in the map's order. */
  get names(): readonly string[] {
    return this.map.names;
  }

  route(userId: string): Route {
    return this.map.route(userId);
  }

  /** The single-Redis client of shard `name` (for its clock or its events). */
  client(name: string): MemfleetRedisClient {
    const client = this.#clients.get(name);
    if (client === undefined) {
      throw new RangeError(`no shard ${JSON.stringify(name)}; the shards: ${this.names.join(", ")}`);
    }
    return client;
  }

  /** The client of the user's home shard (where a settled user's keys are). */
  forUser(userId: string): MemfleetRedisClient {
    return this.client(this.route(userId).home);
  }

  /** The clients of every shard that may hold the user's lists (two while moving). */
  forUserEverywhere(userId: string): MemfleetRedisClient[] {
    return this.route(userId).shards.map((name) => this.client(name));
  }

  /**
   * Hand a session's messages over on its user's shard, as MemfleetRedisClient's
   * `handOver` does on one Redis, with the same errors. While the user moves to a
   * shard being added, the old shard's script decides; then the new one takes it.
   */
  async handOver(request: HandoverRequest, options: HandoverOptions = {}):
    Promise<HandoverResult> {
    const limits = this.limits;
    const { userId, sessionId, payload } = prepareHandover(request, limits, {
      handedOverAt: isoUtc(options.now ?? new Date()), trace: options.trace ?? {},
    });
    const route = this.route(userId);
    let shard = route.moving ? route.home : route.target; // the one asked now, for errors
    const enqueue = async (name: string, mode: Route["mode"]): Promise<unknown> => {
      shard = name;
      const redis = this.#redis.get(name) as Redis;
      if (redis.status === "wait") await redis.connect();
      const call = enqueueCall({
        userId, sessionId, payload, queueName: this.queueName, limits, mode,
        jobId: `memfleet-${randomUUID().replaceAll("-", "")}`, nowMs: Date.now(),
      });
      return enqueueLua().call(redis, call.keys, call.args);
    };
    // One bound over both calls, as the Python client's timeout scope.
    const routed = async (): Promise<HandoverResult> => {
      if (route.moving) {
        const held = readShardReply(await enqueue(route.home, route.mode), limits);
        if (held !== null) return held;
      }
      const taken = readShardReply(await enqueue(route.target, null), limits);
      if (taken === null) {
        throw new MemfleetError("the hand-over script refused a hand-over with no shard mode");
      }
      return taken;
    };
    try {
      return await withDeadline(routed(), this.timeoutMs);
    } catch (error) {
      throw redisUnavailable(error, this.#redis.get(shard) as Redis,
        "did not take the hand-over", `Redis shard ${shard}`);
    }
  }

  /** Where the session's memory stands. While its user moves: the state of the shard
   * with the later hand-over, and the older lists of both. */
  async status(session: SessionRef): Promise<SessionStatus> {
    const states = await this.states(session);
    let latest = states[0] as SessionStatus;
    for (const state of states) if (state.latest > latest.latest) latest = state;
    return { latest: latest.latest, finished: latest.finished,
      olderLists: states.reduce((sum, state) => sum + state.olderLists, 0) };
  }

  /**
   * Wait until a commit has covered hand-over `handoverId` (or a later one of the
   * session): true, or false when `timeoutMs` passes first. A hand-over's number is
   * its own shard's: it is covered when any shard the user may be on says so.
   */
  async waitForMemory(session: SessionRef, handoverId: number, options: WaitOptions):
    Promise<boolean> {
    const deadline = performance.now() + options.timeoutMs;
    let delay = 50;
    for (;;) {
      if ((await this.states(session)).some((state) => covers(state, handoverId))) return true;
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await sleep(Math.min(delay, left));
      delay = Math.min(delay * 2, 500); // a slow job need not be polled 20 times a second
    }
  }

  /** Commit events of shard `query.shard` (each shard has its own stream and ids: a
   * reader keeps a position per shard). */
  async events(query: ShardEventsQuery): Promise<CommitEvent[]> {
    const { shard, ...rest } = query;
    if (!this.#clients.has(shard)) {
      throw new RangeError("events on a sharded client needs shard, one of "
        + this.names.join(", "));
    }
    return this.client(shard).events(rest);
  }

  /** The stand-in events name the session by; null without MEMFLEET_TELEMETRY_ID_KEY. */
  sessionTag(session: SessionRef): string | null {
    return this.client(this.names[0] as string).sessionTag(session);
  }

  /** The clock of the user's home shard, in us, for `listedAtUs` (shards' clocks agree). */
  async redisClock(userId: string): Promise<number> {
    return this.forUser(userId).redisClock();
  }

  /** Close the connections this client opened (not the clients passed in). */
  async close(): Promise<void> {
    for (const client of this.#clients.values()) await client.close();
    for (const redis of this.#owned) redis.disconnect();
  }

  private async states(session: SessionRef): Promise<SessionStatus[]> {
    return Promise.all(this.forUserEverywhere(session.userId)
      .map((client) => client.status(session)));
  }
}
