// `npm pack` (prepack): copy the Lua the client runs from the repository into the
// package's lua/ folder, so a tarball carries it; postpack (--remove) deletes the
// copy again: the repository keeps one copy, worker/protocol/lua/.
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");
const SOURCE = join(PACKAGE, "..", "..", "worker", "protocol", "lua");
const TARGET = join(PACKAGE, "lua");
const FILES = ["payload_messages.lua", "enqueue.lua"];

if (process.argv.includes("--remove")) {
  rmSync(TARGET, { recursive: true, force: true });
} else {
  mkdirSync(TARGET, { recursive: true });
  for (const file of FILES) copyFileSync(join(SOURCE, file), join(TARGET, file));
}
