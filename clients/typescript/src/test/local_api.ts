/** A local HTTP server standing in for the memory API in the client's unit tests: each
 * request is recorded (method, url, JSON body) and answered by the test's own function,
 * so a test fixes the routes and bodies the client sends and how it reads each answer. */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

import type { MemfleetError } from "../errors.js";
import { MemfleetHttpClient } from "../http_client.js";

export const SERVICE_KEY = `mfk_${"0".repeat(12)}_${"a".repeat(64)}`;

/** A request as the server saw it: method, url, and its JSON body (undefined if none). */
export type SeenRequest = [string, string, unknown];

export interface LocalApi {
  client: MemfleetHttpClient;
  seen: SeenRequest[];
  stop: () => Promise<void>;
}

/** Serves `answer(method, url, body)` -> [status, JSON body]; a 429 carries Retry-After: 7. */
export async function serveLocalApi(
  answer: (method: string, url: string, body: unknown) => [number, unknown],
): Promise<LocalApi> {
  const seen: SeenRequest[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let text = "";
    request.on("data", (chunk: Buffer) => { text += chunk.toString("utf-8"); });
    request.on("end", () => {
      const body = text === "" ? undefined : JSON.parse(text) as unknown;
      seen.push([request.method ?? "", request.url ?? "", body]);
      const [status, json] = answer(request.method ?? "", request.url ?? "", body);
      response.writeHead(status, { "Content-Type": "application/json",
        ...(status === 429 ? { "Retry-After": "7" } : {}) });
      response.end(JSON.stringify(json));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const client = new MemfleetHttpClient({ apiUrl: `http://127.0.0.1:${port}`,
    serviceKey: SERVICE_KEY });
  return { client, seen, stop: async () => {
    await client.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  } };
}

/** An `assert.rejects` check: the error is `Class` with `status`, naming `operation`. */
export function refusedAs(Class: new (...args: never[]) => MemfleetError, status: number,
  operation: string): (error: MemfleetError) => boolean {
  return (error: MemfleetError) => {
    assert.ok(error instanceof Class, `${error.name}: ${error.message}`);
    assert.equal(error.status, status);
    assert.equal(error.operation, operation);
    assert.match(error.message, new RegExp(`answered ${operation.replace(/[{}/]/g, "\\$&")} `
      + `with ${status}: `));
    return true;
  };
}
