/**
 * HTTP mode's routes of a user's memory (docs/api.md, "Endpoints") against the real
 * memory API and a real worker on the LLM stub, started by
 * tests/integration/typescript/test_node_suite.py: every route with a service key, the
 * held proposals of a real worker's consolidation, an end user's token on its own
 * memory and refused on another's, scopes, and an API that is not there.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AccessDenied,
  WriteConflict,
  type Fact,
  HandoverUnavailable,
  MemfleetError,
  MemfleetHttpClient,
  MemoryApiUnavailable,
  MemoryToolExecutor,
  NotFound,
  type SessionRef,
} from "../../index.js";
import { fresh, servers, userToken } from "./env.js";

const env = servers();
// handover + read + admin
const admin = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.adminKey,
  timeoutMs: 10_000 });
const readOnly = new MemfleetHttpClient({ apiUrl: env.apiUrl, serviceKey: env.readKey,
  timeoutMs: 10_000 });
const said = (text: string) => [{ role: "user" as const, content: text },
  { role: "assistant" as const, content: "Noted." }];

async function texts(userId: string): Promise<string[]> {
  const listed = await admin.facts(userId);
  return listed.groups.flatMap((group) => group.facts.map((fact) => fact.text)).sort();
}

/** Hand `text` over in a session of its own and wait until a commit covers it. */
async function say(who: SessionRef, text: string): Promise<void> {
  const { handoverId } = await admin.handOver({ ...who, messages: said(text) });
  assert.ok(await admin.waitForMemory(who, handoverId, { timeoutMs: 60_000 }), text);
}

/** The rejection is `Class`, with `status`, and names the call and the API. */
function refused(Class: new (...args: never[]) => MemfleetError, status: number,
  operation: string) {
  return (error: MemfleetError) => {
    assert.ok(error instanceof Class, `${error.name}: ${error.message}`);
    assert.equal(error.status, status, error.message);
    assert.equal(error.operation, operation);
    assert.ok(error.message.includes(`${admin.origin} answered ${operation} with ${status}: `),
      error.message);
    return true;
  };
}

test("every route of a user's memory with a service key: add, list by scope and time, "
  + "correct, chain, pin, search, known facts, remove, consent, export, erase", async () => {
  const ada = fresh("ada");
  const before = new Date(Date.now() - 60_000);
  const tea = await admin.addFact(ada, { text: "Likes green tea", category: "preference",
    importance: 6 });
  assert.deepEqual([tea.text, tea.category, tea.importance, tea.source_kind, tea.pinned,
    tea.scope, tea.superseded_at], ["Likes green tea", "preference", 6, "manual", false,
    "profile", null]);
  const captain = await admin.addFact(ada, { text: "Calls the user Captain",
    scope: "relationship", agentId: "luna", validFrom: before, pinned: true, via: "panel" });
  assert.deepEqual([captain.agent_id, captain.pinned], ["luna", true]);
  assert.deepEqual([tea.written_via, captain.written_via], ["api", "panel"], "api: the default");
  assert.equal(new Date(captain.valid_from ?? "").getTime(), before.getTime());

  assert.equal((await admin.facts(ada)).count, 2);
  const listed = await admin.facts(ada, { scope: "profile" });
  assert.deepEqual([listed.user_id, listed.count, listed.groups[0]?.category],
    [ada, 1, "preference"]);
  assert.equal((await admin.facts(ada, { agentId: "luna" })).count, 2);
  assert.equal((await admin.facts(ada, { scope: "relationship", agentId: "luna" })).count, 1);
  assert.equal((await admin.facts(ada, { agentId: "sol" })).count, 1);
  assert.equal((await admin.facts(ada, { knownAt: before })).count, 0, "not known then");
  assert.equal((await admin.facts(ada, { validAt: "2000-01-01T00:00:00Z" })).count, 0);

  const jasmine = await admin.correctFact(ada, tea.id, { text: "Likes jasmine tea",
    importance: 7, via: "tool" });
  assert.equal(jasmine.written_via, "tool");
  assert.notEqual(jasmine.id, tea.id);
  assert.deepEqual([jasmine.text, jasmine.category, jasmine.importance],
    ["Likes jasmine tea", "preference", 7]);
  const chain = await readOnly.factChain(ada, tea.id);
  assert.equal(chain.fact_id, tea.id);
  assert.deepEqual(chain.versions.map((v: Fact) => [v.text, v.superseded_by]),
    [["Likes green tea", jasmine.id], ["Likes jasmine tea", null]]);
  await assert.rejects(admin.correctFact(ada, tea.id, { text: "Likes oolong" }),
    refused(WriteConflict, 409, "PATCH /users/{user}/facts/{id}"));
  await assert.rejects(admin.factChain(ada, 2 ** 52),
    refused(NotFound, 404, "GET /users/{user}/facts/{id}/chain"));

  assert.equal((await admin.pinFact(ada, jasmine.id)).pinned, true);
  assert.equal((await admin.unpinFact(ada, jasmine.id)).pinned, false);

  const hits = await readOnly.search(ada, { q: "jasmine tea", k: 3 });
  assert.equal(hits[0]?.fact.text, "Likes jasmine tea");
  assert.ok(typeof hits[0]?.score === "number");
  assert.deepEqual(await readOnly.search(ada, { q: "tea", knownAt: before }), []);
  const known = await readOnly.knownFacts(ada, { agentId: "luna" });
  assert.equal(known.count, 2);
  assert.match(known.block, /Likes jasmine tea/);
  assert.match(known.block, /Calls the user Captain/);

  const removed = await admin.removeFact(ada, captain.id);
  assert.equal(removed.id, captain.id);
  assert.equal(removed.superseded_reason, "removed");
  await assert.rejects(admin.removeFact(ada, captain.id),
    refused(WriteConflict, 409, "DELETE /users/{user}/facts/{id}"));
  await assert.rejects(admin.pinFact(ada, 2 ** 52),
    refused(NotFound, 404, "PUT /users/{user}/facts/{id}/pin"));
  assert.deepEqual(await texts(ada), ["Likes jasmine tea"]);

  assert.deepEqual(await readOnly.getConsent(ada), { enabled: true, chosen: false });
  assert.deepEqual(await admin.setConsent(ada, { enabled: false }),
    { enabled: false, chosen: true, deleted: null });
  assert.equal((await readOnly.knownFacts(ada)).count, 0, "no memory in prompts while off");
  assert.deepEqual(await texts(ada), ["Likes jasmine tea"], "what is kept stays visible");
  await admin.setConsent(ada, { enabled: true });

  const held = await admin.exportUser(ada);
  assert.equal(held.user_id, ada);
  assert.deepEqual(held.facts.map((f) => [f.text, f.written_via]).sort(),
    [["Calls the user Captain", "panel"], ["Likes green tea", "api"],
      ["Likes jasmine tea", "tool"]]);
  assert.deepEqual([held.consent.enabled, held.consent.chosen], [true, true]);
  assert.deepEqual(held.held_proposals, []);

  const erased = await admin.eraseUser(ada);
  assert.equal(erased.user_id, ada);
  assert.equal(erased.deleted["memory_fact"], 3, JSON.stringify(erased.deleted));
  assert.equal((await admin.facts(ada)).count, 0);

  const bo = fresh("bo");
  await admin.addFact(bo, { text: "Plays the cello" });
  const forgotten = await admin.setConsent(bo, { enabled: false, forget: true });
  assert.equal(forgotten.enabled, false);
  assert.equal(forgotten.deleted?.["memory_fact"], 1);
  assert.equal((await admin.facts(bo)).count, 0);
});

test("held proposals of a real worker: a pinned fact's change is held, accepted, and the "
  + "next one dismissed", async () => {
  const ida = fresh("ida");
  await say({ userId: ida, sessionId: "s1" }, "I live in Paris.");
  const paris = (await admin.facts(ida)).groups.flatMap((g) => g.facts)
    .find((fact) => fact.text === "Lives in Paris");
  assert.ok(paris, `no "Lives in Paris" among ${(await texts(ida)).join(", ")}`);
  await admin.pinFact(ida, paris.id);

  await say({ userId: ida, sessionId: "s2" }, "I moved to Lisbon.");
  assert.deepEqual(await texts(ida), ["Lives in Paris"], "the pinned fact stands");
  const [move, ...more] = await readOnly.heldProposals(ida);
  assert.ok(move !== undefined && more.length === 0);
  assert.deepEqual([move.fact_id, move.event, move.reason, move.text, move.session_id,
    move.stale, move.resolution], [paris.id, "UPDATE", "pinned", "Lives in Lisbon", "s2", false,
    null]);
  const accepted = await admin.acceptProposal(ida, move.id);
  assert.equal(accepted.proposal.resolution, "accepted");
  assert.match(accepted.proposal.resolved_by ?? "", /^key:/);
  assert.deepEqual([accepted.fact?.text, accepted.fact?.pinned], ["Lives in Lisbon", true]);
  assert.equal(accepted.proposal.result_fact_id, accepted.fact?.id);
  await assert.rejects(admin.acceptProposal(ida, move.id),
    refused(WriteConflict, 409, "POST /users/{user}/held-proposals/{id}/accept"));
  assert.deepEqual(await texts(ida), ["Lives in Lisbon"]);

  await say({ userId: ida, sessionId: "s3" }, "I moved to Porto.");
  const [porto] = await admin.heldProposals(ida, { state: "open" });
  assert.equal(porto?.text, "Lives in Porto");
  const dismissed = await admin.dismissProposal(ida, porto?.id ?? 0);
  assert.deepEqual([dismissed.proposal.resolution, dismissed.fact], ["dismissed", null]);
  assert.deepEqual(await admin.heldProposals(ida), []);
  assert.deepEqual((await admin.heldProposals(ida, { state: "resolved" })).map((p) => p.text)
    .sort(), ["Lives in Lisbon", "Lives in Porto"]);
  assert.equal((await admin.heldProposals(ida, { state: "all" })).length, 2);
  assert.deepEqual(await texts(ida), ["Lives in Lisbon"]);
  await assert.rejects(admin.dismissProposal(ida, 2 ** 52),
    refused(NotFound, 404, "POST /users/{user}/held-proposals/{id}/dismiss"));
});

test("an end user's token reaches its own memory and no other user's", async () => {
  const [mine, theirs] = [fresh("tia"), fresh("uma")];
  await admin.addFact(theirs, { text: "Keeps bees" });
  // A fresh token for each request, as a chat server mints short-lived ones.
  let minted = 0;
  const asTia = new MemfleetHttpClient({ apiUrl: env.apiUrl, timeoutMs: 10_000,
    userToken: () => {
      minted += 1;
      return userToken(mine, env.jwtSecret);
    } });
  const added = await asTia.addFact(mine, { text: "Rides a tandem" });
  assert.deepEqual((await asTia.facts(mine)).groups.flatMap((g) => g.facts.map((f) => f.id)),
    [added.id]);
  assert.equal((await asTia.correctFact(mine, added.id, { text: "Rides a bicycle" })).text,
    "Rides a bicycle");
  assert.equal((await asTia.knownFacts(mine)).count, 1);
  assert.equal((await asTia.getConsent(mine)).enabled, true);
  assert.deepEqual(await asTia.heldProposals(mine), []);
  assert.equal((await asTia.exportUser(mine)).facts.length, 2);
  assert.deepEqual(await asTia.status({ userId: mine, sessionId: "1" }),
    { latest: 0, finished: 0, olderLists: 0, sessionTag: (await admin.status(
      { userId: mine, sessionId: "1" })).sessionTag });
  assert.ok(minted >= 8, `minted ${minted}`);

  const denied = (operation: string) => refused(AccessDenied, 403, operation);
  const other: [string, () => Promise<unknown>][] = [
    ["GET /users/{user}/facts", () => asTia.facts(theirs)],
    ["POST /users/{user}/facts", () => asTia.addFact(theirs, { text: "Hates bees" })],
    ["GET /users/{user}/search", () => asTia.search(theirs, { q: "bees" })],
    ["GET /users/{user}/known-facts", () => asTia.knownFacts(theirs)],
    ["GET /users/{user}/held-proposals", () => asTia.heldProposals(theirs)],
    ["GET /users/{user}/consent", () => asTia.getConsent(theirs)],
    ["PUT /users/{user}/consent", () => asTia.setConsent(theirs, { enabled: false })],
    ["GET /users/{user}/export", () => asTia.exportUser(theirs)],
    ["DELETE /users/{user}", () => asTia.eraseUser(theirs)],
    ["GET /users/{user}/sessions/{session}/status",
      () => asTia.status({ userId: theirs, sessionId: "1" })],
  ];
  for (const [operation, call] of other) await assert.rejects(call(), denied(operation));
  // Never the hand-over (a token could feed memory anything) nor every user's events.
  await assert.rejects(asTia.handOver({ userId: mine, sessionId: "1", messages: said("hi") }),
    (e: MemfleetError) => e instanceof AccessDenied && e.status === 403);
  await assert.rejects(asTia.events({ after: "0" }), denied("GET /events"));
  assert.deepEqual(await texts(theirs), ["Keeps bees"], "the other user's memory is as it was");

  const forged = new MemfleetHttpClient({ apiUrl: env.apiUrl,
    userToken: userToken(mine, "not-the-api-secret-0123456789abcdef") });
  await assert.rejects(forged.facts(mine), refused(AccessDenied, 401, "GET /users/{user}/facts"));
});

test("scopes: a read key reads and changes nothing", async () => {
  const vi = fresh("vi");
  const fact = await admin.addFact(vi, { text: "Collects stamps" });
  assert.equal((await readOnly.facts(vi)).count, 1);
  await assert.rejects(readOnly.removeFact(vi, fact.id), (e: MemfleetError) =>
    e instanceof AccessDenied && e.status === 403 && /lacks the admin scope/.test(e.message));
  await assert.rejects(readOnly.exportUser(vi), AccessDenied);
  await assert.rejects(readOnly.eraseUser(vi), AccessDenied);
  assert.equal((await admin.facts(vi)).count, 1);
});

test("an API that is not there: MemoryApiUnavailable naming the API and the call, "
  + "never the key or the user; the hand-over stays HandoverUnavailable", async () => {
  const port = new URL(env.closedUrl).port;
  const gone = new MemfleetHttpClient({ apiUrl: `http://127.0.0.1:${port}`,
    serviceKey: env.adminKey, timeoutMs: 1000 });
  const user = "user-name-never-shown";
  const who = { userId: user, sessionId: "s" };
  const calls: [string, () => Promise<unknown>][] = [
    ["GET /users/{user}/facts", () => gone.facts(user, { agentId: "luna" })],
    ["POST /users/{user}/facts", () => gone.addFact(user, { text: "text never shown" })],
    ["PATCH /users/{user}/facts/{id}", () => gone.correctFact(user, 1, { text: "x" })],
    ["DELETE /users/{user}/facts/{id}", () => gone.removeFact(user, 1)],
    ["PUT /users/{user}/facts/{id}/pin", () => gone.pinFact(user, 1)],
    ["DELETE /users/{user}/facts/{id}/pin", () => gone.unpinFact(user, 1)],
    ["GET /users/{user}/facts/{id}/chain", () => gone.factChain(user, 1)],
    ["GET /users/{user}/held-proposals", () => gone.heldProposals(user)],
    ["POST /users/{user}/held-proposals/{id}/accept", () => gone.acceptProposal(user, 1)],
    ["POST /users/{user}/held-proposals/{id}/dismiss", () => gone.dismissProposal(user, 1)],
    ["GET /users/{user}/search", () => gone.search(user, { q: "query never shown" })],
    ["GET /users/{user}/known-facts", () => gone.knownFacts(user)],
    ["DELETE /users/{user}", () => gone.eraseUser(user)],
    ["GET /users/{user}/export", () => gone.exportUser(user)],
    ["GET /users/{user}/consent", () => gone.getConsent(user)],
    ["PUT /users/{user}/consent", () => gone.setConsent(user, { enabled: true })],
    ["GET /users/{user}/sessions/{session}/status", () => gone.status(who)],
    ["GET /users/{user}/sessions/{session}/handovers/{id}/wait",
      () => gone.waitForMemory(who, 1, { timeoutMs: 500 })],
    ["GET /events", () => gone.events({ after: "0" })],
  ];
  const names = (Class: typeof MemoryApiUnavailable | typeof HandoverUnavailable,
    operation: string) => (error: MemfleetError) => {
    assert.ok(error instanceof Class && error.transient, `${operation}: ${error.name}`);
    assert.equal(error.message, `the memory API at http://127.0.0.1:${port} did not answer `
      + `${operation}: connect ECONNREFUSED 127.0.0.1:${port}`);
    assert.deepEqual([error.operation, error.origin], [operation, `http://127.0.0.1:${port}`]);
    for (const secret of [env.adminKey, user, "never shown"]) {
      assert.ok(!error.message.includes(secret), error.message);
    }
    return true;
  };
  for (const [operation, call] of calls) {
    await assert.rejects(call(), names(MemoryApiUnavailable, operation));
  }
  await assert.rejects(gone.handOver({ ...who, messages: said("hi") }),
    (error: MemfleetError) => !(error instanceof MemoryApiUnavailable)
      && names(HandoverUnavailable, "POST /users/{user}/sessions/{session}/handover")(error));
  await gone.close();
});

test("a fact the assistant saves with the memory tools records it was written via tool",
  async () => {
    const tia = fresh("tia");
    const tools = new MemoryToolExecutor(admin, { userId: tia });
    const saved = JSON.parse(await tools.run("save_memory", { text: "Grows tomatoes" }));
    assert.equal(saved.ok, true, JSON.stringify(saved));
    const [stored] = (await admin.factChain(tia, saved.saved.id)).versions;
    assert.deepEqual([stored?.text, stored?.source_kind, stored?.written_via],
      ["Grows tomatoes", "manual", "tool"]);
  });
