/** The memory tools: the definitions are worker/client/memory_tools.json as embedded,
 * the validation and search_memory's answers (its notes, and none) are what the Python
 * executor answers (tests/fixtures/tools/validation.json, search.json), and the
 * executor against a fake memory API on loopback: consent, scoping, refusals as
 * results, the chat server's mistakes thrown. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";

import {
  AccessDenied,
  MemfleetHttpClient,
  MemoryToolExecutor,
  memoryToolDefinitions,
  memoryTools,
  validateToolArguments,
  ToolArgumentsError,
} from "../../index.js";
import { REPO_ROOT } from "../repo.js";

const KEY = `mfk_${"0".repeat(12)}_${"a".repeat(64)}`;
const NOW = "2026-11-22T10:00:00+00:00";

interface Case { name: unknown; arguments: unknown; answer: Record<string, unknown> }

test("the definitions are worker/client/memory_tools.json, as the Python executor reads it", () => {
  const source = JSON.parse(readFileSync(join(REPO_ROOT, "worker", "client",
    "memory_tools.json"), "utf8")) as unknown;
  assert.deepEqual(memoryTools, source);
  assert.deepEqual(memoryToolDefinitions(), source);
  assert.deepEqual(memoryTools.map((d) => d.function.name),
    ["search_memory", "save_memory", "forget_memory", "list_memory"]);
  for (const d of memoryTools) {
    assert.equal(d.function.parameters.additionalProperties, false);
    assert.ok(!Object.keys(d.function.parameters.properties).some((k) => /user|agent/.test(k)));
  }
  assert.ok(Object.isFrozen(memoryTools[0]!.function.parameters));
});

test("the validation answers what the Python executor answers, case by case", () => {
  const cases = JSON.parse(readFileSync(join(REPO_ROOT, "tests", "fixtures", "tools",
    "validation.json"), "utf8")) as Case[];
  assert.ok(cases.length >= 40);
  for (const c of cases) {
    let answer: Record<string, unknown>;
    try {
      answer = { ok: true, arguments: validateToolArguments(c.name, c.arguments) };
    } catch (thrown) {
      assert.ok(thrown instanceof ToolArgumentsError);
      answer = { ok: false, error: thrown.code, message: thrown.message };
    }
    assert.deepEqual(answer, c.answer, `${String(c.name)} ${JSON.stringify(c.arguments).slice(0, 80)}`);
  }
});

function fact(id: number, text: string, more: Record<string, unknown> = {}): Record<string, unknown> {
  return { id, user_id: "ada", text, category: "general", importance: 5, observed_at: NOW,
    source_kind: "manual", source_session_id: null, superseded_at: null, superseded_by: null,
    created_at: NOW, scope: "profile", agent_id: null, valid_from: NOW, valid_to: null,
    expires_at: null, pinned: false, basis: "stated", confidence: 1, superseded_reason: null,
    embedding_model: "m", embedding_dim: 8, ...more };
}

interface Sent { method: string; url: string; body: string }
const state = { enabled: true, status: 0, offAtWrite: false, sent: [] as Sent[],
  searchBody: null as unknown };
const FACTS: Record<number, Record<string, unknown>> = {
  1: fact(1, "Likes tea", { category: "preference" }),
  2: fact(2, "Calls the coach Sam", { scope: "relationship", agent_id: "coach" }),
  3: fact(3, "Lived in Paris", { superseded_at: NOW }),
};
let server: Server;
let url = "";

async function bodyOf(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

before(async () => {
  server = createServer((request, response) => {
    void bodyOf(request).then((body) => {
      const method = request.method ?? "GET";
      const path = new URL(request.url ?? "/", "http://x").pathname;
      state.sent.push({ method, url: request.url ?? "", body });
      const send = (status: number, answer: unknown): void => {
        response.writeHead(status, { "content-type": "application/json" });
        response.end(JSON.stringify(answer));
      };
      if (state.status) return send(state.status, { detail: "no" });
      if (path.endsWith("/consent")) return send(200, { enabled: state.enabled, chosen: true });
      if (path.endsWith("/chain")) {
        const id = Number(path.split("/").at(-2));
        const found = FACTS[id];
        return found ? send(200, { fact_id: id, versions: [found] })
          : send(404, { detail: "no such fact" });
      }
      if (method === "DELETE") return send(200, FACTS[Number(path.split("/").at(-1))]);
      if (method === "POST" && state.offAtWrite) {
        return send(409, { detail: "the user's memory is off: nothing was stored",
          error: "MemoryOff" });
      }
      if (method === "POST") {
        const posted = JSON.parse(body) as { text: string; category: string };
        return send(201, fact(9, posted.text, { category: posted.category }));
      }
      if (path.endsWith("/search") && state.searchBody !== null) {
        return send(200, state.searchBody);
      }
      if (path.endsWith("/search")) {
        return send(200, { results: [{ fact: FACTS[1], score: 0.0327868852,
          semantic_rank: 1, lexical_rank: 1 }] });
      }
      const active = Object.values(FACTS).filter((f) => f.superseded_at === null);
      return send(200, { user_id: "ada", count: active.length, groups: [
        { category: "preference", facts: active.filter((f) => f.category === "preference") },
        { category: "general", facts: active.filter((f) => f.category === "general") }] });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((resolve) => server.close(() => resolve())));

function executor(agentId?: string): MemoryToolExecutor {
  state.sent = [];
  state.enabled = true;
  state.status = 0;
  state.offAtWrite = false;
  state.searchBody = null;
  const client = new MemfleetHttpClient({ apiUrl: url, serviceKey: KEY });
  return new MemoryToolExecutor(client, agentId === undefined ? { userId: "ada" }
    : { userId: "ada", agentId });
}

const writes = (): string[] => state.sent.map((s) => s.method)
  .filter((m) => m !== "GET");

test("a bad call is an error result and sends nothing", async () => {
  const tools = executor("coach");
  const answer = JSON.parse(await tools.run("search_memory", { query: "tea", user_id: "bob" }));
  assert.equal(answer.error, "bad_arguments");
  assert.equal(JSON.parse(await tools.run("nope", "{}")).error, "unknown_tool");
  assert.equal(JSON.parse(await tools.run("save_memory", "{oops")).error, "bad_arguments");
  assert.deepEqual(state.sent, []);
});

test("memory off: save stores nothing, search and list read nothing, and say so", async () => {
  const tools = executor("coach");
  state.enabled = false;
  for (const [name, args] of [["save_memory", { text: "Likes tea" }],
    ["search_memory", { query: "tea" }], ["list_memory", {}]] as const) {
    const answer = JSON.parse(await tools.run(name, args));
    assert.equal(answer.error, "memory_off");
    assert.match(answer.message, /Memory is off/);
  }
  assert.deepEqual(state.sent.map((s) => s.url), Array(3).fill("/users/ada/consent"));
});

test("save, search, list and forget, scoped to the user and the assistant", async () => {
  const tools = executor("coach");
  assert.deepEqual(JSON.parse(await tools.run("save_memory",
    '{"text": "Likes green tea", "category": "preference"}')),
    { ok: true, saved: { id: 9, text: "Likes green tea", category: "preference" } });
  assert.deepEqual(JSON.parse(state.sent.at(-1)!.body),
    { text: "Likes green tea", category: "preference", scope: "profile", via: "tool",
      if_memory_on: true });
  assert.deepEqual(JSON.parse(await tools.run("search_memory", { query: "tea", k: 3 })),
    { ok: true, results: [{ id: 1, text: "Likes tea", category: "preference", score: 0.032787 }] });
  assert.equal(state.sent.at(-1)!.url, "/users/ada/search?q=tea&k=3&scope=both&agent_id=coach");
  assert.deepEqual(JSON.parse(await tools.run("list_memory", { limit: 1 })),
    { ok: true, count: 2, facts: [{ id: 1, text: "Likes tea", category: "preference" }],
      truncated: true });
  assert.deepEqual(JSON.parse(await tools.run("forget_memory", { fact_id: 2 })),
    { ok: true, forgotten: { id: 2, text: "Calls the coach Sam", category: "general" } });
  assert.deepEqual(writes(), ["POST", "DELETE"]);

  const bare = executor();
  await bare.run("list_memory", null);
  assert.equal(state.sent.at(-1)!.url, "/users/ada/facts?scope=profile");
});

test("forget what the assistant cannot see is not found, and ends nothing", async () => {
  for (const [id, agent] of [[2, "tutor"], [2, undefined], [3, "coach"], [99, "coach"]] as const) {
    const tools = executor(agent);
    assert.equal(JSON.parse(await tools.run("forget_memory", { fact_id: id })).error, "not_found");
    assert.deepEqual(writes(), []);
  }
});

test("a save the API finds memory off for (its own check) is memory_off", async () => {
  const tools = executor("coach");
  state.offAtWrite = true;
  const answer = JSON.parse(await tools.run("save_memory", { text: "Likes tea" }));
  assert.equal(answer.error, "memory_off");
  assert.deepEqual(writes(), ["POST"]);
});

test("the API's refusals are results; a refused credential and a wrong client throw", async () => {
  for (const [status, code] of [[429, "rate_limited"], [503, "unavailable"],
    [422, "bad_arguments"], [409, "not_found"]] as const) {
    const tools = executor("coach");
    state.status = status;
    assert.equal(JSON.parse(await tools.run("list_memory", {})).error, code);
  }
  const tools = executor("coach");
  state.status = 403;
  await assert.rejects(tools.run("list_memory", {}), AccessDenied);
  assert.throws(() => new MemoryToolExecutor({} as MemfleetHttpClient, { userId: "ada" }),
    TypeError);
  const client = new MemfleetHttpClient({ apiUrl: url, serviceKey: KEY });
  assert.throws(() => new MemoryToolExecutor(client, { userId: " " }), /userId/);
  assert.throws(() => new MemoryToolExecutor(client, { userId: "ada", agentId: "" }), /agentId/);
});

interface SearchCase { case: string; arguments: Record<string, unknown>; api: unknown;
  answer: Record<string, unknown> }

test("search_memory answers what the Python executor answers, notes or none", async () => {
  const cases = JSON.parse(readFileSync(join(REPO_ROOT, "tests", "fixtures", "tools",
    "search.json"), "utf8")) as SearchCase[];
  assert.ok(cases.some((c) => "notes" in c.answer) && cases.some((c) => !("notes" in c.answer)));
  for (const c of cases) {
    const tools = executor();
    state.searchBody = c.api;
    // The same members in the same order (facts, then notes), the same values.
    assert.equal(await tools.run("search_memory", c.arguments), JSON.stringify(c.answer), c.case);
  }
});
