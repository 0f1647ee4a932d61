// A real browser for the web UI's tests and bench: Debian's headless Chromium (scripts/setup.sh installs it)
// driven by playwright-core, which never downloads a browser of its own. This machine has no outside network, so
// every background service of Chromium that would phone home is switched off, and each launch gets a fresh
// profile. Pages collect their console errors and uncaught exceptions: a page test asserts there are none.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = process.env.RLLOOP_CHROMIUM ?? "/usr/bin/chromium";

export interface TestBrowser {
  context: BrowserContext;
  /** a new page whose console errors and page errors are collected in `errors` */
  page(viewport?: { width: number; height: number }): Promise<{ page: Page; errors: string[] }>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: run scripts/setup.sh (apt-get install chromium), or set RLLOOP_CHROMIUM`);
  const profile = mkdtempSync(join(tmpdir(), "rlloop-chromium-"));
  // a persistent context is how playwright takes a profile folder (it refuses --user-data-dir among the args)
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  return {
    context,
    async page(viewport = { width: 1400, height: 1000 }) {
      const page = await context.newPage();
      await page.setViewportSize(viewport);
      const errors: string[] = [];
      page.on("console", (msg) => {
        if (msg.type() === "error") errors.push(`console: ${msg.text()}`);
      });
      page.on("pageerror", (err) => errors.push(`page error: ${err.message}`));
      return { page, errors };
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
