/** Notes beside facts (notes, removeNote, factNotes, searchWithNotes) against a local
 * HTTP server: the routes and methods sent, the answers as they are (a search's notes
 * beside its facts, none from an API that sends none), the refusals as the Python
 * client's errors (404 NotFound, 409 WriteConflict, 422 InvalidRequest, 429
 * RateLimited) naming the call, and ids checked before any request. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { InvalidRequest, MemfleetError, NotFound, RateLimited, WriteConflict } from "../../errors.js";
import type { Fact, SearchHit } from "../../http/memory_types.js";
import type { Note, NoteHit } from "../../http/note_types.js";
import { refusedAs, serveLocalApi } from "../local_api.js";

const NOW = "2026-12-07T00:00:00+00:00";
const NOTE: Note = { id: 5, text: "The user is considering a kitchen renovation.",
  observed_at: NOW, source_session_id: "s1", created_at: NOW, superseded_at: null,
  superseded_by: null, superseded_reason: null, promoted_to: null };
const REMOVED: Note = { ...NOTE, superseded_at: NOW, superseded_reason: "removed" };
const FACT_HIT: SearchHit = { fact: { id: 9, text: "Lives in Oslo" } as Fact, score: 0.03,
  semantic_rank: 1, lexical_rank: null };
const NOTE_HIT: NoteHit = { kind: "note", note: NOTE, score: 0.016, semantic_rank: 1,
  lexical_rank: 1 };

test("the notes' calls send their routes and answer as the API does", async () => {
  const { client, seen, stop } = await serveLocalApi((method, url) => {
    if (method === "DELETE") return [200, REMOVED];
    if (url.startsWith("/users/a%2Fb/search?q=kitchen")) {
      return [200, { results: [FACT_HIT], notes: [NOTE_HIT] }];
    }
    if (url.startsWith("/users/a%2Fb/search")) return [200, { results: [FACT_HIT] }];
    return [200, { user_id: "a/b", notes: [NOTE] }];
  });
  try {
    assert.deepEqual(await client.notes("a/b"), [NOTE]);
    assert.deepEqual(await client.notes("a/b", { state: "all" }), [NOTE]);
    assert.deepEqual(await client.removeNote("a/b", 5), REMOVED);
    assert.deepEqual(await client.factNotes("a/b", 9), [NOTE]);
    assert.deepEqual(await client.searchWithNotes("a/b", { q: "kitchen", k: 3 }),
      { results: [FACT_HIT], notes: [NOTE_HIT] });
    // The facts alone, as before notes; and an API that sends no notes: none.
    assert.deepEqual(await client.search("a/b", { q: "kitchen" }), [FACT_HIT]);
    assert.deepEqual(await client.searchWithNotes("a/b", { q: "oslo" }),
      { results: [FACT_HIT], notes: [] });
  } finally {
    await stop();
  }
  assert.deepEqual(seen.map(([method, url]) => [method, url]), [
    ["GET", "/users/a%2Fb/notes"],
    ["GET", "/users/a%2Fb/notes?state=all"],
    ["DELETE", "/users/a%2Fb/notes/5"],
    ["GET", "/users/a%2Fb/facts/9/notes"],
    ["GET", "/users/a%2Fb/search?q=kitchen&k=3"],
    ["GET", "/users/a%2Fb/search?q=kitchen"],
    ["GET", "/users/a%2Fb/search?q=oslo"],
  ]);
});

test("the notes' refusals are the Python client's errors, naming the call", async () => {
  const { client, stop } = await serveLocalApi((method, url) => {
    if (url.endsWith("/notes/5")) return [404, { detail: "no such active note" }];
    if (url.endsWith("/notes/6")) return [409, { detail: "changed meanwhile" }];
    if (url.endsWith("/notes/7")) return [429, { detail: "too many manual writes" }];
    return [422, { detail: [{ loc: ["query", "state"], msg: "Input should be 'active' or 'all'" }] }];
  });
  try {
    await assert.rejects(client.removeNote("ada", 5),
      refusedAs(NotFound, 404, "DELETE /users/{user}/notes/{id}"));
    await assert.rejects(client.removeNote("ada", 6),
      refusedAs(WriteConflict, 409, "DELETE /users/{user}/notes/{id}"));
    await assert.rejects(client.notes("ada", { state: "some" as "all" }),
      refusedAs(InvalidRequest, 422, "GET /users/{user}/notes"));
    await assert.rejects(client.removeNote("ada", 7), (error: MemfleetError) => {
      assert.ok(error instanceof RateLimited);
      assert.equal(error.retryAfterS, 7);
      return true;
    });
  } finally {
    await stop();
  }
});

test("a note's or fact's id that is no whole number from 1 is refused before a request",
  async () => {
    const { client, seen, stop } = await serveLocalApi(() => [200, NOTE]);
    try {
      for (const call of [
        () => client.removeNote("ada", 0),
        () => client.removeNote("ada", 2.5),
        () => client.factNotes("ada", -1),
        () => client.notes(""),
      ]) {
        await assert.rejects(call(), InvalidRequest);
      }
    } finally {
      await stop();
    }
    assert.deepEqual(seen, []);
  });
