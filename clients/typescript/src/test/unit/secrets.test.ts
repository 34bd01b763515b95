/**
 * No client shows a secret it holds (a service key, a Redis password, the telemetry id
 * key) when a chat server logs or serialises it: console.log, util.inspect (at any
 * depth, hidden properties too), JSON.stringify, Object.keys, spreading. Nothing here
 * connects: the Redis clients made from a URL connect lazily.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { format, inspect } from "node:util";

import { MemfleetHttpClient } from "../../http_client.js";
import { MemfleetRedisClient } from "../../redis_client.js";
import { MemfleetShardedRedisClient } from "../../sharded_redis_client.js";

const SERVICE_KEY = "mfk_0123456789ab_secretpartofthekey0123456789abcdef0123456789abcdef012345";
const PASSWORD = "redis-password-never-shown";
const TELEMETRY_KEY = "telemetry-id-key-never-shown";

/** Every way a client commonly ends up in a log line or a JSON document. */
function shows(client: object): Record<string, string> {
  let json: string;
  try {
    json = JSON.stringify(client) ?? "";
  } catch (error) {
    // A circular structure is itself a sign of an internal object left visible.
    json = `JSON.stringify threw: ${String(error)}`;
  }
  return {
    "console.log": format("%o", client) + format("%s", client) + format(client),
    "util.inspect": inspect(client, { depth: Infinity, showHidden: true, getters: true }),
    "JSON.stringify": json,
    "Object.keys": JSON.stringify(Object.keys(client)),
    "spread": inspect({ ...client }, { depth: Infinity, showHidden: true }),
    "own properties": inspect(Object.fromEntries(Reflect.ownKeys(client).map(
      (k) => [String(k), (client as Record<string | symbol, unknown>)[k]])),
      { depth: Infinity, showHidden: true }),
  };
}

function assertHidden(client: object, secrets: string[]): void {
  for (const [how, text] of Object.entries(shows(client))) {
    assert.ok(!text.startsWith("JSON.stringify threw"), `${how}: ${text.slice(0, 200)}`);
    for (const secret of secrets) {
      assert.ok(!text.includes(secret), `${how} shows a secret: ${text.slice(0, 2000)}`);
    }
  }
}

test("the HTTP client never shows its service key", () => {
  const client = new MemfleetHttpClient({ apiUrl: "http://127.0.0.1:9/", serviceKey: SERVICE_KEY });
  assertHidden(client, [SERVICE_KEY, "secretpartofthekey"]);
  // What it is meant to show still shows.
  assert.equal(client.apiUrl, "http://127.0.0.1:9");
  assert.match(inspect(client), /apiUrl/);
});

test("the HTTP client never shows a user's token, given or minted", () => {
  const token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.tokensignaturenevershown";
  assertHidden(new MemfleetHttpClient({ apiUrl: "http://127.0.0.1:9", userToken: token }),
    [token, "tokensignaturenevershown"]);
  assertHidden(new MemfleetHttpClient({ apiUrl: "http://127.0.0.1:9", userToken: () => token }),
    [token, "tokensignaturenevershown"]);
});

test("the Redis client never shows the password of its URL or the telemetry id key", async () => {
  const client = new MemfleetRedisClient({
    redisUrl: `redis://:${PASSWORD}@127.0.0.1:9/0`, telemetryIdKey: TELEMETRY_KEY });
  try {
    assertHidden(client, [PASSWORD, TELEMETRY_KEY]);
    assert.equal(client.sessionTag({ userId: "u", sessionId: "s" })?.length, 16);
  } finally {
    await client.close();
  }
});

test("the sharded Redis client never shows its shards' passwords or the telemetry id key", async () => {
  const client = new MemfleetShardedRedisClient({
    shards: [["a", `redis://:${PASSWORD}-a@127.0.0.1:9/0`],
      ["b", `redis://user:${PASSWORD}-b@127.0.0.1:9/1`]],
    telemetryIdKey: TELEMETRY_KEY });
  try {
    assertHidden(client, [PASSWORD, TELEMETRY_KEY]);
    assert.deepEqual(client.names, ["a", "b"]);
  } finally {
    await client.close();
  }
});
