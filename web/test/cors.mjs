// The client module and the API used by a page of another origin, in headless Chromium
// (driven by tests/web_cors.rs). Environment: GSRELAY_PAGE_PORT (a free loopback port for
// the page's own server), GSRELAY_OPEN_BASE and GSRELAY_OPEN_TOKEN (a relay with the
// default policy, any origin; token for room "dev"), GSRELAY_LISTED_BASE and
// GSRELAY_LISTED_TOKEN (a relay allowing only http://127.0.0.1:<page port>),
// GSRELAY_CHROMIUM, GSRELAY_NODE_TOOLS. The page is served from 127.0.0.1:<page port> and
// from localhost:<page port>, two origins, neither of them a relay's. Prints
// "N passed, M failed".
import { createServer } from "node:http";
import { Tally, withChromium } from "./support.mjs";

const env = process.env;
const port = Number(env.GSRELAY_PAGE_PORT);
const open = { base: env.GSRELAY_OPEN_BASE, token: env.GSRELAY_OPEN_TOKEN };
const listed = { base: env.GSRELAY_LISTED_BASE, token: env.GSRELAY_LISTED_TOKEN };
const t = new Tally();

// The game's page: an empty document, its origin all that matters.
const pages = createServer((_, res) => {
  res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
  res.end("<!doctype html><title>game</title>");
});
await new Promise((ready) => pages.listen(port, "127.0.0.1", ready));
await withChromium(t, run);
pages.close();
t.finish();

async function run(page) {
  // localhost:<port>: allowed by the open relay only.
  await page.goto(`http://localhost:${port}/`);
  expectWorks(await page.evaluate(useRelay, open), "open relay from localhost");
  const refused = await page.evaluate(useRelay, listed);
  t.check(refused.imported === false, `listed relay refuses the import from localhost: ${JSON.stringify(refused)}`);
  const fetched = await page.evaluate(joinByFetch, listed);
  t.check(fetched === "TypeError", `listed relay refuses a join from localhost: ${fetched}`);

  // 127.0.0.1:<port>: allowed by both.
  await page.goto(`http://127.0.0.1:${port}/`);
  expectWorks(await page.evaluate(useRelay, open), "open relay from 127.0.0.1");
  expectWorks(await page.evaluate(useRelay, listed), "listed relay from its listed origin");
  t.check(await page.evaluate(joinByFetch, listed) === 201, "listed relay answers its origin's join");
}

function expectWorks(r, what) {
  t.check(r.imported, `${what}: import: ${r.error}`);
  t.check(r.joined && r.left, `${what}: join, interest and leave: ${JSON.stringify(r)}`);
  t.check(r.watched === true, `${what}: presence watched: ${JSON.stringify(r)}`);
  t.check(/^401 token_/.test(r.refusal ?? ""), `${what}: a refusal is readable: ${r.refusal}`);
  t.check(r.origin !== new URL(r.base).origin, `${what}: the page is of another origin`);
}

// In the page: import the client from the relay, join with the token, change the
// interest, leave, and see a refusal's code.
async function useRelay({ base, token }) {
  let gs;
  try {
    gs = await import(`${base}/client/gsrelay.js`);
  } catch (e) {
    return { imported: false, base, origin: location.origin, error: String(e) };
  }
  const r = { imported: true, base, origin: location.origin };
  try {
    const answer = await gs.join({ baseUrl: base, room: "dev", token, request: { transport: "rtp" } });
    r.joined = typeof answer.session_id === "string";
    const sessionId = answer.session_id;
    // Watching the room from this origin: the presence stream names the joined session.
    r.watched = await new Promise((resolve) => {
      const timer = setTimeout(() => { w.close(); resolve(false); }, 5000);
      const w = gs.watchPresence({
        baseUrl: base, room: "dev", token,
        onsnapshot: () => {
          const seen = w.identityOf(answer.ssrc) !== undefined;
          if (seen) { clearTimeout(timer); w.close(); resolve(true); }
        },
      });
    });
    await gs.setInterest({ baseUrl: base, sessionId, token, interest: { echo: true } });
    await gs.leave({ baseUrl: base, sessionId, token });
    r.left = true;
  } catch (e) {
    r.error = String(e);
  }
  try {
    await gs.join({ baseUrl: base, room: "dev", token: "not.a.token" });
  } catch (e) {
    r.refusal = `${e.status} ${e.code}`;
  }
  return r;
}

// In the page: a join by plain fetch; its status, or the name of the error if the
// browser would not send it or hand its answer over.
async function joinByFetch({ base, token }) {
  try {
    const resp = await fetch(`${base}/v1/rooms/dev/sessions`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ transport: "rtp" }),
    });
    return resp.status;
  } catch (e) {
    return e.name;
  }
}
