#!/usr/bin/env node
// Entry point: the compiled CLI (dist/, built by scripts/setup.sh or `npm run build:ts`). Development runs the sources
// without a build: `npx tsx src/cli/main.ts <command>`.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const main = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "cli", "main.js");
if (!existsSync(main)) {
  process.stderr.write(`rlloop: ${main} is missing: build it with \`npm run build:ts\` (scripts/setup.sh does)\n`);
  process.exit(1);
}
await import(pathToFileURL(main).href);
