/** Where the tests find the repository around the package (clients/typescript/dist/test/ -> ../../../..). */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

export function readFixture<T>(name: string): T {
  return JSON.parse(readFileSync(join(REPO_ROOT, "tests", "fixtures", "protocol", name), "utf8")) as T;
}
