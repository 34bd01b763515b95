/**
 * The shard routing hash of a fleet with several Redis primaries (docs/protocol.md,
 * "Shards"): each shard scores a user by the first 8 bytes, big-endian, of
 * SHA-256(UTF-8 shard name || 0x00 || UTF-8 user id); the highest score wins, a tie
 * to the name first by its UTF-8 bytes. This client does not route its calls yet
 * (one MemfleetRedisClient per shard, chosen with `shardFor`, routes a settled map;
 * while a shard is added, use the memory API); the golden vectors
 * (tests/fixtures/protocol/shard_routing.json) check the hash.
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
