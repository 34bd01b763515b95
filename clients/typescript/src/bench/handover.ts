/**
 * The hand-over's latency from TypeScript, Redis mode: N hand-overs, C at a time,
 * each of its own user and session (nothing is refused for a budget), each timed
 * with performance.now() around handOver. Prints one JSON line:
 * {"latencies_ms": [...]}.
 *
 *   node clients/typescript/dist/bench/handover.js --redis-url URL --requests N --concurrency C
 *     [--warmup W (50; untimed calls first)] [--messages M] [--queue-name Q]
 *     [--queue-name Q] [--messages M]
 */
import { parseArgs } from "node:util";

import { MemfleetRedisClient } from "../redis_client.js";

function fail(message: string): never {
  process.stderr.write(`bench/handover: ${message}\n`);
  process.exit(2);
}

function positive(value: string | undefined, name: string, fallback?: number): number {
  if (value === undefined) {
    if (fallback === undefined) fail(`--${name} is required`);
    return fallback;
  }
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1) fail(`--${name} must be a whole number >= 1`);
  return number;
}

async function main(): Promise<void> {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({ options: {
      "redis-url": { type: "string" }, requests: { type: "string" },
      concurrency: { type: "string" }, "queue-name": { type: "string" },
      messages: { type: "string" }, warmup: { type: "string" },
    } }) as { values: Record<string, string | undefined> });
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  const redisUrl = values["redis-url"] ?? fail("--redis-url is required");
  const requests = positive(values["requests"], "requests");
  const concurrency = positive(values["concurrency"], "concurrency");
  const turns = positive(values["messages"], "messages", 2);
  const warmup = values["warmup"] === "0" ? 0 : positive(values["warmup"], "warmup", 50);
  const client = new MemfleetRedisClient({
    redisUrl, queueName: values["queue-name"] ?? "memfleet:bench:ts",
  });
  const run = `${process.pid}-${Date.now()}`;
  const messages = Array.from({ length: turns }, (_, i) => ({
    role: i % 2 === 0 ? "user" : "assistant", content: `turn ${i}: I live in Oslo and use Rust.`,
  }));
  const latencies: number[] = new Array(requests);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < requests) {
      const index = next++;
      const started = performance.now();
      await client.handOver({ userId: `bench-${run}-${index}`, sessionId: "1", messages });
      latencies[index] = performance.now() - started;
    }
  };
  await client.redisClock(); // connect before the clock starts
  // Untimed calls first, as the Python bench client makes (bench/lib/handover_client.py
  // --warmup): a chat server is a long-running process, its code already compiled by V8
  // and the script already loaded in Redis; the figure is of that steady state.
  for (let i = 0; i < warmup; i++) {
    await client.handOver({ userId: `bench-${run}-warmup-${i}`, sessionId: "1", messages });
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, requests) }, lane));
  await client.close();
  process.stdout.write(`${JSON.stringify({ latencies_ms: latencies })}\n`);
}

await main();
