// `npm run build` (and `make typescript`): the Lua embedded (embed-lua.mjs), the memory
// tools' definitions too (embed-tools.mjs), then two
// compilations of src/: dist/ as ES modules (the whole tree: the client, its tests and
// tools), dist/cjs/ as CommonJS (the client alone, tsconfig.cjs.json) with a package.json
// there saying so. package.json's exports map sends `import` to one and `require` to
// the other.
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");

function run(args) {
  const done = spawnSync(process.execPath, args, { cwd: PACKAGE, stdio: "inherit" });
  if (done.status !== 0) process.exit(done.status ?? 1);
}

let tsc;
try {
  tsc = createRequire(join(PACKAGE, "package.json")).resolve("typescript/bin/tsc");
} catch {
  console.error("build: typescript is not installed here: run `npm ci` in clients/typescript"
    + " (npm pack does so itself)");
  process.exit(1);
}
run([join(PACKAGE, "scripts", "embed-lua.mjs")]);
run([join(PACKAGE, "scripts", "embed-tools.mjs")]);
run([tsc, "-p", "tsconfig.json"]);
run([tsc, "-p", "tsconfig.cjs.json"]);
mkdirSync(join(PACKAGE, "dist", "cjs"), { recursive: true });
writeFileSync(join(PACKAGE, "dist", "cjs", "package.json"), '{"type": "commonjs"}\n');
