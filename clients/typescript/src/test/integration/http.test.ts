/**
 * HTTP mode against the memory API (with a real worker behind it), started by
 * tests/integration/typescript/test_node_suite.py.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AccessDenied,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  MemfleetHttpClient,
  MemfleetRedisClient,
  sessionTag,
} from "../../index.js";
import { fresh, servers } from "./env.js";

const env = servers();
const api = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.serviceKey,
  timeoutMs: 5000 });
const readOnly = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.readKey,
  timeoutMs: 5000 });
const user = (text: string) => ({ role: "user" as const, content: text });

test("a hand-over over HTTP is committed; known facts and search read it back", async () => {
  const who = { userId: fresh("ida"), sessionId: "1" };
  const result = await api.handOver({ ...who, messages: [user("I live in Berlin.")],
    agentId: "luna" });
  assert.ok(result.handoverId > 0);
  assert.equal(result.jobId, null);
  // Waited for through Redis here: the HTTP wait has a test of its own below.
  const redis = new MemfleetRedisClient({ redisUrl: env.redisUrl, queueName: env.queueName });
  try {
    assert.ok(await redis.waitForMemory(who, result.handoverId, { timeoutMs: 30_000 }));
  } finally {
    await redis.close();
  }
  const facts = await readOnly.knownFacts(who.userId, { agentId: "luna", q: "where" });
  assert.equal(facts.count, 1);
  assert.match(facts.block, /Lives in Berlin/);
  assert.equal((await readOnly.knownFacts(who.userId, { scope: "none" })).count, 0);
  const hits = await readOnly.search(who.userId, { q: "Berlin", k: 3 });
  assert.equal(hits.length, 1);
  assert.equal(hits[0]?.fact.text, "Lives in Berlin");
});

test("status, wait and events over HTTP follow a hand-over", async () => {
  const who = { userId: fresh("ivy"), sessionId: "1" };
  const result = await api.handOver({ ...who, messages: [user("I live in Rome.")] });
  const status = await api.status(who);
  assert.equal(status.latest, result.handoverId);
  const tag = sessionTag(who.userId, who.sessionId, env.telemetryIdKey);
  assert.equal(status.sessionTag, tag);
  assert.equal(await api.sessionTag(who), tag);
  assert.equal(await api.waitForMemory(who, result.handoverId, { timeoutMs: 30_000 }), true);
  const after = await api.status(who);
  assert.ok(after.finished >= result.handoverId && after.olderLists === 0);
  assert.match((await api.knownFacts(who.userId)).block, /Lives in Rome/);
  const events = await api.events({ after: "0", count: 10_000 });
  const mine = events.filter((e) => e.session === tag);
  assert.ok(mine.some((e) => e.handover >= result.handoverId && e.olderLists === 0),
    `no event of the session among ${events.length}`);
  // Resuming after the last event: the next commit, and only it.
  const last = events.at(-1)?.id ?? "0";
  const next = api.events({ after: last, count: 1, blockMs: 20_000 });
  const again = await api.handOver({ ...who, messages: [user("I live in Rome."),
    user("I use Rust.")] });
  const [event] = await next;
  assert.equal(event?.session, tag);
  assert.ok((event?.handover ?? 0) >= again.handoverId);
  assert.ok((event?.id ?? "") > last || (event?.id ?? "").length > last.length);
});

test("the wait route answers false when the time passes first", async () => {
  const who = { userId: fresh("jo"), sessionId: "1" };
  const started = performance.now();
  assert.equal(await api.waitForMemory(who, 2 ** 52, { timeoutMs: 300 }), false);
  assert.ok(performance.now() - started < 3_000);
});

test("refusals over HTTP are the same typed errors", async () => {
  const who = { userId: fresh("kai"), sessionId: "1" };
  await assert.rejects(api.handOver({ ...who, messages: [{ role: "bot", content: "x" }] }),
    (e: InvalidHandover) => e instanceof InvalidHandover && e.status === 400
      && e.message === "message 0: role: Input should be 'user', 'assistant', 'system' or 'tool'");
  await assert.rejects(api.handOver({ ...who, messages: [user("€".repeat(30_000))] }),
    (e: HandoverTooLarge) => e instanceof HandoverTooLarge && e.status === 413);
  await assert.rejects(api.handOver({ ...who, messages: "not a list" as unknown as [] }),
    (e: InvalidHandover) => e instanceof InvalidHandover && e.status === 422);
  await assert.rejects(readOnly.handOver({ ...who, messages: [user("hi")] }),
    (e: AccessDenied) => e instanceof AccessDenied && e.status === 403);
  const stranger = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: "mfk_nope" });
  await assert.rejects(stranger.handOver({ ...who, messages: [user("hi")] }),
    (e: AccessDenied) => e instanceof AccessDenied && e.status === 401);
});

test("an API that is not there is HandoverUnavailable within the bound", async (t) => {
  const gone = new MemfleetHttpClient({ apiUrl: env.closedUrl.replace("redis:", "http:"),
    serviceKey: env.serviceKey, timeoutMs: 1000 });
  const silent = new MemfleetHttpClient({ apiUrl: env.silentUrl.replace("redis:", "http:"),
    serviceKey: env.serviceKey, timeoutMs: 1000 });
  for (const client of [gone, silent]) {
    const started = performance.now();
    await assert.rejects(client.handOver({ userId: "u", sessionId: "s",
      messages: [user("hi")] }), HandoverUnavailable);
    const took = performance.now() - started;
    t.diagnostic(`${client === gone ? "closed port" : "silent port"}: ${took.toFixed(0)} ms`);
    assert.ok(took < 1_500);
  }
});
