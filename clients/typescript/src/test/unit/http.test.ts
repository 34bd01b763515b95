/** The memory API's answers as errors, and the event stream's format. */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AccessDenied,
  HandoverBacklogFull,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  LongPollRefused,
  LongPollsFull,
  MemfleetError,
  SessionBytesFull,
  TooManyLongPolls,
  UserSessionsFull,
} from "../../errors.js";
import { errorFor, pauseMs } from "../../http/answers.js";
import { SseParser } from "../../http/sse.js";

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

test("without an error member the status decides", () => {
  assert.ok(errorFor(401, { detail: "no" }, null) instanceof AccessDenied);
  assert.ok(errorFor(403, { detail: "no" }, null) instanceof AccessDenied);
  assert.ok(errorFor(413, undefined, null) instanceof HandoverTooLarge);
  assert.ok(errorFor(429, undefined, null) instanceof HandoverBacklogFull);
  assert.ok(errorFor(502, undefined, null) instanceof HandoverUnavailable);
  const shape = errorFor(422, { detail: [{ loc: ["body", "messages"], msg: "Field required" }] },
    null, true);
  assert.ok(shape instanceof InvalidHandover);
  assert.equal(shape.message, "body.messages: Field required");
  const read = errorFor(422, { detail: "bad q" }, null, false);
  assert.ok(read instanceof MemfleetError && !(read instanceof InvalidHandover));
  assert.ok(errorFor(400, { detail: "x", error: "toString" }, null) instanceof MemfleetError);
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
