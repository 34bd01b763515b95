/**
 * The client against what the Python reference writes (tests/fixtures/protocol/,
 * regenerated and checked by tests/unit/protocol/test_typescript_fixtures.py):
 * the same refusals with the same reasons, the same windows, the payload and the
 * job byte for byte, enqueue.lua's KEYS and ARGV, the session tags.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import type { Limits } from "../../limits.js";
import { enqueueCall } from "../../protocol/enqueue.js";
import { isoUtc, jobJson } from "../../protocol/payload.js";
import { prepareHandover } from "../../protocol/prepare.js";
import { sessionTag } from "../../protocol/session_tag.js";
import type { HandoverRequest } from "../../types.js";
import { readFixture } from "../repo.js";

interface Input {
  session_id: unknown; user_id: unknown; messages: unknown; agent_id?: unknown;
  listed_at_us?: number; trace?: Record<string, string>; handed_over_at?: string;
}

interface Cases {
  invalid: { input: Input; limits: Limits; error: string; reason: string }[];
  payloads: { input: Input; limits: Limits; handed_over_at: string; payload: string }[];
  times: { ms: number; iso: string }[];
  enqueue: { user_id: string; session_id: string; queue: string; limits: Limits;
    payload: string; now_ms: number; job_id: string; keys: string[]; args: string[] }[];
  jobs: { user_id: string; session_id: string; et: number; json: string }[];
  session_tags: { user_id: string; session_id: string; key: string; tag: string }[];
}

const cases = readFixture<Cases>("handover_cases.json");

function request(input: Input): HandoverRequest {
  const out: Record<string, unknown> = {
    userId: input.user_id, sessionId: input.session_id, messages: input.messages,
  };
  if (input.agent_id !== undefined) out["agentId"] = input.agent_id;
  if (input.listed_at_us !== undefined) out["listedAtUs"] = input.listed_at_us;
  return out as unknown as HandoverRequest;
}

test("every hand-over Python refuses is refused with the same error and reason", () => {
  assert.ok(cases.invalid.length >= 40);
  for (const { input, limits, error, reason } of cases.invalid) {
    assert.throws(
      () => prepareHandover(request(input), limits,
        { handedOverAt: "2026-05-01T12:00:00.123456Z", trace: input.trace ?? {} }),
      (thrown: Error) => {
        assert.equal(thrown.name, error, JSON.stringify(input));
        assert.equal(thrown.message, reason, JSON.stringify(input));
        return true;
      });
  }
});

test("the payload is Python's byte for byte, windows included", () => {
  for (const { input, limits, handed_over_at, payload } of cases.payloads) {
    const prepared = prepareHandover(request(input), limits,
      { handedOverAt: handed_over_at, trace: input.trace ?? {} });
    assert.equal(prepared.payload, payload);
    assert.deepEqual(Buffer.from(prepared.payload, "utf8"), Buffer.from(payload, "utf8"));
  }
});

test("a time is written as pydantic writes a UTC datetime", () => {
  for (const { ms, iso } of cases.times) assert.equal(isoUtc(new Date(ms)), iso);
});

test("enqueue.lua gets the KEYS and ARGV worker/protocol/queue.py passes", () => {
  for (const call of cases.enqueue) {
    const ours = enqueueCall({
      userId: call.user_id, sessionId: call.session_id, payload: call.payload,
      queueName: call.queue, limits: call.limits, jobId: call.job_id, nowMs: call.now_ms,
    });
    assert.deepEqual(ours.keys, call.keys);
    assert.deepEqual(ours.args.map(String), call.args);
  }
});

test("the ARQ job is Python's JSON", () => {
  for (const job of cases.jobs) {
    assert.equal(jobJson(job.user_id, job.session_id, job.et), job.json);
  }
});

test("the session tag is Python's HMAC", () => {
  for (const { user_id, session_id, key, tag } of cases.session_tags) {
    assert.equal(sessionTag(user_id, session_id, key), tag);
  }
});
