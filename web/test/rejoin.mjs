// The JavaScript client's rejoin in headless Chromium (driven by tests/web_rejoin.rs): two
// sessions of one page, over WebTransport and over WebRTC, hold a Rust publisher's room;
// the test stops their relay and starts another on the same HTTP address; each session
// notices by itself (silence, or its transport closing), rejoins, and holds the whole room
// again from the new relay's cache, then follows it live.
//
// Environment: GSRELAY_BASE (relay HTTP base), GSRELAY_ROOM, GSRELAY_TOKEN (subscribe),
// GSRELAY_PEER_SSRC (the publisher), GSRELAY_OBJECTS (Head1 ids 0.. with x = id + dx),
// GSRELAY_SILENCE_MS, GSRELAY_CHROMIUM, GSRELAY_NODE_TOOLS. It prints `event NAME JSON`
// lines, reads `go DX` lines (the x offset of the state to wait for next), and ends with
// "N passed, M failed".
import { createInterface } from "node:readline";
import { Tally, withChromium } from "./support.mjs";

const env = process.env;
const t = new Tally();
const WAIT_MS = 20000;
const input = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function emit(name, data = {}) {
  console.log(`event ${name} ${JSON.stringify(data)}`);
}

/** The x offset the Rust test says to wait for next. */
async function go() {
  const { value } = await input.next();
  const m = /^go (-?[\d.]+)$/.exec(value?.trim() ?? "");
  if (!m) throw new Error(`expected "go DX", got ${JSON.stringify(value)}`);
  return Number(m[1]);
}

await withChromium(t, async (page) => {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${env.GSRELAY_BASE}/client/gsrelay.js`);
  const setup = { base: env.GSRELAY_BASE, room: env.GSRELAY_ROOM, token: env.GSRELAY_TOKEN,
    peer: Number(env.GSRELAY_PEER_SSRC), objects: Number(env.GSRELAY_OBJECTS), silenceMs: Number(env.GSRELAY_SILENCE_MS),
    waitMs: WAIT_MS };
  const joined = await page.evaluate(async (c) => {
    const gs = await import("/client/gsrelay.js");
    window.c = c;
    window.sessions = {};
    window.rejoined = {};
    // Whether session `name` holds every object of the publisher, each at x = id + dx.
    window.holds = (name, dx) => {
      const stream = window.sessions[name].room.streams.get(c.peer);
      if (!stream || stream.objects.size < c.objects) return false;
      for (let id = 0; id < c.objects; id++) {
        if (stream.objects.get(String(id))?.object.location.x !== id + dx) return false;
      }
      return true;
    };
    for (const transport of ["webtransport", "webrtc"]) {
      const s = await gs.Session.connect({ baseUrl: c.base, room: c.room, token: c.token, transport,
        silenceMs: c.silenceMs });
      window.sessions[transport] = s;
      window.rejoined[transport] = [];
      s.onrejoin = (info) => window.rejoined[transport].push(info);
    }
    return Object.fromEntries(Object.entries(window.sessions)
      .map(([k, s]) => [k, { session: s.answer.session_id, ssrc: s.answer.ssrc }]));
  }, setup);
  const waitAll = (dx, what) => page.waitForFunction((dx) => Object.keys(window.sessions).every((k) => window.holds(k, dx)),
    dx, { timeout: WAIT_MS }).then(() => true, (e) => { t.check(false, `${what}: ${e.message}`); return false; });

  t.check(await waitAll(0, "the room on join"), "the room on join");
  // Idle, the live relay's reports keep both sessions: no rejoin over two silences.
  await page.waitForTimeout(2 * setup.silenceMs);
  const early = await page.evaluate(() => Object.values(window.sessions).map((s) => s.rejoins));
  t.check(early.every((n) => n === 0), `no rejoin while the relay lives: ${early}`);
  emit("holding", joined);

  // The relay is replaced; the publisher's state moved meanwhile.
  const dx = await go();
  t.check(await waitAll(dx, "the whole room again"), "the whole room again");
  const back = await page.evaluate(() => ({
    infos: window.rejoined,
    sessions: Object.fromEntries(Object.entries(window.sessions)
      .map(([k, s]) => [k, { session: s.answer.session_id, ssrc: s.answer.ssrc, rejoins: s.rejoins }])),
  }));
  for (const [k, s] of Object.entries(back.sessions)) {
    const info = back.infos[k][0];
    t.check(s.rejoins === 1 && info && ["silence", "closed"].includes(info.reason) &&
      info.previousSessionId === joined[k].session && info.ssrc === joined[k].ssrc && s.ssrc === joined[k].ssrc,
      `${k} rejoined once with its SSRC: ${JSON.stringify({ s, info })}`);
  }
  emit("rejoined", back);

  // And live from the new relay.
  const live = await go();
  t.check(await waitAll(live, "live after the rejoin"), "live after the rejoin");
  await page.evaluate(async () => { for (const s of Object.values(window.sessions)) await s.close(); });
  t.check(errors.length === 0, `uncaught errors: ${errors}`);
});
t.finish();
