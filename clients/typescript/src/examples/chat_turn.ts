/**
 * A chat server's turn with memory in TypeScript, as docs/prompt.md and docs/tools.md
 * describe it (the TypeScript twin of the chat stand-in, api_stub/chat_model.py):
 *
 * - the prompt split: the persona and the stable block first (the provider's cacheable
 *   prefix, kept by the block's version and revalidated with `stableBlock({
 *   knownVersion })`, null on 304), then the turn's volatile block, then the
 *   conversation;
 * - the memory tools: `memoryTools` offered to the model, its tool calls run by a
 *   `MemoryToolExecutor` for the user and the assistant, the results sent back, at
 *   most MAX_TOOL_ROUNDS rounds a turn.
 *
 * Runs one conversation, a turn per message, and prints one JSON line of what it saw:
 *
 *   MEMFLEET_API_URL=... MEMFLEET_SERVICE_KEY=mfk_... MEMFLEET_CHAT_MODEL_URL=https://.../v1 \
 *   node clients/typescript/dist/examples/chat_turn.js USER "message" ["message" ...]
 *
 * The service key needs the `read` and `admin` scopes (the tools save and forget);
 * MEMFLEET_CHAT_MODEL_KEY is the model's key, if it takes one.
 */
import { pathToFileURL } from "node:url";

import {
  MemfleetHttpClient,
  MemoryToolExecutor,
  memoryTools,
} from "../index.js";

export const PERSONA = "You are a helpful assistant. Answer briefly. When the user asks "
  + "about the past, search your memory of them; when they ask you to remember or forget "
  + "something, use the memory tools.";
export const MAX_TOOL_ROUNDS = 3;

export interface ToolCall { id: string; type: string; function: { name: string; arguments: string } }
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

/** The system prompt's cacheable prefix for one user and assistant: the persona and
 * the stable block, kept with the block's version. */
export class PromptPrefix {
  private cached: { version: string; system: string } | undefined;

  constructor(private readonly memory: MemfleetHttpClient,
              private readonly scope: { userId: string; agentId?: string },
              private readonly persona: string = PERSONA) {}

  /** The prefix before a message is known (a session's start, a cache warm-up): the
   * stable block asked with the cached version; null back (304) keeps the cached one. */
  async revalidate(): Promise<{ system: string; reused: boolean }> {
    const fresh = await this.memory.stableBlock(this.scope.userId, {
      agentId: this.scope.agentId, knownVersion: this.cached?.version });
    if (fresh === null && this.cached !== undefined) {
      return { system: this.cached.system, reused: true };
    }
    return { system: this.keep(fresh!.version, fresh!.block), reused: false };
  }

  /** The prefix for the stable block a turn read: the cached bytes while its version
   * is the same (the provider's cache still holds them), rebuilt otherwise. */
  forBlock(version: string, block: string): { system: string; reused: boolean } {
    if (this.cached?.version === version) return { system: this.cached.system, reused: true };
    return { system: this.keep(version, block), reused: false };
  }

  private keep(version: string, block: string): string {
    const system = block ? `${this.persona}\n\n${block}` : this.persona;
    this.cached = { version, system };
    return system;
  }
}

/** The model: an OpenAI-compatible chat-completions endpoint. */
async function complete(modelUrl: string, messages: ChatMessage[],
                        extra: Record<string, unknown>): Promise<ChatMessage> {
  const key = process.env["MEMFLEET_CHAT_MODEL_KEY"];
  const response = await fetch(`${modelUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json",
               ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ model: process.env["MEMFLEET_CHAT_MODEL"] ?? "gpt-4o-mini",
                           messages, ...extra }),
  });
  if (!response.ok) throw new Error(`the chat model answered ${response.status}`);
  const completion = await response.json() as { choices: { message: ChatMessage }[] };
  const message = completion.choices[0]?.message;
  if (message === undefined) throw new Error("the chat model answered no choice");
  return message;
}

export interface TurnResult { answer: string; toolCalls: number; prefixReused: boolean;
  volatileCount: number }

/** One turn: read the split for `said`, build the prompt (prefix first, volatile
 * block after), let the model call the memory tools, answer. `history` is the
 * conversation so far; the turn's user message and answer are appended to it. */
export async function chatTurn(memory: MemfleetHttpClient, prefix: PromptPrefix,
                               tools: MemoryToolExecutor, modelUrl: string,
                               history: ChatMessage[], said: string): Promise<TurnResult> {
  const blocks = await memory.promptBlocks(tools.userId, { q: said, agentId: tools.agentId });
  const { system, reused } = prefix.forBlock(blocks.stable.version, blocks.stable.block);
  const messages: ChatMessage[] = [{ role: "system", content: system }];  // cache boundary
  if (blocks.volatile.block) messages.push({ role: "system", content: blocks.volatile.block });
  messages.push(...history, { role: "user", content: said });
  let toolCalls = 0;
  let answer = "Sorry, I could not finish that.";
  for (let round = 0; round <= MAX_TOOL_ROUNDS; round++) {
    const last = round === MAX_TOOL_ROUNDS;  // then the model must answer in words
    const message = await complete(modelUrl, messages,
      last ? { tools: memoryTools, tool_choice: "none" } : { tools: memoryTools });
    if (last || !message.tool_calls?.length) {
      answer = message.content ?? answer;
      break;
    }
    messages.push(message);
    for (const call of message.tool_calls) {
      const content = call.type === "function"
        ? await tools.run(call.function.name, call.function.arguments)
        : JSON.stringify({ ok: false, error: "unknown_tool",
                           message: "only function tools are offered" });
      toolCalls += call.type === "function" ? 1 : 0;
      messages.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  history.push({ role: "user", content: said }, { role: "assistant", content: answer });
  return { answer, toolCalls, prefixReused: reused, volatileCount: blocks.volatile.count };
}

function setting(name: string): string {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`chat_turn: ${name} is not set\n`);
    process.exit(2);
  }
  return value;
}

async function main(): Promise<void> {
  const [userId = "ts-demo-user", ...said] = process.argv.slice(2);
  const agentId = process.env["MEMFLEET_AGENT_ID"] || undefined;
  const memory = new MemfleetHttpClient({ apiUrl: setting("MEMFLEET_API_URL"),
    serviceKey: setting("MEMFLEET_SERVICE_KEY"), timeoutMs: 10_000 });
  const modelUrl = setting("MEMFLEET_CHAT_MODEL_URL");
  const tools = new MemoryToolExecutor(memory, { userId, agentId });
  const prefix = new PromptPrefix(memory, { userId, agentId });
  const history: ChatMessage[] = [];
  try {
    await prefix.revalidate();  // the session's start: the prefix before any message
    const turns: TurnResult[] = [];
    for (const message of said.length ? said : ["Hello!"]) {
      turns.push(await chatTurn(memory, prefix, tools, modelUrl, history, message));
    }
    // Later, with no message yet: the stable block is asked with its version.
    const { reused } = await prefix.revalidate();
    process.stdout.write(`${JSON.stringify({ user_id: userId, turns,
                                             revalidated_304: reused })}\n`);
  } finally {
    await memory.close();
  }
}

// Run as a program, not when imported (a test or another example reuses chatTurn).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
