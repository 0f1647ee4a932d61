#!/usr/bin/env node
// Entry point: runs the TypeScript source through tsx (always current), or the compiled dist/cli.js where tsx is not
// installed (a machine that carries only Node and the build output, like the GPU bench machine).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsx = join(root, "node_modules", "tsx", "dist", "esm", "api", "index.mjs");
if (existsSync(tsx) && existsSync(join(root, "src", "cli.ts"))) {
  const { register } = await import(pathToFileURL(tsx).href);
  register();
  await import(pathToFileURL(join(root, "src", "cli.ts")).href);
} else {
  await import(pathToFileURL(join(root, "dist", "cli.js")).href);
}
