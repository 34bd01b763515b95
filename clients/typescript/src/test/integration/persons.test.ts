/**
 * The people in a user's life (docs/persons.md) through HTTP mode against the real
 * memory API and a real worker on the LLM stub, started by
 * tests/integration/typescript/test_node_suite.py: a conversation makes a person, the
 * user's own token lists, makes, renames, aliases, moves a fact, merges; the refusals
 * are the Python client's errors.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { MemfleetHttpClient, NotFound, WriteConflict } from "../../index.js";
import { fresh, servers, userToken } from "./env.js";

const env = servers();
const admin = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.adminKey,
  timeoutMs: 10_000 });
after(async () => { await admin.close(); });

test("a user's persons over HTTP: listed with their facts, made, renamed, aliased, a fact "
  + "moved and back, two merged", async () => {
  const cat = fresh("cat");
  const who = { userId: cat, sessionId: "s1" };
  const { handoverId } = await admin.handOver({ ...who, messages: [
    { role: "user", content: "My sister Ana is vegetarian. I live in Munich." },
    { role: "assistant", content: "Noted." }] });
  assert.ok(await admin.waitForMemory(who, handoverId, { timeoutMs: 60_000 }));

  const mine = new MemfleetHttpClient({ apiUrl: env.apiUrl,
    userToken: () => userToken(cat, env.jwtSecret), timeoutMs: 10_000 });
  try {
    const [ana] = await mine.persons(cat);
    assert.ok(ana !== undefined);
    assert.deepEqual([ana.display_name, ana.relation, ana.created_from,
      ana.facts.map((f) => [f.text, f.person_id])],
    ["Ana", "sister", "conversation", [["The user's sister Ana is vegetarian", ana.id]]]);
    const own = (await mine.facts(cat)).groups.flatMap((g) => g.facts.map((f) => f.text));
    assert.deepEqual(own, ["Lives in Munich"], "a person's fact is never the user's");

    const leo = await mine.createPerson(cat, { displayName: "Leo", relation: "brother" });
    assert.deepEqual([leo.created_from, leo.label_set_by], ["user", "user"]);
    assert.deepEqual((await mine.addAlias(cat, leo.id, "Leon")).aliases, ["Leon"]);
    const relabelled = await mine.updatePerson(cat, leo.id, { relation: null });
    assert.deepEqual([relabelled.display_name, relabelled.relation], ["Leo", null]);

    const fact = ana.facts[0];
    assert.ok(fact !== undefined);
    const moved = await mine.moveFact(cat, fact.id, leo.id);
    assert.deepEqual([moved.person_id, moved.text], [leo.id, fact.text]);
    const back = await mine.moveFact(cat, moved.id, null);
    assert.equal(back.person_id, null);
    assert.deepEqual((await mine.factChain(cat, fact.id)).versions.map(
      (v) => [v.person_id, v.superseded_reason]),
    [[ana.id, "updated"], [leo.id, "updated"], [null, null]]);
    await mine.moveFact(cat, back.id, ana.id);

    const kept = await mine.mergePersons(cat, ana.id, leo.id);
    assert.deepEqual([kept.id, kept.aliases], [leo.id, ["Leon", "Ana"]]);
    const listed = await mine.persons(cat);
    assert.deepEqual(listed.map((p) => [p.display_name, p.facts.map((f) => f.text)]),
      [["Leo", ["The user's sister Ana is vegetarian"]]]);
    const everyone = await mine.persons(cat, { includeMerged: true });
    assert.equal(everyone.find((p) => p.id === ana.id)?.merged_into, leo.id);

    await assert.rejects(mine.mergePersons(cat, ana.id, leo.id), (e: Error) =>
      e instanceof WriteConflict && e.status === 409
      && e.operation === "POST /users/{user}/persons/{id}/merge");
    await assert.rejects(admin.updatePerson(fresh("bob"), leo.id, { displayName: "X" }),
      (e: Error) => e instanceof NotFound && e.status === 404);
  } finally {
    await mine.close();
  }
});
