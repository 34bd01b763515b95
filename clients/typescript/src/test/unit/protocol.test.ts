/** enqueue.lua's replies as results and errors; the Lua as the Python side sends it. */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import {
  HandoverBacklogFull,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  MemfleetError,
  SessionBytesFull,
  UserSessionsFull,
} from "../../errors.js";
import { DEFAULT_LIMITS } from "../../limits.js";
import { readEnqueueReply } from "../../protocol/enqueue.js";
import { enqueueLua, LuaScript } from "../../protocol/scripts.js";
import { codePoints, recentWindow } from "../../protocol/validation.js";
import { REPO_ROOT } from "../repo.js";

test("a taken hand-over reads as its job, backlog flag and number", () => {
  assert.deepEqual(readEnqueueReply(["memfleet-ab", 1, "1777636800123456"], DEFAULT_LIMITS),
    { jobId: "memfleet-ab", keptOlder: true, handoverId: 1777636800123456 });
  assert.deepEqual(readEnqueueReply([null, 0, "7"], DEFAULT_LIMITS),
    { jobId: null, keptOlder: false, handoverId: 7 });
});

test("each refusal is the Python client's error, nested as there", () => {
  const full = () => readEnqueueReply(-1, DEFAULT_LIMITS);
  assert.throws(full, HandoverBacklogFull);
  assert.throws(full, /the session holds 32 older message lists no job has finished yet/);
  assert.throws(() => readEnqueueReply([-2, 5000000], DEFAULT_LIMITS), (e: Error) =>
    e instanceof SessionBytesFull && e instanceof HandoverBacklogFull
    && e instanceof HandoverUnavailable && e.message.includes("5000000 bytes")
    && e.message.includes("limit of 4194304"));
  assert.throws(() => readEnqueueReply([-3, 16], DEFAULT_LIMITS), (e: Error) =>
    e instanceof UserSessionsFull && e instanceof HandoverUnavailable
    && !(e instanceof HandoverBacklogFull) && /the user has 16 sessions/.test(e.message));
  assert.throws(() => readEnqueueReply([-4, 2000000], DEFAULT_LIMITS), (e: Error) =>
    e instanceof HandoverTooLarge && e instanceof InvalidHandover && e instanceof MemfleetError
    && e.message === "the hand-over is 2000000 bytes, over the limit of 1048576");
  const unavailable = new HandoverUnavailable("x");
  assert.equal(unavailable.transient, true);
  assert.equal(new InvalidHandover("x").transient, false);
  assert.equal(new SessionBytesFull("x").name, "SessionBytesFull");
});

test("enqueue.lua is payload_messages.lua and enqueue.lua of the repository, concatenated", () => {
  // The build embeds the scripts (scripts/embed-lua.mjs): a build older than the
  // repository's Lua fails here.
  const lua = join(REPO_ROOT, "worker", "protocol", "lua");
  const text = readFileSync(join(lua, "payload_messages.lua"), "utf8")
    + readFileSync(join(lua, "enqueue.lua"), "utf8");
  const script = new LuaScript("enqueue.lua", ["payload_messages.lua"]);
  assert.equal(script.text, text);
  assert.equal(script.sha, createHash("sha1").update(text).digest("hex"));
  assert.equal(enqueueLua().sha, script.sha);
});

test("scripts are concatenated in the order given; an unknown one is refused", () => {
  const files = { "a.lua": "-- a\n", "b.lua": "return 1\n" };
  assert.equal(new LuaScript("b.lua", ["a.lua"], files).text, "-- a\nreturn 1\n");
  assert.throws(() => new LuaScript("c.lua", [], files), /no Lua script c.lua/);
  assert.throws(() => new LuaScript("toString", [], files), /no Lua script toString/);
});

test("characters are counted as Python counts them", () => {
  assert.equal(codePoints("😀é"), 2);
  assert.equal(codePoints("\ud800x"), 2);
  assert.equal(codePoints("x\udc00"), 2);
  const list = [{ role: "user", content: "😀".repeat(3) }];
  assert.deepEqual(recentWindow(list, { ...DEFAULT_LIMITS, maxHandoverBytes: 3 }), list);
  assert.equal(recentWindow("not a list", DEFAULT_LIMITS), "not a list");
});
