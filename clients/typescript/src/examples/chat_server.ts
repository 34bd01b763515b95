/**
 * A minimal chat server's memory loop in TypeScript, end to end: after each
 * answered turn, hand the session over (once through Redis, once through the
 * memory API), wait until the turn's facts are stored, and read the known-facts
 * block back over HTTP for the next prompt. Prints one JSON line of what it saw.
 *
 *   MEMFLEET_REDIS_URL=... MEMFLEET_QUEUE_NAME=... MEMFLEET_API_URL=...
 *   MEMFLEET_SERVICE_KEY=mfk_... node clients/typescript/dist/examples/chat_server.js USER
 *
 * The service key needs the `handover` and `read` scopes.
 */
import {
  HandoverUnavailable,
  type Message,
  MemfleetHttpClient,
  MemfleetRedisClient,
} from "../index.js";

function setting(name: string): string {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`chat_server: ${name} is not set\n`);
    process.exit(2);
  }
  return value;
}

/** The chat product's own answer; memory is off its path. */
function answer(said: string): string {
  return `Noted: ${said.length} characters.`;
}

async function main(): Promise<void> {
  const userId = process.argv[2] ?? "ts-demo-user";
  const redis = new MemfleetRedisClient({
    redisUrl: setting("MEMFLEET_REDIS_URL"), queueName: process.env["MEMFLEET_QUEUE_NAME"],
  });
  const http = new MemfleetHttpClient({
    apiUrl: setting("MEMFLEET_API_URL"), serviceKey: setting("MEMFLEET_SERVICE_KEY"),
    timeoutMs: 5000,
  });
  const seen: Record<string, unknown> = { user_id: userId };
  try {
    // Session 1, through Redis: two turns; the second hand-over carries the whole list.
    const one = { userId, sessionId: "redis-1" };
    const history: Message[] = [];
    let last = 0;
    for (const said of ["I live in Lisbon.", "I use TypeScript."]) {
      history.push({ role: "user", content: said }, { role: "assistant", content: answer(said) });
      try {
        last = (await redis.handOver({ ...one, messages: history })).handoverId;
      } catch (error) {
        if (!(error instanceof HandoverUnavailable)) throw error;
        // The turn goes on without memory: hand the session over at the next turn.
      }
    }
    seen["redis_covered"] = await redis.waitForMemory(one, last, { timeoutMs: 60_000 });

    // Session 2, through the memory API.
    const two = { userId, sessionId: "http-1" };
    const said = "I work at Initech.";
    const handedOver = await http.handOver({ ...two, messages: [
      { role: "user", content: said }, { role: "assistant", content: answer(said) }] });
    // The memory API's wait route: a long poll until a commit covers the hand-over.
    seen["http_covered"] = await http.waitForMemory(two, handedOver.handoverId,
      { timeoutMs: 60_000 });

    // The next prompt's memory, read over HTTP.
    const facts = await http.knownFacts(userId);
    seen["count"] = facts.count;
    seen["block"] = facts.block;
  } finally {
    await redis.close();
    await http.close();
  }
  process.stdout.write(`${JSON.stringify(seen)}\n`);
}

await main();
