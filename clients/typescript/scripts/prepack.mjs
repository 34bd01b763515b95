// `npm pack` (prepack): build the package from a fresh clone too. Without the package's
// own dev dependencies (typescript, @types/node) in node_modules, `npm ci` installs them
// from package-lock.json first (scripts off); then the build. Nothing it writes is
// tracked by git: node_modules/, dist/ and the embedded Lua are ignored.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");

function run(command, args) {
  const done = spawnSync(command, args, { cwd: PACKAGE, stdio: ["ignore", 2, 2] });
  if (done.status !== 0) {
    console.error(`prepack: ${[command, ...args].join(" ")} failed`);
    process.exit(done.status ?? 1);
  }
}

const needed = ["typescript/bin/tsc", "@types/node/package.json", "ioredis/package.json"];
if (!needed.every((path) => existsSync(join(PACKAGE, "node_modules", path)))) {
  // The npm running this pack (npm_execpath), else the one on the PATH.
  const npm = process.env.npm_execpath;
  const [command, head] = npm ? [process.execPath, [npm]] : ["npm", []];
  run(command, [...head, "ci", "--ignore-scripts", "--include=dev", "--no-audit", "--no-fund",
    "--prefer-offline"]);
}
run(process.execPath, [join(PACKAGE, "scripts", "build.mjs")]);
