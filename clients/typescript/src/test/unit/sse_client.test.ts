/**
 * MemfleetHttpClient's event reading against a small local server that speaks
 * GET /events as docs/api.md fixes it (ids, `event: commit`, keep-alive comments,
 * Last-Event-ID before ?after): the client's own logic of counting, waiting,
 * and resuming a dropped stream. The real route is tested from pytest.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import { AccessDenied, MemfleetHttpClient } from "../../index.js";

const EVENTS = ["1-0", "2-0", "3-0"].map((id, i) => ({ id, data: { session: "abcd", handover: i + 1,
  older_lists: 0, outcome: "committed", added: 1, updated: 0, deleted: 0, at: 1000 + i } }));
const asked: (string | undefined)[] = [];
let dropAfterFirst = false;
let url = "";

function serve(request: IncomingMessage, response: ServerResponse): void {
  if (request.headers.authorization !== "Bearer good") {
    response.writeHead(403, { "Content-Type": "application/json" });
    response.end(JSON.stringify({ detail: "a service key with the read scope" }));
    return;
  }
  const resume = request.headers["last-event-id"] as string | undefined;
  const query = new URL(request.url ?? "/", "http://x").searchParams.get("after") ?? undefined;
  asked.push(resume ?? (query === undefined ? undefined : `after=${query}`));
  const from = resume ?? query;
  response.writeHead(200, { "Content-Type": "text/event-stream" });
  response.write(": keep-alive\n\n");
  const due = from === undefined ? [] : EVENTS.filter((e) => from === "0" || e.id > from);
  for (const [i, event] of due.entries()) {
    response.write(`id: ${event.id}\nevent: commit\ndata: ${JSON.stringify(event.data)}\n\n`);
    if (dropAfterFirst && i === 0) {
      dropAfterFirst = false;
      setTimeout(() => response.destroy(), 50); // once the first event is on the wire
      return;
    }
  }
  // Then nothing more: the stream stays open, as with no new commits.
}

const server = createServer(serve);
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

test("events after an id: what the stream holds, up to count", async () => {
  const client = new MemfleetHttpClient({ apiUrl: url, serviceKey: "good" });
  const all = await client.events({ after: "0" });
  assert.deepEqual(all.map((e) => [e.id, e.handover, e.olderLists]),
    [["1-0", 1, 0], ["2-0", 2, 0], ["3-0", 3, 0]]);
  assert.deepEqual((await client.events({ after: "1-0", count: 1 })).map((e) => e.id), ["2-0"]);
  assert.equal(asked.at(-1), "1-0", "the id travels as Last-Event-ID");
});

test("only new events, waiting at most blockMs", async () => {
  const client = new MemfleetHttpClient({ apiUrl: url, serviceKey: "good" });
  const started = performance.now();
  assert.deepEqual(await client.events({ after: "$", blockMs: 200 }), []);
  const took = performance.now() - started;
  assert.ok(took >= 190 && took < 1500, `${took} ms`);
  assert.equal(asked.at(-1), undefined, "neither Last-Event-ID nor after");
});

test("a dropped stream resumes after the last event seen", async () => {
  const client = new MemfleetHttpClient({ apiUrl: url, serviceKey: "good" });
  dropAfterFirst = true;
  const seen: string[] = [];
  const stop = new AbortController();
  for await (const event of client.subscribe({ after: "0", signal: stop.signal })) {
    seen.push(event.id);
    if (seen.length === 3) stop.abort();
  }
  assert.deepEqual(seen, ["1-0", "2-0", "3-0"]);
  assert.deepEqual(asked.slice(-2), ["0", "1-0"]);
});

test("a refused stream is the typed error", async () => {
  const client = new MemfleetHttpClient({ apiUrl: url, serviceKey: "bad" });
  await assert.rejects(client.events({ after: "0" }),
    (e: AccessDenied) => e instanceof AccessDenied && e.status === 403);
});
