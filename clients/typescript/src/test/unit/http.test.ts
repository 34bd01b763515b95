/** The memory API's answers as errors naming the call and the API, the client's checks
 * before any request, and the event stream's format. */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AccessDenied,
  ConfigurationError,
  WriteConflict,
  HandoverBacklogFull,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  InvalidRequest,
  LongPollRefused,
  LongPollsFull,
  MemfleetError,
  MemoryApiUnavailable,
  NotFound,
  RateLimited,
  SessionBytesFull,
  TooManyLongPolls,
  UserSessionsFull,
} from "../../errors.js";
import { errorFor, pauseMs } from "../../http/answers.js";
import { SseParser } from "../../http/sse.js";
import { causeText, HttpTransport, originOf } from "../../http/transport.js";
import { MemfleetHttpClient } from "../../http_client.js";

const KEY = `mfk_${"0".repeat(12)}_${"a".repeat(64)}`;

test("the error member names the class; Retry-After and the status are kept", () => {
  const cases: [number, string, new (...a: never[]) => Error][] = [
    [400, "InvalidHandover", InvalidHandover], [413, "HandoverTooLarge", HandoverTooLarge],
    [429, "HandoverBacklogFull", HandoverBacklogFull], [429, "SessionBytesFull", SessionBytesFull],
    [429, "UserSessionsFull", UserSessionsFull], [503, "HandoverUnavailable", HandoverUnavailable],
    [429, "TooManyLongPolls", TooManyLongPolls], [503, "LongPollsFull", LongPollsFull],
  ];
  for (const [status, name, cls] of cases) {
    const error = errorFor(status, { detail: "why", error: name }, "3", true);
    assert.ok(error instanceof cls, name);
    assert.equal(error.name, name);
    assert.equal(error.message, "why");
    assert.equal(error.status, status);
    assert.equal(error.retryAfterS, 3);
  }
});

test("a refused wait or stream is transient and not a hand-over refusal", () => {
  for (const [status, name] of [[429, "TooManyLongPolls"], [503, "LongPollsFull"]] as const) {
    const error = errorFor(status, { detail: "retry later", error: name }, "5");
    assert.ok(error instanceof LongPollRefused, name);
    assert.ok(error.transient, name);
    // The hand-over was kept: a catch of HandoverUnavailable ("send it again") skips it.
    assert.ok(!(error instanceof HandoverUnavailable), name);
    assert.ok(!(error instanceof HandoverBacklogFull), name);
  }
});

test("the pause before asking again is Retry-After, spread by at most a tenth", () => {
  for (let i = 0; i < 100; i += 1) {
    const ms = pauseMs(errorFor(429, { error: "TooManyLongPolls" }, "5"), 1);
    assert.ok(ms >= 5_000 && ms <= 5_500, String(ms));
  }
  assert.equal(pauseMs(errorFor(503, { error: "LongPollsFull" }, null), 700), 700);
});

test("without an error member the status decides: the hand-over's errors on its route", () => {
  assert.ok(errorFor(401, { detail: "no" }, null) instanceof AccessDenied);
  assert.ok(errorFor(403, { detail: "no" }, null) instanceof AccessDenied);
  assert.ok(errorFor(413, undefined, null, true) instanceof HandoverTooLarge);
  assert.ok(errorFor(429, undefined, null, true) instanceof HandoverBacklogFull);
  assert.ok(errorFor(502, undefined, null, true) instanceof HandoverUnavailable);
  const shape = errorFor(422, { detail: [{ loc: ["body", "messages"], msg: "Field required" }] },
    null, true);
  assert.ok(shape instanceof InvalidHandover);
  assert.equal(shape.message, "body.messages: Field required");
  assert.ok(errorFor(400, { detail: "x", error: "toString" }, null) instanceof MemfleetError);
});

test("on the other routes: NotFound, WriteConflict, InvalidRequest, RateLimited, MemoryApiUnavailable",
  () => {
    const cases: [number, new (...a: never[]) => MemfleetError, boolean][] = [
      [400, InvalidRequest, false], [422, InvalidRequest, false], [413, InvalidRequest, false],
      [404, NotFound, false], [409, WriteConflict, false], [429, RateLimited, true],
      [500, MemoryApiUnavailable, true], [503, MemoryApiUnavailable, true],
      [401, AccessDenied, false], [403, AccessDenied, false],
    ];
    for (const [status, cls, transient] of cases) {
      const error = errorFor(status, { detail: "why" }, "7", false, "GET x: ");
      assert.ok(error instanceof cls, `${status}: ${error.name}`);
      assert.equal(error.transient, transient, String(status));
      assert.equal(error.message, "GET x: why");
      assert.equal(error.retryAfterS, 7);
      // A read or an admin call is never taken for a hand-over's refusal.
      assert.ok(!(error instanceof HandoverUnavailable) && !(error instanceof InvalidHandover));
    }
    // The API's own name wins: a status read while Redis is away.
    assert.ok(errorFor(503, { detail: "x", error: "HandoverUnavailable" }, "1")
      instanceof HandoverUnavailable);
  });

test("an API URL without a scheme, or with credentials, is refused at construction", () => {
  for (const [url, why] of [["127.0.0.1:8088", /has no scheme/], ["localhost:8088", /has no scheme/],
    ["memory.internal", /has no scheme/], ["ftp://h:1", /scheme ftp:/], ["", /is missing/],
    ["http://user:hunter2@h:1", /user name or password/], ["http://h:1/?a=1", /query/]] as const) {
    assert.throws(() => new MemfleetHttpClient({ apiUrl: url, serviceKey: KEY }),
      (e: Error) => e instanceof ConfigurationError && why.test(e.message)
        && !e.message.includes("hunter2"), url);
  }
  assert.throws(() => new MemfleetHttpClient({ apiUrl: "http://h:1" } as never),
    (e: Error) => e instanceof ConfigurationError && /serviceKey or a userToken/.test(e.message));
  assert.throws(() => new MemfleetHttpClient({ apiUrl: "http://h:1", serviceKey: KEY,
    userToken: "t" }), /not both/);
});

test("the origin names scheme, host and port; a path prefix is kept", () => {
  const client = new MemfleetHttpClient({ apiUrl: "http://memory.internal/api/", serviceKey: KEY });
  assert.equal(client.origin, "http://memory.internal:80");
  assert.equal(client.apiUrl, "http://memory.internal/api");
  assert.equal(originOf(new URL("https://[::1]:8443/x")), "https://[::1]:8443");
  assert.equal(originOf(new URL("https://h")), "https://h:443");
});

test("the cause's own words: the innermost message, each of an aggregate's", () => {
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"),
    { code: "ECONNREFUSED" });
  assert.equal(causeText(new TypeError("fetch failed", { cause: refused })),
    "connect ECONNREFUSED 127.0.0.1:9");
  const both = new AggregateError([new Error("connect ECONNREFUSED ::1:9"), refused]);
  assert.equal(causeText(new TypeError("fetch failed", { cause: both })),
    "connect ECONNREFUSED ::1:9; connect ECONNREFUSED 127.0.0.1:9");
  assert.equal(causeText(Object.assign(new Error(""), { code: "EPIPE" })), "EPIPE");
});

test("a refusal names the API and the call; the hand-over's own refusals read as in Redis mode",
  () => {
    const transport = new HttpTransport("http://127.0.0.1:8088", KEY, 1000);
    const read = transport.refusal({ operation: "GET /users/{user}/facts" }, 503,
      { detail: "the memory store is unavailable; retry later" }, "1");
    assert.ok(read instanceof MemoryApiUnavailable);
    assert.equal(read.message, "the memory API at http://127.0.0.1:8088 answered "
      + "GET /users/{user}/facts with 503: the memory store is unavailable; retry later");
    assert.equal(read.operation, "GET /users/{user}/facts");
    assert.equal(read.origin, "http://127.0.0.1:8088");
    const bad = transport.refusal({ operation: "POST h", handover: true }, 400,
      { detail: "message 0: content is empty", error: "InvalidHandover" }, null);
    assert.equal(bad.message, "message 0: content is empty");
    const down = transport.unavailable({ operation: "GET /users/{user}/facts" },
      new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED 127.0.0.1:8088") }));
    assert.ok(down instanceof MemoryApiUnavailable && down.transient);
    assert.equal(down.message, "the memory API at http://127.0.0.1:8088 did not answer "
      + "GET /users/{user}/facts: connect ECONNREFUSED 127.0.0.1:8088");
    assert.ok(!down.message.includes(KEY));
    const handover = transport.unavailable({ operation: "POST h", handover: true }, new Error("x"));
    assert.ok(handover instanceof HandoverUnavailable);
  });

test("ids that would change the path are refused before any request", async () => {
  const client = new MemfleetHttpClient({ apiUrl: "http://127.0.0.1:9", serviceKey: KEY });
  await assert.rejects(client.facts(""), InvalidRequest);
  await assert.rejects(client.knownFacts("a\u0000b"), InvalidRequest);
  for (const id of [0, -1, 1.5, Number.NaN]) {
    await assert.rejects(client.removeFact("ada", id), InvalidRequest);
    await assert.rejects(client.acceptProposal("ada", id), InvalidRequest);
  }
});

test("a token function's own failure is thrown as it is, not as the API's", async () => {
  const signer = new Error("the signer is away");
  const client = new MemfleetHttpClient({ apiUrl: "http://127.0.0.1:9",
    userToken: () => { throw signer; } });
  await assert.rejects(client.facts("ada"), (e: unknown) => e === signer);
  await assert.rejects(client.events({ after: "0" }), (e: unknown) => e === signer);
  const blank = new MemfleetHttpClient({ apiUrl: "http://127.0.0.1:9", userToken: () => "" });
  await assert.rejects(blank.getConsent("ada"), ConfigurationError);
});

test("after close() every call is refused at once, naming the call", async () => {
  const client = new MemfleetHttpClient({ apiUrl: "http://127.0.0.1:9", serviceKey: KEY });
  await client.close();
  await assert.rejects(client.getConsent("ada"), (e: MemfleetError) =>
    /GET \/users\/\{user\}\/consent at http:\/\/127.0.0.1:9: the client was closed/.test(e.message));
  assert.deepEqual(await client.events({ after: "0" }), []);
});

test("events come out whole from any chunks, CRLF or LF, comments skipped", () => {
  const text = ": keep-alive\r\n\r\nid: 1-0\r\nevent: commit\r\ndata: {\"a\":1}\r\n\r\n"
    + "id: 2-0\nevent: commit\ndata: {\"a\":\ndata: 2}\n\n: keep-alive\n\n";
  for (const size of [1, 2, 3, 7, text.length]) {
    const parser = new SseParser();
    const events = [];
    for (let i = 0; i < text.length; i += size) events.push(...parser.push(text.slice(i, i + size)));
    assert.deepEqual(events, [
      { id: "1-0", event: "commit", data: "{\"a\":1}" },
      { id: "2-0", event: "commit", data: "{\"a\":\n2}" },
    ], `chunks of ${size}`);
    assert.equal(parser.lastEventId, "2-0");
  }
});

test("an event without an id keeps the last one; a field without a space reads too", () => {
  const parser = new SseParser();
  const events = parser.push("id:5-1\ndata:x\n\ndata: y\n\n");
  assert.deepEqual(events.map((e) => [e.id, e.event, e.data]),
    [["5-1", "message", "x"], ["5-1", "message", "y"]]);
});
