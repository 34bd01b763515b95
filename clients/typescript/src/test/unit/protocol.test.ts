/** enqueue.lua's replies as results and errors; the Lua as the Python side sends it. */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
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
import { LuaScript, luaDir } from "../../protocol/scripts.js";
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
  const lua = join(REPO_ROOT, "worker", "protocol", "lua");
  assert.equal(luaDir(), lua);
  const text = readFileSync(join(lua, "payload_messages.lua"), "utf8")
    + readFileSync(join(lua, "enqueue.lua"), "utf8");
  const script = new LuaScript("enqueue.lua", ["payload_messages.lua"]);
  assert.equal(script.text, text);
  assert.equal(script.sha, createHash("sha1").update(text).digest("hex"));
});

test("a packed copy of the scripts is read from the folder given", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "memfleet-lua-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));  // nothing left in /tmp
  writeFileSync(join(dir, "a.lua"), "-- a\n");
  writeFileSync(join(dir, "b.lua"), "return 1\n");
  assert.equal(new LuaScript("b.lua", ["a.lua"], dir).text, "-- a\nreturn 1\n");
});

test("characters are counted as Python counts them", () => {
  assert.equal(codePoints("😀é"), 2);
  assert.equal(codePoints("\ud800x"), 2);
  assert.equal(codePoints("x\udc00"), 2);
  const list = [{ role: "user", content: "😀".repeat(3) }];
  assert.deepEqual(recentWindow(list, { ...DEFAULT_LIMITS, maxHandoverBytes: 3 }), list);
  assert.equal(recentWindow("not a list", DEFAULT_LIMITS), "not a list");
});
