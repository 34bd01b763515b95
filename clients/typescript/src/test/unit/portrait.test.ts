/** The portrait's calls (portrait, removePortrait, refreshPortrait) against a local HTTP
 * server: the routes and methods sent, the known tag as If-None-Match, a 304 read as null. */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { MemfleetHttpClient } from "../../http_client.js";
import { portraitTag, type UserPortrait } from "../../http/memory_types.js";

const KEY = `mfk_${"0".repeat(12)}_${"a".repeat(64)}`;
const SHOWN: UserPortrait = { user_id: "a/b", state: "current", portrait: {
  text: "The user lives in Madrid.", version: 2, fact_count: 1, model: "m",
  created_at: "2026-12-07T00:00:00+00:00" } };

test("the portrait's calls send their routes; a current tag is null", async () => {
  const seen: [string, string, string | undefined][] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const ifNoneMatch = request.headers["if-none-match"];
    seen.push([request.method ?? "", request.url ?? "", ifNoneMatch]);
    const json = (status: number, body: unknown): void => {
      response.writeHead(status, { "Content-Type": "application/json", ETag: '"2"' });
      response.end(JSON.stringify(body));
    };
    if (request.method === "DELETE") {
      json(200, { user_id: "a/b", removed_version: 2 });
    } else if (request.method === "POST") {
      json(202, { user_id: "a/b", queued: true });
    } else if (ifNoneMatch === '"2"') {
      response.writeHead(304, { ETag: '"2"' });
      response.end();
    } else {
      json(200, SHOWN);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const client = new MemfleetHttpClient({ apiUrl: `http://127.0.0.1:${port}`, serviceKey: KEY });
  try {
    const shown = await client.portrait("a/b");
    assert.deepEqual(shown, SHOWN);
    assert.equal(portraitTag(SHOWN), "2");
    assert.equal(portraitTag({ user_id: "a", state: "removed", portrait: null }), "removed");
    assert.equal(await client.portrait("a/b", { knownTag: "2" }), null);
    assert.equal(await client.removePortrait("a/b"), 2);
    assert.equal(await client.refreshPortrait("a/b"), true);
  } finally {
    await client.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  assert.deepEqual(seen, [
    ["GET", "/users/a%2Fb/portrait", undefined],
    ["GET", "/users/a%2Fb/portrait", '"2"'],
    ["DELETE", "/users/a%2Fb/portrait", undefined],
    ["POST", "/users/a%2Fb/portrait/refresh", undefined],
  ]);
});
