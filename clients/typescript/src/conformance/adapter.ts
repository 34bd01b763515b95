/**
 * The conformance adapter (the language-neutral protocol of `python -m conformance
 * --adapter CMD`): one JSON request a line on stdin, one JSON reply a line on
 * stdout, in order; anything else goes to stderr. Speaks both transports.
 *
 *   node clients/typescript/dist/conformance/adapter.js
 */
import { createInterface } from "node:readline";

import { MemfleetError } from "../errors.js";
import { MemfleetHttpClient } from "../http_client.js";
import type { Limits } from "../limits.js";
import { MemfleetRedisClient } from "../redis_client.js";
import type { CommitEvent, HandoverRequest } from "../types.js";

type Request = Record<string, unknown> & { id?: unknown; op?: unknown };
type Client = MemfleetRedisClient | MemfleetHttpClient;

const KINDS = new Set(["InvalidHandover", "HandoverTooLarge", "HandoverBacklogFull",
  "SessionBytesFull", "UserSessionsFull", "HandoverUnavailable"]);

/** A request the adapter cannot read: the BadRequest kind. */
class BadRequest extends Error {}
class Unsupported extends Error {}

function str(request: Request, name: string): string {
  const value = request[name];
  if (typeof value !== "string") throw new BadRequest(`${name} must be a string`);
  return value;
}

function int(request: Request, name: string): number {
  const value = request[name];
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new BadRequest(`${name} must be an integer`);
  }
  return value;
}

function limitsOf(raw: unknown): Partial<Limits> {
  const given = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, number>;
  const names: [string, keyof Limits][] = [
    ["max_message_chars", "maxMessageChars"], ["max_messages", "maxMessages"],
    ["max_id_chars", "maxIdChars"], ["max_message_bytes", "maxMessageBytes"],
    ["max_handover_bytes", "maxHandoverBytes"], ["max_session_bytes", "maxSessionBytes"],
    ["max_user_sessions", "maxUserSessions"],
  ];
  const limits: Partial<Limits> = {};
  for (const [wire, ours] of names) if (typeof given[wire] === "number") limits[ours] = given[wire];
  return limits;
}

function eventJson(event: CommitEvent): Record<string, unknown> {
  return { id: event.id, session: event.session, handover: event.handover,
    older_lists: event.olderLists, outcome: event.outcome, added: event.added,
    updated: event.updated, deleted: event.deleted, at: event.at };
}

export class Adapter {
  private client: Client | undefined;

  async answer(request: Request): Promise<Record<string, unknown>> {
    switch (request.op) {
      case "configure": return await this.configure(request);
      case "handover": return await this.handover(request);
      case "status": {
        const state = await this.need().status(this.session(request));
        return { latest: state.latest, finished: state.finished, older_lists: state.olderLists };
      }
      case "wait": {
        const covered = await this.need().waitForMemory(this.session(request),
          int(request, "handover_id"), { timeoutMs: Number(request["timeout_s"]) * 1000 });
        return { covered };
      }
      case "events": {
        const blockMs = request["block_ms"];
        const events = await this.need().events({
          after: str(request, "after"), count: int(request, "count"),
          ...(typeof blockMs === "number" ? { blockMs } : {}),
        });
        return { events: events.map(eventJson) };
      }
      case "session_tag": {
        const client = this.need();
        return { tag: await client.sessionTag(this.session(request)) };
      }
      case "shutdown": return {};
      default: throw new BadRequest(`unknown op ${JSON.stringify(request.op)}`);
    }
  }

  async close(): Promise<void> {
    if (this.client instanceof MemfleetRedisClient) await this.client.close();
    this.client = undefined;
  }

  private async configure(request: Request): Promise<Record<string, unknown>> {
    await this.close();
    const transport = request["transport"];
    if (transport === "redis") {
      this.client = new MemfleetRedisClient({
        redisUrl: str(request, "redis_url"),
        queueName: str(request, "queue_name"),
        telemetryIdKey: typeof request["telemetry_id_key"] === "string"
          ? request["telemetry_id_key"] : null,
        limits: limitsOf(request["limits"]),
      });
    } else if (transport === "http") {
      this.client = new MemfleetHttpClient({
        apiUrl: str(request, "api_url"), serviceKey: str(request, "service_key"),
      });
    } else {
      throw new Unsupported(`no transport ${JSON.stringify(transport)}`);
    }
    return {};
  }

  private async handover(request: Request): Promise<Record<string, unknown>> {
    const handover: HandoverRequest = {
      userId: request["user_id"] as string, sessionId: request["session_id"] as string,
      messages: request["messages"] as unknown[],
    };
    if (request["agent_id"] !== undefined && request["agent_id"] !== null) {
      handover.agentId = request["agent_id"] as string;
    }
    if (request["listed_at_us"] !== undefined && request["listed_at_us"] !== null) {
      handover.listedAtUs = request["listed_at_us"] as number;
    }
    const result = await this.need().handOver(handover);
    return { handover_id: result.handoverId, job_id: result.jobId, kept_older: result.keptOlder };
  }

  private session(request: Request): { userId: string; sessionId: string } {
    return { userId: str(request, "user_id"), sessionId: str(request, "session_id") };
  }

  private need(): Client {
    if (this.client === undefined) throw new BadRequest("configure first");
    return this.client;
  }
}

export function errorReply(id: unknown, error: unknown): Record<string, unknown> {
  let kind = "BadRequest";
  if (error instanceof MemfleetError && KINDS.has(error.name)) kind = error.name;
  else if (error instanceof MemfleetError) kind = "HandoverUnavailable";
  else if (error instanceof Unsupported) kind = "Unsupported";
  const message = error instanceof Error ? error.message : String(error);
  return { id, ok: false, error: { kind, message } };
}

async function main(): Promise<void> {
  const adapter = new Adapter();
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const write = (reply: Record<string, unknown>): void => {
    process.stdout.write(`${JSON.stringify(reply)}\n`);
  };
  for await (const line of lines) {
    if (line.trim() === "") continue;
    let request: Request;
    try {
      const parsed: unknown = JSON.parse(line);
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        throw new BadRequest("a request is a JSON object");
      }
      request = parsed as Request;
    } catch (error) {
      write(errorReply(null, error instanceof BadRequest ? error
        : new BadRequest("a request is one JSON object a line")));
      continue;
    }
    try {
      write({ id: request.id, ok: true, result: await adapter.answer(request) });
    } catch (error) {
      if (!(error instanceof MemfleetError)) process.stderr.write(`${String(error)}\n`);
      write(errorReply(request.id, error));
    }
    if (request.op === "shutdown") break;
  }
  await adapter.close();
  process.exit(0);
}

await main();
