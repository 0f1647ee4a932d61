// Bundles the page (page/index.html, its TypeScript and CSS, uPlot from node_modules) into dist/ui with Vite, the
// bundler the repository already has (vitest's): one hashed script and one stylesheet, no CDN, nothing fetched at
// run time. `npm run build:ui`; scripts/setup.sh runs it. Run as a script or imported (the browser tests build
// the page they test).
import { rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { UI_ASSETS_DIR } from "./assets.js";

const PAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "page");

export async function buildUi(outDir: string = UI_ASSETS_DIR): Promise<void> {
  const { build } = await import("vite");
  rmSync(outDir, { recursive: true, force: true });
  await build({
    configFile: false,
    root: PAGE_DIR,
    // relative URLs: the same files are served at / by `rlloop ui` and under a path by the daemon
    base: "./",
    logLevel: "warn",
    publicDir: false,
    build: { outDir: resolve(outDir), emptyOutDir: true, target: "es2022", sourcemap: false, reportCompressedSize: false },
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const started = performance.now();
  await buildUi();
  process.stdout.write(`web UI built into ${UI_ASSETS_DIR} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
