/**
 * MemfleetShardedRedisClient against two real Redis servers and a real worker serving
 * both, started by tests/integration/typescript/test_node_shards.py, which then checks
 * with the Python side (ShardMap, ShardedRedis, memory_status, PostgreSQL) what these
 * tests wrote to MEMFLEET_TEST_SHARD_REPORT.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { after, test } from "node:test";

import { Redis } from "ioredis";

import {
  ConfigurationError,
  HandoverUnavailable,
  MemfleetShardedRedisClient,
  shardFor,
  type HandoverResult,
} from "../../index.js";
import { metaKey, userMovedKey } from "../../protocol/keys.js";

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through pytest`);
  return value;
}

const shards = need("MEMFLEET_TEST_SHARDS").split(" ").map((entry) => {
  const at = entry.indexOf("=");
  return [entry.slice(0, at), entry.slice(at + 1)] as const;
});
const names = shards.map(([name]) => name);
const [A, B] = names as [string, string];
const served = need("MEMFLEET_TEST_QUEUE");
const idle = `ts-idle-${process.pid}`; // no worker serves it: lists stay unfinished
const raw = new Map(shards.map(([name, url]) => [name, new Redis(url)]));
const report: { user: string; session: string; handoverId: number; shard: string;
  pending: string[]; joining: string[]; fact?: string }[] = [];
const clients: MemfleetShardedRedisClient[] = [];

function client(queueName: string, states: { pending?: string[]; joining?: string[] } = {}):
  MemfleetShardedRedisClient {
  const made = new MemfleetShardedRedisClient({ shards, queueName, timeoutMs: 5000, ...states });
  clients.push(made);
  return made;
}

after(async () => {
  writeFileSync(need("MEMFLEET_TEST_SHARD_REPORT"), JSON.stringify(report));
  for (const made of clients) await made.close();
  for (const redis of raw.values()) redis.disconnect();
});

const user = (text: string) => ({ role: "user" as const, content: text });
const run = `${process.pid}-${Math.random().toString(36).slice(2, 8)}`;

/** The shards that hold the session's meta (a hand-over's number), in the map's order. */
async function holders(userId: string, sessionId: string): Promise<string[]> {
  const found: string[] = [];
  for (const [name, redis] of raw) {
    if (await redis.exists(metaKey(userId, sessionId))) found.push(name);
  }
  return found;
}

/** Users the shard being added (B) takes from A, and users that stay on A. */
function users(prefix: string, count: number, moving: boolean): string[] {
  const found: string[] = [];
  for (let i = 0; found.length < count; i++) {
    const id = `${prefix}-${run}-${i}`;
    if ((shardFor(id, [A, B]) === B) === moving) found.push(id);
  }
  return found;
}

function record(userId: string, result: HandoverResult, shard: string,
  states: { pending?: string[]; joining?: string[]; fact?: string } = {}): void {
  report.push({ user: userId, session: "s1", handoverId: result.handoverId, shard,
    pending: states.pending ?? [], joining: states.joining ?? [],
    ...(states.fact === undefined ? {} : { fact: states.fact }) });
}

test("a settled map: each user's hand-over lands on its owner; a worker commits them", async () => {
  const fleet = client(served);
  const tools = ["Zig", "Go", "Rust", "Lua", "Perl", "Ruby", "Elm", "Nim"];
  const handed: [string, HandoverResult][] = [];
  for (let i = 0; i < 24; i++) {
    const userId = `spread-${run}-${i}`;
    const fact = `Uses ${tools[i % tools.length] as string}`;
    const result = await fleet.handOver({ userId, sessionId: "s1",
      messages: [user(`I use ${tools[i % tools.length] as string}.`)] });
    const shard = shardFor(userId, names);
    assert.deepEqual(fleet.route(userId), { home: shard, target: shard, mode: null,
      moving: false, shards: [shard] });
    assert.deepEqual(await holders(userId, "s1"), [shard], userId);
    record(userId, result, shard, { fact });
    handed.push([userId, result]);
  }
  const used = new Set(report.map((r) => r.shard));
  assert.equal(used.size, 2, "both shards took hand-overs");
  for (const [userId, result] of handed) {
    const session = { userId, sessionId: "s1" };
    assert.equal(await fleet.waitForMemory(session, result.handoverId, { timeoutMs: 60_000 }),
      true, userId);
    const state = await fleet.status(session);
    assert.ok(state.finished >= result.handoverId && state.olderLists === 0);
  }
});

test("pending: a moving user stays on the old shard until marked moved", async () => {
  const states = { pending: [B] };
  const fleet = client(idle, states);
  const [mover, stayer] = [users("pend", 1, true)[0], users("pend-stay", 1, false)[0]] as
    [string, string];
  assert.deepEqual(fleet.route(mover), { home: A, target: B, mode: "stay", moving: true,
    shards: [A, B] });
  const first = await fleet.handOver({ userId: mover, sessionId: "s1", messages: [user("a")] });
  assert.deepEqual(await holders(mover, "s1"), [A]);
  record(mover, first, A, states);
  const kept = await fleet.handOver({ userId: stayer, sessionId: "s1", messages: [user("a")] });
  assert.deepEqual(await holders(stayer, "s1"), [A]);
  record(stayer, kept, A, states);
  // A joining process marked a second mover moved: `stay` refuses, the new shard takes it.
  const marked = users("pend-marked", 1, true)[0] as string;
  await raw.get(A)?.set(userMovedKey(marked), "1");
  const moved = await fleet.handOver({ userId: marked, sessionId: "s1", messages: [user("a")] });
  assert.deepEqual(await holders(marked, "s1"), [B]);
  record(marked, moved, B, states);
  assert.deepEqual(await fleet.status({ userId: marked, sessionId: "s1" }),
    { latest: moved.handoverId, finished: 0, olderLists: 0 });
});

test("joining: the old shard holds a user with unfinished lists, moves an idle one", async () => {
  const pending = client(idle, { pending: [B] });
  const states = { joining: [B] };
  const fleet = client(idle, states);
  const [busy, quiet] = users("join", 2, true) as [string, string];
  assert.equal(fleet.route(busy).mode, "hold");
  await pending.handOver({ userId: busy, sessionId: "s1", messages: [user("a")] });
  // Unfinished lists on A: held there, this session and another one of the user.
  const held = await fleet.handOver({ userId: busy, sessionId: "s1",
    messages: [user("a"), user("b")] });
  const other = await fleet.handOver({ userId: busy, sessionId: "s2", messages: [user("x")] });
  assert.deepEqual(await holders(busy, "s1"), [A]);
  assert.deepEqual(await holders(busy, "s2"), [A]);
  assert.equal(await raw.get(A)?.exists(userMovedKey(busy)), 0);
  assert.ok(other.handoverId > 0);
  record(busy, held, A, states);
  // Nothing unfinished on A: the old shard marks the user moved (-5), B takes it.
  const moved = await fleet.handOver({ userId: quiet, sessionId: "s1", messages: [user("a")] });
  assert.deepEqual(await holders(quiet, "s1"), [B]);
  assert.equal(await raw.get(A)?.exists(userMovedKey(quiet)), 1);
  record(quiet, moved, B, states);
});

test("joining: a user moves once a worker has finished its lists on the old shard", async () => {
  const states = { joining: [B] };
  const pending = client(served, { pending: [B] });
  const fleet = client(served, states);
  const mover = users("then", 1, true)[0] as string;
  const session = { userId: mover, sessionId: "s1" };
  const first = await pending.handOver({ ...session, messages: [user("I use Zig.")] });
  assert.deepEqual(await holders(mover, "s1"), [A]);
  assert.equal(await fleet.waitForMemory(session, first.handoverId, { timeoutMs: 60_000 }), true);
  const second = await fleet.handOver({ ...session,
    messages: [user("I use Zig."), user("I use Go.")] });
  assert.deepEqual(await holders(mover, "s1"), [A, B]); // A keeps the finished list's meta
  assert.equal(await raw.get(A)?.exists(userMovedKey(mover)), 1);
  record(mover, second, B, states);
  assert.equal((await fleet.status(session)).latest, second.handoverId);
  assert.equal(await fleet.waitForMemory(session, second.handoverId, { timeoutMs: 60_000 }), true);
});

test("a map that cannot work is a ConfigurationError; events need a shard", async () => {
  assert.throws(() => new MemfleetShardedRedisClient({ shards: {} }), ConfigurationError);
  assert.throws(() => new MemfleetShardedRedisClient({ shards, pending: ["zz"] }),
    ConfigurationError);
  assert.throws(() => new MemfleetShardedRedisClient({ shards, joining: names }),
    ConfigurationError);
  const fleet = client(served);
  await assert.rejects(fleet.events({ shard: "zz" }), RangeError);
  const events = await fleet.events({ shard: A, after: "0", count: 10 });
  assert.ok(Array.isArray(events));
});

test("a shard that is down fails its users' calls within the bound, not the others'", async () => {
  const closed = need("MEMFLEET_TEST_CLOSED_REDIS_URL");
  const fleet = new MemfleetShardedRedisClient({ shards: [[A, shards[0]?.[1] as string],
    [B, closed]], queueName: idle, timeoutMs: 1000 });
  clients.push(fleet);
  const [onA] = users("down-a", 1, false) as [string];
  const [onB] = users("down-b", 1, true) as [string];
  const fine = await fleet.handOver({ userId: onA, sessionId: "s1", messages: [user("a")] });
  assert.ok(fine.handoverId > 0);
  const started = performance.now();
  // The errors name the shard's host:port and the cause.
  const where = new URL(closed).host;
  await assert.rejects(fleet.handOver({ userId: onB, sessionId: "s1", messages: [user("a")] }),
    (error: unknown) => error instanceof HandoverUnavailable && error.message
      === `Redis shard ${B} at ${where} did not take the hand-over: connect ECONNREFUSED ${where}`);
  await assert.rejects(fleet.status({ userId: onB, sessionId: "s1" }),
    (error: unknown) => error instanceof HandoverUnavailable
      && error.message === `Redis at ${where} did not answer: connect ECONNREFUSED ${where}`);
  assert.ok(performance.now() - started < 2500, "within the bound");
  // A moving user's status reads both shards: the one down fails it.
  const moving = new MemfleetShardedRedisClient({ shards: [[A, shards[0]?.[1] as string],
    [B, closed]], queueName: idle, pending: [B] });
  clients.push(moving);
  await moving.handOver({ userId: onB, sessionId: "s1", messages: [user("a")] }); // stays on A
  await assert.rejects(moving.status({ userId: onB, sessionId: "s1" }), HandoverUnavailable);
});
