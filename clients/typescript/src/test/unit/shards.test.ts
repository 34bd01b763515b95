/**
 * The shard routing hash against the Python reference's golden vectors
 * (tests/fixtures/protocol/shard_routing.json): every score and every choice.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { shardFor, shardScore } from "../../protocol/shards.js";
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
