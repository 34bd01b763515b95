/**
 * Notes beside facts (docs/notes.md) through HTTP mode against the real memory API and a
 * real worker with notes on, on the LLM stub, started by
 * tests/integration/typescript/test_node_notes.py: a conversation's note is listed,
 * found by a search beside the facts (never among them), shown by the memory tools'
 * search_memory after the facts, and removed, with the user's own token; a topic said in three sessions is promoted to a fact by the worker's own
 * pass, and the fact's notes are read back. The refusals are the Python client's errors.
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { after, test } from "node:test";

import {
  AccessDenied,
  MemfleetHttpClient,
  MemoryToolExecutor,
  NotFound,
  type Note,
} from "../../index.js";
import { fresh, servers, userToken } from "../integration/env.js";

const env = servers();
const admin = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.adminKey,
  timeoutMs: 10_000 });
after(async () => { await admin.close(); });

const RENOVATION = "I'm thinking about a kitchen renovation, budget about $40k.";

async function say(userId: string, sessionId: string, ...said: string[]): Promise<void> {
  const who = { userId, sessionId };
  const { handoverId } = await admin.handOver({ ...who,
    messages: said.map((content) => ({ role: "user" as const, content })) });
  assert.ok(await admin.waitForMemory(who, handoverId, { timeoutMs: 60_000 }));
}

test("a user's notes over HTTP: listed, found beside the facts, removed once", async () => {
  const eve = fresh("eve");
  await say(eve, "s1", "I live in Oslo.", "I'm considering moving to Porto.");
  const mine = new MemfleetHttpClient({ apiUrl: env.apiUrl,
    userToken: () => userToken(eve, env.jwtSecret), timeoutMs: 10_000 });
  try {
    const [porto, ...others] = await mine.notes(eve);
    assert.ok(porto !== undefined);
    assert.deepEqual(others, []);
    assert.deepEqual([porto.text, porto.source_session_id, porto.superseded_reason],
      ["The user is considering moving to Porto.", "s1", null]);

    const found = await mine.searchWithNotes(eve, { q: "moving to Porto" });
    assert.deepEqual(found.notes.map((h) => [h.kind, h.note.id]), [["note", porto.id]]);
    assert.ok(found.results.every((h) => !h.fact.text.includes("Porto")),
      "a note is never among the facts");
    assert.deepEqual(await mine.search(eve, { q: "moving to Porto" }), found.results);
    // The memory tools show it after the facts, marked as no fact, without its id.
    const tool = JSON.parse(await new MemoryToolExecutor(mine, { userId: eve, agentId: "coach" })
      .run("search_memory", { query: "moving to Porto" }));
    assert.deepEqual(Object.keys(tool), ["ok", "results", "notes"]);
    assert.match(tool.notes.about, /^Not confirmed facts/);
    assert.deepEqual(tool.notes.items, [{ text: porto.text,
      said_on: porto.observed_at.slice(0, 10) }]);
    const asOf = await mine.searchWithNotes(eve, { q: "Porto", knownAt: new Date() });
    assert.deepEqual(asOf.notes, [], "notes have no time: a search as of one finds none");

    const removed = await mine.removeNote(eve, porto.id);
    assert.deepEqual([removed.id, removed.superseded_reason], [porto.id, "removed"]);
    await assert.rejects(mine.removeNote(eve, porto.id), (e: Error) =>
      e instanceof NotFound && e.status === 404
      && e.operation === "DELETE /users/{user}/notes/{id}");
    assert.deepEqual(await mine.notes(eve), []);
    assert.deepEqual((await mine.notes(eve, { state: "all" })).map(
      (n) => [n.id, n.superseded_reason]), [[porto.id, "removed"]]);
    await assert.rejects(mine.notes(fresh("frank")), (e: Error) =>
      e instanceof AccessDenied && e.status === 403);
  } finally {
    await mine.close();
  }
});

test("a topic of three sessions is promoted by the worker; the fact's notes are read back",
  async () => {
    const cy = fresh("cy");
    for (const session of ["s1", "s2", "s3"]) await say(cy, session, RENOVATION);
    // The worker's promotion pass runs every second (test_node_notes.py).
    let promoted: Note[] = [];
    for (let waited = 0; promoted.length < 3; waited += 200) {
      assert.ok(waited < 30_000, "the worker promoted no note within 30 s");
      await sleep(200);
      promoted = (await admin.notes(cy, { state: "all" })).filter(
        (n) => n.superseded_reason === "promoted");
    }
    const factId = promoted[0]?.promoted_to;
    assert.ok(typeof factId === "number");
    assert.deepEqual(promoted.map((n) => n.promoted_to), [factId, factId, factId]);
    const fromFact = await admin.factNotes(cy, factId);
    assert.deepEqual(fromFact.map((n) => n.source_session_id).sort(), ["s1", "s2", "s3"]);
    assert.deepEqual(await admin.notes(cy), [], "none is left active");
    const facts = (await admin.facts(cy)).groups.flatMap((g) => g.facts);
    assert.ok(facts.some((f) => f.id === factId && f.text.includes("kitchen renovation")));
    assert.deepEqual(await admin.factNotes(cy, factId + 1_000_000), [],
      "any other fact: made from no note");
  });
