/** The prompt split's calls (promptBlocks, stableBlock) against a local HTTP server: the
 * routes and queries sent, the known version as If-None-Match, a 304 read as null. */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { MemfleetHttpClient } from "../../http_client.js";

const KEY = `mfk_${"0".repeat(12)}_${"a".repeat(64)}`;
const VERSION = "ab".repeat(16);
const STABLE = { block: "Known facts...\n- [fact] Lives in Lisbon (2026-01-02)",
  version: VERSION, count: 1 };

test("promptBlocks and stableBlock send their routes; a current version is null", async () => {
  const seen: { url: string; ifNoneMatch: string | undefined; auth: string | undefined }[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const ifNoneMatch = request.headers["if-none-match"];
    seen.push({ url: request.url ?? "", ifNoneMatch, auth: request.headers.authorization });
    const json = (body: unknown): void => {
      response.writeHead(200, { "Content-Type": "application/json", ETag: `"${VERSION}"` });
      response.end(JSON.stringify(body));
    };
    if ((request.url ?? "").includes("/prompt-blocks")) {
      json({ stable: STABLE, volatile: { block: "More...", count: 2 } });
    } else if (ifNoneMatch === `"${VERSION}"`) {
      response.writeHead(304, { ETag: `"${VERSION}"` });
      response.end();
    } else {
      json(STABLE);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const client = new MemfleetHttpClient({ apiUrl: `http://127.0.0.1:${port}`, serviceKey: KEY });
  try {
    const blocks = await client.promptBlocks("a/b", { q: "where?", agentId: "luna" });
    assert.deepEqual(blocks, { stable: STABLE, volatile: { block: "More...", count: 2 } });
    assert.equal(blocks.stable.version, VERSION);
    assert.equal(await client.stableBlock("a/b", { knownVersion: VERSION }), null);
    assert.deepEqual(await client.stableBlock("a/b", { knownVersion: "cd".repeat(16),
      agentId: "luna" }), STABLE);
    assert.deepEqual(await client.stableBlock("ada"), STABLE);
  } finally {
    await client.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  assert.deepEqual(seen.map((s) => [s.url, s.ifNoneMatch]), [
    ["/users/a%2Fb/prompt-blocks?q=where%3F&agent_id=luna", undefined],
    ["/users/a%2Fb/stable-block", `"${VERSION}"`],
    ["/users/a%2Fb/stable-block?agent_id=luna", `"${"cd".repeat(16)}"`],
    ["/users/ada/stable-block", undefined],
  ]);
  assert.ok(seen.every((s) => s.auth === `Bearer ${KEY}`));
});
