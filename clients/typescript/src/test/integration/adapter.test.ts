/**
 * The conformance adapter as the suite runs it: a process reading JSON lines,
 * against the real Redis and API of tests/integration/typescript/test_node_suite.py.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

import { fresh, servers } from "./env.js";

const env = servers();
const ADAPTER = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "conformance",
  "adapter.js");

async function converse(requests: object[]): Promise<Record<string, unknown>[]> {
  const child = spawn(process.execPath, [ADAPTER], { stdio: ["pipe", "pipe", "inherit"] });
  const replies: Record<string, unknown>[] = [];
  const lines = createInterface({ input: child.stdout });
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  for (const request of requests) child.stdin.write(`${JSON.stringify(request)}\n`);
  for await (const line of lines) replies.push(JSON.parse(line) as Record<string, unknown>);
  assert.equal(await exited, 0);
  return replies;
}

const limits = { max_message_chars: 32000, max_messages: 20000, max_id_chars: 256,
  max_message_bytes: 65536, max_handover_bytes: 1048576, max_session_bytes: 4194304,
  max_user_sessions: 16 };

for (const transport of ["redis", "http"] as const) {
  test(`the adapter over ${transport}: one reply a request, in order, then exit 0`, async () => {
    const userId = fresh("lou");
    const replies = await converse([
      { id: 1, op: "configure", transport, redis_url: env.redisUrl, queue_name: env.queueName,
        telemetry_id_key: env.telemetryIdKey, limits, api_url: env.apiUrl,
        service_key: env.serviceKey },
      { id: 2, op: "handover", user_id: userId, session_id: "1",
        messages: [{ role: "user", content: "I live in Oslo." }] },
      { id: 3, op: "handover", user_id: userId, session_id: "1", messages: [] as unknown[],
        agent_id: "" },
      { id: 4, op: "handover", user_id: userId, session_id: "1",
        messages: [{ role: "user", content: "€".repeat(30000) }] },
      { id: 5, op: "nonsense" },
      { id: 6, op: "shutdown" },
    ]);
    assert.deepEqual(replies.map((r) => r["id"]), [1, 2, 3, 4, 5, 6]);
    const taken = replies[1] as { ok: boolean; result: Record<string, unknown> };
    assert.equal(taken.ok, true, JSON.stringify(taken));
    assert.ok(Number(taken.result["handover_id"]) > 0);
    if (transport === "redis") assert.match(String(taken.result["job_id"]), /^memfleet-/);
    else assert.equal(taken.result["job_id"], null);
    const kinds = replies.slice(2, 5).map((r) => (r["error"] as { kind: string }).kind);
    assert.deepEqual(kinds, ["InvalidHandover", "HandoverTooLarge", "BadRequest"]);
  });
}
