/**
 * The shard routing hash of a fleet with several Redis primaries (docs/protocol.md,
 * "Shards"): each shard scores a user by the first 8 bytes, big-endian, of
 * SHA-256(UTF-8 shard name || 0x00 || UTF-8 user id); the highest score wins, a tie
 * to the name first by its UTF-8 bytes; the golden vectors
 * (tests/fixtures/protocol/shard_routing.json) check the hash. `ShardMap` is
 * worker/protocol/shards.py's: a user's home among the settled shards, its target
 * among all, and how the home shard's enqueue.lua treats a mover while a shard is
 * added (`stay` while it is pending, `hold` while it is joining).
 */
import { createHash } from "node:crypto";

export function shardScore(shard: string, userId: string): bigint {
  const digest = createHash("sha256")
    .update(Buffer.concat([Buffer.from(shard, "utf8"), Buffer.from([0]), Buffer.from(userId, "utf8")]))
    .digest();
  return digest.readBigUInt64BE(0);
}

export function shardFor(userId: string, shards: readonly string[]): string {
  let best: string | undefined;
  let bestScore = -1n;
  for (const name of shards) {
    const score = shardScore(name, userId);
    if (score > bestScore || (score === bestScore && best !== undefined
        && Buffer.compare(Buffer.from(name, "utf8"), Buffer.from(best, "utf8")) < 0)) {
      best = name;
      bestScore = score;
    }
  }
  if (best === undefined) throw new RangeError("no shard to route to");
  return best;
}

// How a moving user's hand-over treats the old shard (worker/protocol/lua/enqueue.lua).
/** The new shard is pending: the old shard takes it unless the user is marked moved. */
export const STAY = "stay";
/** The new shard is joining: the old shard takes it while the user has unfinished lists there. */
export const HOLD = "hold";
export type ShardMode = typeof STAY | typeof HOLD;

/** Where a user's hand-over goes: `home` among the settled shards, `target` among all;
 * `mode` is null when they agree. */
export interface Route {
  home: string;
  target: string;
  mode: ShardMode | null;
  /** Home and target differ: the user moves to a shard being added. */
  moving: boolean;
  /** Where the user's lists may be: the home shard, and the new one while moving. */
  shards: readonly string[];
}

/** The shards in order, and the one being added (pending or joining), if any. */
export class ShardMap {
  readonly names: readonly string[];
  readonly pending: ReadonlySet<string>;
  readonly joining: ReadonlySet<string>;

  constructor(names: Iterable<string>, pending: Iterable<string> = [],
    joining: Iterable<string> = []) {
    this.names = [...names];
    this.pending = new Set(pending);
    this.joining = new Set(joining);
  }

  get settled(): string[] {
    return this.names.filter((n) => !this.pending.has(n) && !this.joining.has(n));
  }

  route(userId: string): Route {
    const home = shardFor(userId, this.settled);
    const target = shardFor(userId, this.names);
    if (home === target) return { home, target, mode: null, moving: false, shards: [home] };
    return { home, target, mode: this.joining.has(target) ? HOLD : STAY, moving: true,
      shards: [home, target] };
  }
}
