/** The people in a user's life (persons, createPerson, updatePerson, addAlias,
 * mergePersons, moveFact) against a local HTTP server: the routes, methods and bodies
 * sent (snake_case, a merge patch's null kept), the answers as they are, the refusals
 * as the Python client's errors (404 NotFound, 409 WriteConflict, 422 InvalidRequest,
 * 429 RateLimited) naming the call, and ids checked before any request. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { InvalidRequest, MemfleetError, NotFound, RateLimited, WriteConflict } from "../../errors.js";
import type { Fact, HeldProposal, Person, PersonWithFacts } from "../../http/memory_types.js";
import { refusedAs, serveLocalApi } from "../local_api.js";

const NOW = "2026-12-07T00:00:00+00:00";
const ANA: Person = { id: 3, display_name: "Ana", relation: "sister", aliases: ["Annie"],
  created_from: "conversation", source_session_id: "s1", created_at: NOW, labelled_at: NOW,
  label_set_by: "user", merged_into: null, merged_at: null };
const FACT = { id: 9, text: "The user's sister Ana is vegetarian", person_id: 3 } as Fact;
const LISTED: PersonWithFacts[] = [{ ...ANA, facts: [FACT] }];

test("the persons' calls send their routes and bodies and answer as the API does", async () => {
  const { client, seen, stop } = await serveLocalApi((method, url) => {
    if (method === "GET") return [200, { user_id: "a/b", persons: LISTED }];
    if (url.endsWith("/person")) return [200, FACT];
    return [method === "POST" && url.endsWith("/persons") ? 201 : 200, ANA];
  });
  try {
    assert.deepEqual(await client.persons("a/b"), LISTED);
    assert.deepEqual(await client.persons("a/b", { includeMerged: true }), LISTED);
    assert.deepEqual(await client.createPerson("a/b", { relation: "boss" }), ANA);
    await client.createPerson("a/b", { displayName: "Leo", relation: "brother",
      aliases: ["Leon"] });
    assert.deepEqual(await client.updatePerson("a/b", 3, { displayName: "Anna",
      relation: null }), ANA);
    await client.updatePerson("a/b", 3, { aliases: null });
    assert.deepEqual(await client.addAlias("a/b", 3, "Nana"), ANA);
    assert.deepEqual(await client.mergePersons("a/b", 4, 3), ANA);
    assert.deepEqual(await client.moveFact("a/b", 9, 3), FACT);
    await client.moveFact("a/b", 9, null);
  } finally {
    await stop();
  }
  assert.deepEqual(seen, [
    ["GET", "/users/a%2Fb/persons", undefined],
    ["GET", "/users/a%2Fb/persons?include_merged=true", undefined],
    ["POST", "/users/a%2Fb/persons", { relation: "boss", aliases: [] }],
    ["POST", "/users/a%2Fb/persons", { display_name: "Leo", relation: "brother",
      aliases: ["Leon"] }],
    // A merge patch: left out is kept, null clears.
    ["PATCH", "/users/a%2Fb/persons/3", { display_name: "Anna", relation: null }],
    ["PATCH", "/users/a%2Fb/persons/3", { aliases: null }],
    ["POST", "/users/a%2Fb/persons/3/aliases", { alias: "Nana" }],
    ["POST", "/users/a%2Fb/persons/4/merge", { into: 3 }],
    ["PUT", "/users/a%2Fb/facts/9/person", { person_id: 3 }],
    ["PUT", "/users/a%2Fb/facts/9/person", { person_id: null }],
  ]);
});

test("the persons' refusals are the Python client's errors, naming the call", async () => {
  const { client, stop } = await serveLocalApi((method, url) => {
    if (url.endsWith("/merge")) return [409, { detail: "the person was merged into another" }];
    if (url.endsWith("/person")) return [404, { detail: "no such fact or person" }];
    if (method === "POST" && url.endsWith("/persons")) {
      return [422, { detail: [{ loc: ["body"], msg: "a person needs a display_name or a relation" }] }];
    }
    return [429, { detail: "too many manual writes" }];
  });
  try {
    await assert.rejects(client.mergePersons("ada", 4, 3),
      refusedAs(WriteConflict, 409, "POST /users/{user}/persons/{id}/merge"));
    await assert.rejects(client.moveFact("ada", 9, null),
      refusedAs(NotFound, 404, "PUT /users/{user}/facts/{id}/person"));
    await assert.rejects(client.createPerson("ada", {}),
      refusedAs(InvalidRequest, 422, "POST /users/{user}/persons"));
    await assert.rejects(client.addAlias("ada", 3, "Nana"), (error: MemfleetError) => {
      assert.ok(error instanceof RateLimited);
      assert.equal(error.retryAfterS, 7);
      return true;
    });
  } finally {
    await stop();
  }
});

test("a person's or fact's id that is no whole number from 1 is refused before a request",
  async () => {
    const { client, seen, stop } = await serveLocalApi(() => [200, ANA]);
    try {
      for (const call of [
        () => client.updatePerson("ada", 0, { displayName: "X" }),
        () => client.addAlias("ada", 1.5, "X"),
        () => client.mergePersons("ada", 3, -1),
        () => client.moveFact("ada", 9, 0),
        () => client.moveFact("ada", Number.NaN, null),
        () => client.persons(""),
      ]) {
        await assert.rejects(call(), InvalidRequest);
      }
    } finally {
      await stop();
    }
    assert.deepEqual(seen, []);
  });

test("a held addition names whom it is about; an older server's, without person_id, reads",
  async () => {
    const held: HeldProposal = { id: 5, fact_id: null, run_id: 2, event: "ADD",
      reason: "undecided", text: "The user's sister Ana is vegan", category: "fact",
      importance: 5, scope: "profile", agent_id: null, person_id: 3, session_id: "s2",
      proposed_at: NOW, resolution: null, resolved_at: null, resolved_by: null,
      result_fact_id: null, stale: false };
    const { person_id: _, ...older } = held;
    const { client, stop } = await serveLocalApi(() => [200, { proposals: [held, older] }]);
    try {
      const [about, unknown] = await client.heldProposals("ada");
      assert.equal(about?.person_id, 3);
      assert.equal(unknown?.person_id ?? null, null);
    } finally {
      await stop();
    }
  });
