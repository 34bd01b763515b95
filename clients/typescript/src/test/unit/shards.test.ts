/**
 * The shard routing hash against the Python reference's golden vectors
 * (tests/fixtures/protocol/shard_routing.json): every score and every choice.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { MemfleetError } from "../../errors.js";
import { DEFAULT_LIMITS } from "../../limits.js";
import {
  enqueueCall,
  PAYLOAD_TTL_MS,
  readEnqueueReply,
  readShardReply,
} from "../../protocol/enqueue.js";
import { HOLD, ShardMap, shardFor, shardScore, STAY } from "../../protocol/shards.js";
import { readFixture } from "../repo.js";

interface Case { shards: string[]; user_id: string; scores: Record<string, string>; shard: string }

const { cases } = readFixture<{ cases: Case[] }>("shard_routing.json");

test("the golden vectors: scores and shards", () => {
  assert.ok(cases.length >= 30);
  for (const c of cases) {
    for (const name of c.shards) {
      assert.equal(shardScore(name, c.user_id).toString(16).padStart(16, "0"), c.scores[name]);
    }
    assert.equal(shardFor(c.user_id, c.shards), c.shard, `${c.shards.join(" ")} ${c.user_id}`);
  }
});

test("no shard is an error", () => {
  assert.throws(() => shardFor("u1", []), RangeError);
});

test("a shard being added: home among the settled shards, target among all", () => {
  for (const c of cases.filter((k) => k.shards.length === 3)) {
    const [a, b, added] = c.shards as [string, string, string];
    const home = shardFor(c.user_id, [a, b]);
    for (const [states, mode] of [[{ pending: [added] }, STAY], [{ joining: [added] }, HOLD]] as
      const) {
      const map = new ShardMap(c.shards, "pending" in states ? states.pending : [],
        "joining" in states ? states.joining : []);
      const route = map.route(c.user_id);
      assert.equal(route.home, home);
      assert.equal(route.target, c.shard);
      assert.equal(route.moving, home !== c.shard);
      assert.equal(route.mode, route.moving ? mode : null);
      assert.deepEqual(route.shards, route.moving ? [home, c.shard] : [home]);
    }
    assert.deepEqual(new ShardMap(c.shards).route(c.user_id),
      { home: c.shard, target: c.shard, mode: null, moving: false, shards: [c.shard] });
  }
});

test("the old shard's call carries ARGV 18 to 20; a -5 reply is the move", () => {
  const input = { userId: "u1", sessionId: "s1", payload: "{}", queueName: "q",
    limits: DEFAULT_LIMITS, jobId: "memfleet-x", nowMs: 1 };
  const plain = enqueueCall(input);
  assert.equal(plain.args.length, 17);
  assert.deepEqual(enqueueCall({ ...input, mode: HOLD }).args.slice(17),
    [HOLD, "memfleet:moved:{u1}", PAYLOAD_TTL_MS]);
  assert.equal(readShardReply([-5, 0], DEFAULT_LIMITS), null);
  assert.throws(() => readEnqueueReply([-5, 0], DEFAULT_LIMITS), MemfleetError);
});
