/**
 * HTTP mode against a memory API whose long-lived requests are capped small: one
 * wait and one event stream at once, per service key and in all (started by
 * tests/integration/typescript/test_node_caps.py). A refused wait or stream is
 * asked again after its Retry-After; one that gets no slot in its time says so.
 * The refusals are the API's own; a relay cuts the stream's connection for real.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";

import {
  HandoverUnavailable,
  MemfleetError,
  MemfleetHttpClient,
  sessionTag,
} from "../../index.js";
import type { CommitEvent } from "../../index.js";
import { fresh, servers } from "../integration/env.js";
import { cutter } from "./cutter.js";

const env = servers();
const api = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.serviceKey,
  timeoutMs: 5000 });
const readOnly = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.readKey,
  timeoutMs: 5000 });
const user = (text: string) => ({ role: "user" as const, content: text });

// Every answer the client gets, in order: which requests were refused, which not.
const answers: { url: string; status: number }[] = [];
const plainFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const response = await plainFetch(input, init);
  answers.push({ url: String(input), status: response.status });
  return response;
};

/** A wait on a hand-over no commit covers: it holds the key's one wait slot ~`ms`. */
function holdAWait(ms: number): Promise<boolean> {
  return api.waitForMemory({ userId: fresh("holder"), sessionId: "1" }, 2 ** 52,
    { timeoutMs: ms });
}

function refusedAs(name: string, status: number) {
  return (error: MemfleetError): boolean => {
    assert.equal(error.name, name);
    assert.equal(error.status, status);
    assert.equal(error.retryAfterS, 5);
    assert.ok(error.transient);
    // Not "hand the session over again": the hand-over is kept, only the wait refused.
    assert.ok(!(error instanceof HandoverUnavailable), `${error.name} is a HandoverUnavailable`);
    return true;
  };
}

test("a wait refused for the key's share is asked again after Retry-After and answered", async () => {
  const holder = holdAWait(2_000);
  await delay(500); // its request in and admitted (loopback)
  const who = { userId: fresh("lea"), sessionId: "1" };
  const result = await api.handOver({ ...who, messages: [user("I live in Oslo.")] });
  const started = performance.now();
  assert.equal(await api.waitForMemory(who, result.handoverId, { timeoutMs: 30_000 }), true);
  const took = performance.now() - started;
  assert.equal(await holder, false);
  const mine = answers.filter((a) => a.url.includes(who.userId) && a.url.includes("/wait"));
  assert.deepEqual(mine.map((a) => a.status), [429, 200]);
  assert.ok(took >= 5_000, `asked again after ${took.toFixed(0)} ms, before Retry-After`);
});

test("a wait that gets no slot within its time throws the refusal, not a full backlog",
  async () => {
    const holder = holdAWait(4_000);
    await delay(500);
    const who = { userId: fresh("max"), sessionId: "1" };
    const started = performance.now();
    // The key's share taken: 429 TooManyLongPolls; Retry-After (5 s) is past the 2 s.
    await assert.rejects(api.waitForMemory(who, 1, { timeoutMs: 2_000 }),
      refusedAs("TooManyLongPolls", 429));
    // Another key, the process's one wait taken: 503 LongPollsFull.
    await assert.rejects(readOnly.waitForMemory(who, 1, { timeoutMs: 2_000 }),
      refusedAs("LongPollsFull", 503));
    assert.ok(performance.now() - started < 1_500, "thrown at once, not after the time");
    assert.equal(await holder, false);
  });

test("events() that gets no stream within its time throws the refusal", async () => {
  const stop = new AbortController();
  let opened = false;
  const holding = (async () => {
    for await (const _ of api.subscribe({ signal: stop.signal, onOpen: () => { opened = true; } })) {
      // only its slot matters
    }
  })();
  try {
    while (!opened) await delay(20);
    const quick = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.serviceKey,
      timeoutMs: 1000 });
    const started = performance.now();
    await assert.rejects(quick.events({ after: "0" }), refusedAs("TooManyLongPolls", 429));
    assert.ok(performance.now() - started < 2_000, "within its bound");
  } finally {
    stop.abort();
    await holding;
  }
});

test("a subscription whose reconnect is refused once keeps going", async () => {
  const relay = await cutter(new URL(env.apiUrl));
  const viaRelay = new MemfleetHttpClient({ apiUrl: relay.url, serviceKey: env.serviceKey,
    timeoutMs: 5000 });
  const who = { userId: fresh("nor"), sessionId: "1" };
  const tag = sessionTag(who.userId, who.sessionId, env.telemetryIdKey);
  const stop = new AbortController();
  const guard = setTimeout(() => stop.abort(), 45_000);
  let opens = 0;
  const seen: CommitEvent[] = [];
  let failure: unknown;
  const following = (async () => {
    for await (const event of viaRelay.subscribe({ signal: stop.signal,
      onOpen: () => { opens += 1; } })) {
      if (event.session !== tag) continue;
      seen.push(event);
      stop.abort();
    }
  })().catch((error: unknown) => { failure = error; });
  const until = async (done: () => boolean, what: string): Promise<void> => {
    const by = performance.now() + 20_000;
    while (!done()) {
      if (failure !== undefined) throw failure;
      assert.ok(performance.now() < by, `no ${what} within 20 s`);
      await delay(50);
    }
  };
  try {
    await until(() => opens === 1, "stream");
    const before = answers.length;
    // The client's side drops now; the API learns 1.5 s later, its slot held until
    // then: the reconnect 200 ms on finds the key's one stream taken.
    relay.cut(1_500);
    await until(() => opens === 2, "second stream");
    const result = await api.handOver({ ...who, messages: [user("I live in Lima.")] });
    await until(() => seen.length > 0, "event of the session");
    await following;
    assert.ok((seen[0]?.handover ?? 0) >= result.handoverId);
    const reopened = answers.slice(before).filter((a) => a.url.endsWith("/events"));
    assert.deepEqual(reopened.map((a) => a.status), [429, 200]);
  } finally {
    clearTimeout(guard);
    stop.abort();
    await following;
    await relay.close();
  }
});
