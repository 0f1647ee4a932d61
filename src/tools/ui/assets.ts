// The page's built files (index.html and its hashed scripts and styles, bundled by build.ts into dist/ui), read
// into memory once: the server answers only names from this listing, so no request path ever reaches the disk.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, extname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

/** dist/ui of the package, from this file in src/tools/ui or dist/tools/ui. */
export const UI_ASSETS_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "dist", "ui");

export interface UiAsset {
  body: Buffer;
  type: string;
  /** content-hashed name: cacheable forever */
  immutable: boolean;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".map": "application/json",
};

export class UiAssetsMissingError extends Error {
  override readonly name = "UiAssetsMissingError";
}

/** Every file under `dir` by its URL path (`index.html`, `assets/index-3f2a.js`). */
export function loadUiAssets(dir: string = UI_ASSETS_DIR): Map<string, UiAsset> {
  if (!existsSync(join(dir, "index.html"))) {
    throw new UiAssetsMissingError(`the web UI is not built (no ${join(dir, "index.html")}): run \`npm run build:ui\``);
  }
  const assets = new Map<string, UiAsset>();
  const walk = (folder: string) => {
    for (const name of readdirSync(folder)) {
      const file = join(folder, name);
      if (statSync(file).isDirectory()) walk(file);
      else {
        const path = relative(dir, file).split(sep).join("/");
        assets.set(path, { body: readFileSync(file), type: TYPES[extname(name)] ?? "application/octet-stream", immutable: path.startsWith("assets/") });
      }
    }
  };
  walk(dir);
  return assets;
}
