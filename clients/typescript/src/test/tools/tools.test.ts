/** The memory tools end to end through the TypeScript executor: the LLM stub, scripted,
 * answers tool calls over the OpenAI wire (POST /v1/chat/completions), the executor
 * runs them against the real memory API on real PostgreSQL, and their results go back
 * to the model. Save, list, search, forget (superseded: the chain shows it); another
 * user's and another assistant's facts out of reach; memory off stores nothing.
 * Run by tests/integration/typescript/test_node_tools.py. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { MemfleetHttpClient, MemoryToolExecutor } from "../../index.js";
import { fresh, servers } from "../integration/env.js";

const env = servers();
const admin = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.adminKey,
  timeoutMs: 30_000 });

interface ToolCall { id: string; type: string; function: { name: string; arguments: string } }
interface ChatMessage { role: string; content: string | null; tool_calls?: ToolCall[];
  tool_call_id?: string }
type Call = [string, unknown];

async function post(path: string, body: unknown): Promise<unknown> {
  const response = await fetch(env.stubUrl + path, { method: "POST",
    headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  assert.equal(response.status, 200, await response.clone().text());
  return await response.json();
}

/** One user turn: the model (scripted: these calls, then `reply`) and the loop of
 * docs/tools.md; the tool results the model got back, parsed. */
async function turn(tools: MemoryToolExecutor, said: string, calls: Call[], reply: string):
  Promise<Record<string, any>[]> {
  await post("/_stub/script", [
    { content: null, tool_calls: calls.map(([name, args]) => ({ name, arguments: args })) },
    { content: reply }]);
  const messages: ChatMessage[] = [{ role: "user", content: said }];
  const results: Record<string, any>[] = [];
  for (let round = 0; round < 5; round++) {
    const completion = await post("/v1/chat/completions",
      { model: "stub", messages, tools: tools.definitions }) as
      { choices: { message: ChatMessage }[] };
    const message = completion.choices[0]!.message;
    messages.push(message);
    if (!message.tool_calls?.length) {
      assert.equal(message.content, reply);
      return results;
    }
    for (const call of message.tool_calls) {
      const content = await tools.run(call.function.name, call.function.arguments);
      results.push(JSON.parse(content) as Record<string, any>);
      messages.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  throw new Error("the model did not stop calling tools");
}

test("a model saves, lists, searches and forgets through the TypeScript executor", async () => {
  const ada = fresh("ada");
  const tools = new MemoryToolExecutor(admin, { userId: ada, agentId: "coach" });
  const [saved] = await turn(tools, "Remember that I like green tea.",
    [["save_memory", { text: "Likes green tea", category: "preference" }]], "Noted.");
  assert.equal(saved!.ok, true);
  const factId = saved!.saved.id as number;
  const stored = (await admin.factChain(ada, factId)).versions.at(-1)!;
  assert.deepEqual([stored.text, stored.source_kind, stored.basis, stored.scope],
    ["Likes green tea", "manual", "stated", "profile"]);

  const [listed] = await turn(tools, "What do you know?", [["list_memory", "{}"]], "Tea.");
  assert.deepEqual(listed!.facts.map((f: { id: number }) => f.id), [factId]);

  const [found, bad] = await turn(tools, "What do I drink?",
    [["search_memory", { query: "green tea", k: 3 }], ["search_memory", "{not json"]], "Tea.");
  assert.equal(found!.results[0].id, factId);
  assert.deepEqual(bad, { ok: false, error: "bad_arguments",
    message: "the arguments are not valid JSON" });

  const [forgotten, again] = await turn(tools, "Forget the tea.",
    [["forget_memory", { fact_id: factId }], ["forget_memory", { fact_id: factId }]], "Done.");
  assert.deepEqual(forgotten, { ok: true, forgotten: { id: factId, text: "Likes green tea",
    category: "preference" } });
  assert.equal(again!.error, "not_found");

  const [after] = await turn(tools, "And now?", [["list_memory", {}]], "Nothing.");
  assert.deepEqual(after, { ok: true, count: 0, facts: [], truncated: false });
  const versions = (await admin.factChain(ada, factId)).versions;
  assert.equal(versions.length, 1);
  assert.notEqual(versions[0]!.superseded_at, null);  // superseded, not deleted
});

test("another user's and another assistant's facts are out of reach", async () => {
  const ada = fresh("ada");
  const bob = fresh("bob");
  const bobs = await admin.addFact(bob, { text: "Keeps a secret diary", category: "fact" });
  const tutors = await admin.addFact(ada, { text: "Secret nickname Dodo",
    scope: "relationship", agentId: "tutor" });
  const tools = new MemoryToolExecutor(admin, { userId: ada, agentId: "coach" });
  const [userField, agentField, searched, listed, forgetBobs, forgetTutors] = await turn(tools,
    "Tell me Bob's secrets.", [
      ["search_memory", { query: "secret diary", user_id: bob }],
      ["list_memory", { agent_id: "tutor" }],
      ["search_memory", { query: "secret" }],
      ["list_memory", {}],
      ["forget_memory", { fact_id: bobs.id }],
      ["forget_memory", { fact_id: tutors.id }],
    ], "Nothing of Bob.");
  assert.equal(userField!.error, "bad_arguments");
  assert.match(userField!.message, /user_id/);
  assert.equal(agentField!.error, "bad_arguments");
  assert.deepEqual(searched, { ok: true, results: [] });
  assert.equal(listed!.count, 0);
  assert.equal(forgetBobs!.error, "not_found");
  assert.equal(forgetTutors!.error, "not_found");
  assert.deepEqual((await admin.facts(bob)).groups.flatMap((g) => g.facts).map((f) => f.id),
    [bobs.id]);
  assert.equal((await admin.factChain(ada, tutors.id)).versions.at(-1)!.superseded_at, null);
  const tutor = new MemoryToolExecutor(admin, { userId: ada, agentId: "tutor" });
  assert.equal(JSON.parse(await tutor.run("list_memory", {})).facts[0].id, tutors.id);
});

test("memory off: save stores nothing and says so", async () => {
  const cy = fresh("cy");
  await admin.setConsent(cy, { enabled: false });
  const tools = new MemoryToolExecutor(admin, { userId: cy });
  const [saved, searched] = await turn(tools, "Remember my PIN is 1234.",
    [["save_memory", { text: "PIN is 1234" }], ["search_memory", { query: "PIN" }]],
    "Memory is off.");
  assert.equal(saved!.error, "memory_off");
  assert.equal(searched!.error, "memory_off");
  assert.match(saved!.message, /Memory is off/);
  assert.equal((await admin.facts(cy, { scope: "all" })).count, 0);
  assert.deepEqual((await admin.exportUser(cy)).facts, []);
});
