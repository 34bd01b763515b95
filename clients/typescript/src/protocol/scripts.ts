/**
 * The Lua scripts, the very files the Python side runs (worker/protocol/lua/),
 * one copy in the repository: read at run time from the package's `lua/`
 * folder when `npm pack` copied them there (scripts/copy-lua.mjs), else from the
 * repository this package sits in. enqueue.lua is sent with payload_messages.lua
 * put before it, the two texts concatenated as they are (worker/protocol/scripts.py):
 * the SHA is of the concatenation. Called by EVALSHA, falling back to EVAL on
 * NOSCRIPT (a first call, or a Redis restarted since).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { Redis } from "ioredis";

// dist/protocol/scripts.js -> the package root (clients/typescript/), two levels below the repository root.
const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const LUA_DIRS = [
  join(PACKAGE_ROOT, "lua"),
  join(PACKAGE_ROOT, "..", "..", "worker", "protocol", "lua"),
];

export function luaDir(): string {
  const found = LUA_DIRS.find((dir) => existsSync(join(dir, "enqueue.lua")));
  if (found === undefined) {
    throw new Error(`memfleet's Lua scripts are in none of: ${LUA_DIRS.join(", ")}`);
  }
  return found;
}

export class LuaScript {
  readonly text: string;
  readonly sha: string;

  /** The script `filename` after the files `after` names, in that order. */
  constructor(readonly name: string, after: readonly string[] = [], dir: string = luaDir()) {
    this.text = [...after, name].map((file) => readFileSync(join(dir, file), "utf8")).join("");
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

/** enqueue.lua with payload_messages.lua before it, read once. */
export function enqueueLua(): LuaScript {
  enqueueScript ??= new LuaScript("enqueue.lua", ["payload_messages.lua"]);
  return enqueueScript;
}
