/**
 * Redis mode against a real Redis, a real worker (LLM stub, PostgreSQL) and the
 * memory API, started by tests/integration/typescript/test_node_suite.py.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { Redis } from "ioredis";

import {
  HandoverBacklogFull,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  MemfleetHttpClient,
  MemfleetRedisClient,
  SessionBytesFull,
  UserSessionsFull,
  eventCovers,
  sessionTag,
} from "../../index.js";
import { readFixture } from "../repo.js";
import { fresh, servers } from "./env.js";

const env = servers();
const fleet = new MemfleetRedisClient({ redisUrl: env.redisUrl, queueName: env.queueName,
  telemetryIdKey: env.telemetryIdKey });
// A queue no worker serves: what Redis holds stays as the hand-over left it.
const idle = fresh("ts-idle");
const still = new MemfleetRedisClient({ redisUrl: env.redisUrl, queueName: idle });
const raw = new Redis(env.redisUrl);
const reader = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.readKey,
  timeoutMs: 5000 });

after(async () => {
  await fleet.close();
  await still.close();
  raw.disconnect();
});

const user = (text: string) => ({ role: "user" as const, content: text });

test("the stored payload is byte for byte the one the Python side writes", async () => {
  const cases = readFixture<{ payloads: { input: { user_id: string; session_id: string;
    messages: unknown[] }; handed_over_at: string; payload: string }[] }>(
    "handover_cases.json");
  const golden = cases.payloads.find((c) => c.handed_over_at === "2026-05-01T12:00:00Z");
  assert.ok(golden);
  const { user_id: userId, session_id: sessionId, messages } = golden.input;
  const result = await still.handOver({ userId, sessionId, messages },
    { now: new Date(Date.parse(golden.handed_over_at)) });
  assert.match(result.jobId ?? "", /^memfleet-[0-9a-f]{32}$/);
  const stored = await raw.getBuffer(`memfleet:handover:{a%7Bb%7D%25c}:${sessionId}`);
  assert.deepEqual(stored, Buffer.from(golden.payload, "utf8"));
  const job = await raw.get(`arq:job:${result.jobId}`);
  assert.match(job ?? "", /^\{"t":null,"f":"persist_session_memory","a":\[\],"k":\{"user_id":"a\{b\}%c","session_id":"s:1"\},"et":\d+\}$/);
  assert.ok(await raw.zscore(idle, result.jobId ?? "") !== null, "queued on the queue");
  assert.ok(await raw.zscore("memfleet:jobs:{a%7Bb%7D%25c}", result.jobId ?? "") !== null,
    "listed in the user's job index, for an erase");
});

test("a worker commits a TypeScript hand-over; status, wait and events follow it", async () => {
  const who = { userId: fresh("ada"), sessionId: "1" };
  const first = await fleet.handOver({ ...who, messages: [user("I live in Oslo.")] });
  assert.ok(first.handoverId > 0 && first.jobId !== null);
  assert.equal(first.keptOlder, false);
  assert.equal((await fleet.status(who)).latest, first.handoverId);
  assert.equal(await fleet.waitForMemory(who, first.handoverId, { timeoutMs: 30_000 }), true);
  const state = await fleet.status(who);
  assert.ok(state.finished >= first.handoverId && state.olderLists === 0);
  const facts = await reader.knownFacts(who.userId);
  assert.equal(facts.count, 1, facts.block);
  assert.match(facts.block, /Lives in Oslo/);
  const tag = sessionTag(who.userId, who.sessionId, env.telemetryIdKey);
  assert.equal(fleet.sessionTag(who), tag);
  const mine = (await fleet.events({ after: "0", count: 10_000 }))
    .filter((e) => e.session === tag);
  assert.ok(mine.some((e) => eventCovers(e, first.handoverId)), JSON.stringify(mine));
  assert.match(mine[0]?.id ?? "", /^\d+-\d+$/);
  // A blocking read returns the next commit as it happens.
  const next = fleet.events({ after: mine.at(-1)?.id ?? "$", count: 1, blockMs: 20_000 });
  const second = await fleet.handOver({ ...who, messages: [user("I live in Oslo."),
    user("I use Rust.")] });
  const [event] = await next;
  assert.equal(event?.session, tag);
  assert.ok(await fleet.waitForMemory(who, second.handoverId, { timeoutMs: 30_000 }));
  assert.match((await reader.knownFacts(who.userId)).block, /Uses Rust/);
});

test("an extended list merges, a replaced one waits in the backlog, and both are committed",
  async () => {
    const who = { userId: fresh("bea"), sessionId: "7" };
    const a = await still.handOver({ ...who, messages: [user("I live in Paris.")] });
    const b = await still.handOver({ ...who, messages: [user("I live in Paris."),
      user("I use Go.")] });
    assert.equal(b.jobId, null, "the queued job reads the longer list");
    assert.equal(b.keptOlder, false);
    assert.ok(b.handoverId > a.handoverId);
    const c = await still.handOver({ ...who, messages: [user("I work at Acme.")] });
    assert.equal(c.keptOlder, true, "a replaced history keeps the unfinished list");
    assert.deepEqual(await still.status(who), { latest: c.handoverId, finished: 0,
      olderLists: 1 });

    // The same lists on the worker's queue: every fact once.
    const them = { userId: fresh("cy"), sessionId: "7" };
    await fleet.handOver({ ...them, messages: [user("I live in Paris.")] });
    await fleet.handOver({ ...them, messages: [user("I live in Paris."), user("I use Go.")] });
    const last = await fleet.handOver({ ...them, messages: [user("I work at Acme.")] });
    assert.ok(await fleet.waitForMemory(them, last.handoverId, { timeoutMs: 30_000 }));
    const block = (await reader.knownFacts(them.userId)).block;
    for (const fact of ["Lives in Paris", "Uses Go", "Works at Acme"]) {
      assert.equal(block.split(fact).length - 1, 1, `${fact} once in:\n${block}`);
    }
  });

test("refusals are the Python client's errors, and nothing is stored", async () => {
  const who = { userId: fresh("dee"), sessionId: "1" };
  await assert.rejects(still.handOver({ ...who, messages: [{ role: "bot", content: "x" }] }),
    (e: Error) => e instanceof InvalidHandover
      && e.message === "message 0: role: Input should be 'user', 'assistant', 'system' or 'tool'");
  await assert.rejects(still.handOver({ ...who, sessionId: " ", messages: [user("x")] }),
    /session_id must be a non-empty string/);
  await assert.rejects(still.handOver({ ...who, messages: [user("€".repeat(30_000))] }),
    (e: Error) => e instanceof HandoverTooLarge
      && e.message === "message 0: content is 90000 bytes, over the limit of 65536");
  assert.equal((await still.status(who)).latest, 0);

  // 32 older lists fill the backlog; the next replaced list is refused, the rest kept.
  for (let i = 0; i <= 32; i++) await still.handOver({ ...who, messages: [user(`list ${i}`)] });
  await assert.rejects(still.handOver({ ...who, messages: [user("one too many")] }),
    (e: Error) => e instanceof HandoverBacklogFull && e instanceof HandoverUnavailable);
  assert.equal((await still.status(who)).olderLists, 32);

  const small = new MemfleetRedisClient({ redisUrl: env.redisUrl, queueName: idle,
    limits: { maxHandoverBytes: 2_000, maxSessionBytes: 2_500, maxUserSessions: 2 } });
  try {
    const big = { userId: fresh("eve"), sessionId: "1" };
    await small.handOver({ ...big, messages: [user("a".repeat(1_500))] });
    await assert.rejects(small.handOver({ ...big, messages: [user("b".repeat(1_500))] }),
      (e: Error) => e instanceof SessionBytesFull && /over the limit of 2500/.test(e.message));
    const many = fresh("fay");
    await small.handOver({ userId: many, sessionId: "1", messages: [user("one")] });
    await small.handOver({ userId: many, sessionId: "2", messages: [user("two")] });
    await assert.rejects(small.handOver({ userId: many, sessionId: "3",
      messages: [user("three")] }), (e: Error) => e instanceof UserSessionsFull);
    await assert.rejects(small.handOver({ ...big, messages: [user("c".repeat(1_990))] }),
      (e: Error) => e instanceof HandoverTooLarge && /over the limit of 2000/.test(e.message));
  } finally {
    await small.close();
  }
});

test("a long session is handed over as its most recent window", async () => {
  const who = { userId: fresh("gus"), sessionId: "1" };
  const windowed = new MemfleetRedisClient({ redisUrl: env.redisUrl, queueName: idle,
    limits: { maxMessages: 3 } });
  try {
    await windowed.handOver({ ...who, messages: ["a", "b", "c", "d", "e"].map(user) });
    const stored = JSON.parse(await raw.get(`memfleet:handover:{${who.userId}}:1`) ?? "{}");
    assert.deepEqual(stored.messages, ["c", "d", "e"].map(user));
  } finally {
    await windowed.close();
  }
});

for (const [what, url, cause] of [["a closed port", env.closedUrl, /connect ECONNREFUSED/],
  ["a Redis that never answers", env.silentUrl, /no answer within 1000 ms|Command timed out/],
] as const) {
  test(`${what}: HandoverUnavailable within about a second, every call, naming the Redis`,
    async (t) => {
    // With a password in the URL: the errors name host:port, never it.
    const address = new URL(url).host;
    const down = new MemfleetRedisClient({
      redisUrl: url.replace("redis://", "redis://:pw-never-shown@") });
    const names = (call: string) => (e: Error) => {
      assert.ok(e instanceof HandoverUnavailable, `${call}: ${e.name}`);
      assert.ok(e.message.startsWith(`Redis at ${address} ${call}: `), e.message);
      assert.match(e.message, cause);
      assert.ok(!e.message.includes("pw-never-shown"), e.message);
      return true;
    };
    try {
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        await assert.rejects(down.handOver({ userId: "u", sessionId: "s",
          messages: [user("hi")] }), names("did not take the hand-over"));
        const took = performance.now() - started;
        t.diagnostic(`${what}, call ${i + 1}: ${took.toFixed(0)} ms`);
        assert.ok(took < 1_300, `${what}: ${took.toFixed(0)} ms`);
        await assert.rejects(down.status({ userId: "u", sessionId: "s" }),
          names("did not answer"));
      }
    } finally {
      await down.close();
    }
  });
}

test("the Redis clock is in microseconds and numbers the hand-overs", async () => {
  const before = await fleet.redisClock();
  assert.ok(Math.abs(before / 1000 - Date.now()) < 60_000);
  const who = { userId: fresh("hal"), sessionId: "1" };
  const result = await still.handOver({ ...who, messages: [user("hi there")],
    listedAtUs: before });
  assert.ok(result.handoverId >= before);
});
