// Shared by the Node scripts the Rust tests run (tests/web_client.rs, tests/web_viewer.rs,
// tests/web_webtransport.rs, tests/web_webrtc.rs).
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Runs `run(page, context)` in a fresh headless Chromium (GSRELAY_CHROMIUM, driven by the
 * playwright-core in GSRELAY_NODE_TOOLS) with its own profile, counting an exception as a
 * failure of `tally`; the browser and profile are gone when it resolves. QUIC stays on:
 * WebTransport needs it.
 */
export async function withChromium(tally, run) {
  const env = process.env;
  const { chromium } = createRequire(join(env.GSRELAY_NODE_TOOLS, "node_modules", "/"))("playwright-core");
  const userDataDir = mkdtempSync(join(tmpdir(), "gsrelay-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: env.GSRELAY_CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
    viewport: { width: 1360, height: 760 },
  });
  try {
    await run(await context.newPage(), context);
  } catch (e) {
    tally.check(false, `unexpected: ${e.stack}`);
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
}

/** JSON.parse keeping integers beyond 2^53 exact (as BigInt). */
export function parseJson(text) {
  // Quote long integer literals outside strings, then turn them back into BigInt.
  let out = "";
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === "\\") out += text[++i];
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    const m = /^-?\d+(?![.eE\d])/.exec(text.slice(i, i + 32));
    const starts = (c === "-" || /\d/.test(c)) && !/[\d.eE+-]/.test(text[i - 1] ?? "");
    if (m && starts && m[0].replace("-", "").length >= 16) {
      out += `"__big__${m[0]}"`;
      i += m[0].length - 1;
      continue;
    }
    out += c;
  }
  return JSON.parse(out, (_, v) =>
    typeof v === "string" && v.startsWith("__big__") ? BigInt(v.slice(7)) : v,
  );
}

/** Counts checks and prints the closing line the Rust test reads. */
export class Tally {
  constructor() {
    this.passed = 0;
    this.failures = [];
  }
  check(ok, what) {
    if (ok) this.passed++;
    else this.failures.push(what);
  }
  finish() {
    for (const f of this.failures.slice(0, 40)) console.error(`FAIL ${f}`);
    console.log(`${this.passed} passed, ${this.failures.length} failed`);
    process.exit(this.failures.length ? 1 : 0);
  }
}
