// WebTransport in headless Chromium against a real relay, one scenario per run (driven by
// tests/web_webtransport.rs): `node webtransport.mjs SCENARIO`.
//
// Environment: GSRELAY_BASE (relay HTTP base), GSRELAY_TOKEN (a token for GSRELAY_ROOM),
// GSRELAY_PEER_SSRC (the Rust client's SSRC), GSRELAY_VIEWER_URL and GSRELAY_STEPS (`follow`),
// GSRELAY_OBJECTS (`snapshot`), GSRELAY_CHROMIUM, GSRELAY_NODE_TOOLS.
//
// It talks with the Rust test over its standard streams: it prints `event NAME JSON` lines
// and, when told to wait, reads `go` from its input; it ends with "N passed, M failed".
import { createInterface } from "node:readline";
import { Tally, withChromium } from "./support.mjs";

const env = process.env;
const base = env.GSRELAY_BASE;
const room = env.GSRELAY_ROOM;
const token = env.GSRELAY_TOKEN;
const peer = Number(env.GSRELAY_PEER_SSRC);
const t = new Tally();
const WAIT = { timeout: 20000 };

const input = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function emit(name, data = {}) {
  console.log(`event ${name} ${JSON.stringify(data)}`);
}

/** Waits for the Rust test's `go`. */
async function go() {
  const { value } = await input.next();
  if (value?.trim() !== "go") throw new Error(`expected "go", got ${JSON.stringify(value)}`);
}

/** A page on the relay's origin with the client module loaded as `window.gs`. */
async function modulePage(page) {
  await page.goto(`${base}/client/gsrelay.js`);
  await page.evaluate(async () => { window.gs = await import("/client/gsrelay.js"); });
}

const scenarios = {
  // The viewer at the address `serve` printed follows a Rust publisher's head: the test
  // moves it one metre at a time; the page notes when its map first draws each step.
  async follow(page) {
    await page.goto(env.GSRELAY_VIEWER_URL);
    await page.waitForFunction(() => /^WebTransport, session/.test(document.getElementById("transport").textContent), null, WAIT)
      .then(() => t.check(true), (e) => t.check(false, `viewer live: ${e.message}`));
    await page.evaluate((ssrc) => {
      window.seen = {};
      const look = () => {
        const head = window.gsrelayViewer.drawn.find((d) => d.ssrc === ssrc && d.type === "Head1");
        const step = head && Math.round(head.x);
        if (head && Math.abs(head.x - step) < 1e-3 && !(step in window.seen)) window.seen[step] = Date.now();
        requestAnimationFrame(look);
      };
      look();
    }, peer);
    emit("ready");
    await go();
    // The last step was published just now: wait (bounded) for the map to draw it.
    const last = Number(env.GSRELAY_STEPS);
    await page.waitForFunction((n) => n in window.seen, last, WAIT)
      .then(() => t.check(true), (e) => t.check(false, `step ${last} drawn: ${e.message}`));
    emit("seen", await page.evaluate(() => window.seen));
  },

  // A page joining late gets the room's objects (GSRELAY_OBJECTS of them, Head1 with
  // x = id) in the snapshot on join, complete and intact.
  async snapshot(page) {
    await modulePage(page);
    const got = await page.evaluate(async ({ base, room, token, peer, expected }) => {
      const started = performance.now();
      const s = await gs.Session.connect({ baseUrl: base, room, token, transport: "webtransport" });
      const connected = performance.now() - started;
      const stream = () => s.room.streams.get(peer);
      while ((stream()?.objects.size ?? 0) < expected && performance.now() - started < 20000) {
        await new Promise((r) => setTimeout(r, 2));
      }
      const complete = performance.now() - started;
      let intact = 0;
      for (const { object } of stream()?.objects.values() ?? []) {
        if (object.type === "Head1" && object.location.x === Number(object.id)) intact++;
      }
      const out = { objects: stream()?.objects.size ?? 0, intact, connectMs: connected,
        firstStateMs: s.firstStateMs, completeMs: complete,
        maxDatagramSize: s.conn.wt.datagrams.maxDatagramSize, dropped: s.conn.dropped };
      await s.close();
      return out;
    }, { base, room, token, peer, expected: Number(env.GSRELAY_OBJECTS) });
    t.check(got.objects === Number(env.GSRELAY_OBJECTS) && got.intact === got.objects, `snapshot: ${JSON.stringify(got)}`);
    emit("snapshot", got);
  },

  // A browser publisher and a Rust one over UDP/SRTP see each other's objects exactly.
  async exchange(page) {
    await modulePage(page);
    const joined = await page.evaluate(async ({ base, room, token }) => {
      const s = await gs.Session.connect({ baseUrl: base, room, token, transport: "webtransport" });
      window.session = s;
      const head = { type: "Head1", id: 42, time: 1000, location: { x: 1.25, y: 1.5, z: -0.5, vx: 0, vy: 0, vz: 0 },
        rotation: { si: 0, sj: 0.5, sk: 0, ei: 0, ej: 0, ek: 0 } };
      window.publishing = setInterval(() => s.publish([head]), 50);
      return { ssrc: s.answer.ssrc };
    }, { base, room, token });
    emit("joined", joined);
    const received = await page.waitForFunction((ssrc) => {
      const o = window.session.room.streams.get(ssrc)?.objects.get("7")?.object;
      return o && { type: o.type, x: o.location.x, y: o.location.y, z: o.location.z };
    }, peer, WAIT).then((h) => h.jsonValue(), (e) => ({ error: e.message }));
    t.check(received.type === "Head1" && received.x === -2.5 && received.y === 1.5 && received.z === 0.75,
      `the Rust publisher's head in the page: ${JSON.stringify(received)}`);
    await go();
    await page.evaluate(async () => { clearInterval(window.publishing); await window.session.close(); });
  },

  // Sessions the relay refuses, each with its status line shown to the page: a reused
  // token, a forged one, a wrong path; and one admitted for comparison.
  async refused(page) {
    await modulePage(page);
    const out = await page.evaluate(async ({ base, room, token }) => {
      const answer = await gs.join({ baseUrl: base, room, token });
      const attempt = (a) => gs.WebTransportConnection.open(a).then((c) => { c.close(); return `admitted: ${c.status}`; },
        (e) => String(e.message ?? e));
      const w = answer.webtransport;
      const first = await attempt(answer);
      const reused = await attempt(answer);
      const forged = await attempt({ ...answer, webtransport: { ...w, session_token: "0".repeat(32) } });
      const garbage = await attempt({ ...answer, webtransport: { ...w, session_token: "not a token" } });
      const path = await attempt({ ...answer, webtransport: { ...w, url: w.url.replace("/webtransport", "/elsewhere") } });
      return { first, reused, forged, garbage, path, answer: w };
    }, { base, room, token });
    t.check(/^admitted: OK s[0-9a-f]{16}$/.test(out.first), `first use: ${out.first}`);
    const invalid = /^session refused: token_invalid: the session token is unknown, already used, or for another relay$/;
    for (const k of ["reused", "forged", "garbage"]) t.check(invalid.test(out[k]), `${k}: ${out[k]}`);
    t.check(!out.path.startsWith("admitted"), `wrong path: ${out.path}`);
    t.check(/^https:\/\/127\.0\.0\.1:\d+\/webtransport$/.test(out.answer.url) && /^[0-9a-f]{64}$/.test(out.answer.cert_sha256),
      `answer: ${JSON.stringify(out.answer)}`);
    emit("refused", out);
  },
};

const scenario = scenarios[process.argv[2]];
if (!scenario) throw new Error(`no scenario ${process.argv[2]}; one of ${Object.keys(scenarios)}`);
await withChromium(t, scenario);
t.finish();
