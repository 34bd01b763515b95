/**
 * The Lua scripts, the very files the Python side runs (worker/protocol/lua/, one
 * copy in the repository), carried inside the compiled client: the build writes
 * them into lua.generated.ts (scripts/embed-lua.mjs), so nothing is read from disk
 * at run time and the ES module and CommonJS builds load alike. enqueue.lua is
 * sent with payload_messages.lua put before it, the two texts concatenated as they
 * are (worker/protocol/scripts.py): the SHA is of the concatenation. Called by
 * EVALSHA, falling back to EVAL on NOSCRIPT (a first call, or a Redis restarted since).
 */
import { createHash } from "node:crypto";

import type { Redis } from "ioredis";

import { LUA_FILES } from "./lua.generated.js";

export class LuaScript {
  readonly text: string;
  readonly sha: string;

  /** The script `name` after the scripts `after` names, in that order, from `files`
   * (file name to text; the embedded copies by default). */
  constructor(readonly name: string, after: readonly string[] = [],
    files: Readonly<Record<string, string>> = LUA_FILES) {
    this.text = [...after, name].map((file) => {
      const text = Object.hasOwn(files, file) ? files[file] : undefined;
      if (text === undefined) throw new Error(`no Lua script ${file} in the build`);
      return text;
    }).join("");
    this.sha = createHash("sha1").update(this.text, "utf8").digest("hex");
  }

  async call(redis: Redis, keys: readonly string[], args: readonly (string | number)[]):
    Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith("NOSCRIPT")) {
        return await redis.eval(this.text, keys.length, ...keys, ...args);
      }
      throw error;
    }
  }
}

let enqueueScript: LuaScript | undefined;

/** enqueue.lua with payload_messages.lua before it. */
export function enqueueLua(): LuaScript {
  enqueueScript ??= new LuaScript("enqueue.lua", ["payload_messages.lua"]);
  return enqueueScript;
}
