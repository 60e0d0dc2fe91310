// WebRTC data channels in headless Chromium against a real relay (driven by
// tests/web_webrtc.rs). Environment: GSRELAY_BASE (relay HTTP base), GSRELAY_TOKEN (room
// "dev", every right), GSRELAY_MOVER_SSRC and GSRELAY_MOVER_T0_MS (a Rust client moving a
// Head1 along x at 1 m/s from x = 0 at that epoch time, over UDP/SRTP),
// GSRELAY_CROWD_SSRC and GSRELAY_CROWD_OBJECTS (a Rust client that published that many
// objects before any page joined), GSRELAY_BROWSER_HEAD_X (where the page's head goes),
// GSRELAY_STOP_FILE (written once a Rust UDP/SRTP subscriber got the page's head),
// GSRELAY_SESSION_TIMEOUT_S (the relay's session_timeout: the viewer must outlive it),
// GSRELAY_CHROMIUM, GSRELAY_NODE_TOOLS. Prints "N passed, M failed".
import { existsSync } from "node:fs";
import { Tally, withChromium } from "./support.mjs";

const env = process.env;
const base = env.GSRELAY_BASE;
const t = new Tally();
const WAIT = { timeout: 20000 };
/** How far the drawn head may be from where its publisher has it, in metres (1 m/s). */
const POSITION_BOUND_M = 0.25;

await withChromium(t, async (page, context) => {
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  const connectedAt = await viewerFollowsTheMover(page);
  await lateJoinerGetsTheCrowd(await context.newPage());
  await pagePublishesToUdp(await context.newPage());
  await viewerOutlivesTheSessionTimeout(page, connectedAt);
  t.check(pageErrors.length === 0, `uncaught errors in the viewer: ${pageErrors}`);
});
t.finish();

/** The viewer over WebRTC: the mover's head is drawn where the mover has it, and moves. */
async function viewerFollowsTheMover(page) {
  const mover = Number(env.GSRELAY_MOVER_SSRC);
  const t0 = Number(env.GSRELAY_MOVER_T0_MS);
  await page.goto(`${base}/viewer#token=${env.GSRELAY_TOKEN}&room=dev&transport=webrtc`);
  await page.waitForFunction(() => /^WebRTC, session s[0-9a-f]{16}$/.test(document.getElementById("transport").textContent), null, WAIT)
    .then(() => t.check(true), async (e) => t.check(false, `viewer over WebRTC: ${await page.textContent("#transport")} ${e.message}`));
  const connectedAt = Date.now();
  const opened = await page.evaluate(() => window.gsrelayViewer.session?.conn?.dc?.readyState);
  t.check(opened === "open", `viewer's data channel ${opened}`);
  await page.waitForFunction((ssrc) => window.gsrelayViewer.drawn.some((d) => d.ssrc === ssrc && d.key === "1"), mover, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `mover's head drawn: ${e.message}`));
  await headFollowsTheMover(page, "viewer");
  return connectedAt;
}

/** Samples the drawn head for 1.25 s: each sample within the bound, and moving. */
async function headFollowsTheMover(page, what) {
  const mover = Number(env.GSRELAY_MOVER_SSRC);
  const t0 = Number(env.GSRELAY_MOVER_T0_MS);
  const samples = [];
  for (let i = 0; i < 6; i++) {
    samples.push(await page.evaluate(([ssrc, t0]) => {
      const head = window.gsrelayViewer.drawn.find((d) => d.ssrc === ssrc && d.key === "1");
      return { x: head?.x, expected: (Date.now() - t0) / 1000 };
    }, [mover, t0]));
    await page.waitForTimeout(250);
  }
  const errors = samples.map((s) => Math.abs(s.x - s.expected));
  const worst = Math.max(...errors);
  console.log(`${what}: drawn head within ${worst.toFixed(3)} m of the mover's (bound ${POSITION_BOUND_M} m)`);
  t.check(errors.every((e) => e <= POSITION_BOUND_M), `${what}: drawn head off by ${errors.map((e) => e.toFixed(3))}`);
  t.check(samples.at(-1).x - samples[0].x > 0.9, `${what}: head moved ${samples[0].x} → ${samples.at(-1).x} in 1.25 s`);
}

/** Past the relay's session timeout the viewer, which publishes nothing, is still live. */
async function viewerOutlivesTheSessionTimeout(page, connectedAt) {
  const past = connectedAt + (Number(env.GSRELAY_SESSION_TIMEOUT_S) + 1) * 1000;
  await page.bringToFront(); // a background tab's animation frames are throttled
  await page.waitForTimeout(Math.max(0, past - Date.now()));
  await headFollowsTheMover(page, "viewer after the session timeout");
  const live = await page.evaluate(() => document.getElementById("transport").textContent);
  t.check(/^WebRTC, session/.test(live), `viewer transport after the session timeout: ${live}`);
}

/** A page joining over WebRTC after the crowd was published gets all of it. */
async function lateJoinerGetsTheCrowd(page) {
  await page.goto(`${base}/viewer`); // any page of the relay's origin
  const r = await page.evaluate(async ([token, crowd, count]) => {
    const gs = await import("/client/gsrelay.js");
    const started = performance.now();
    const s = await gs.Session.connect({ room: "dev", token, transport: "webrtc" });
    const connectedMs = performance.now() - started;
    const deadline = performance.now() + 15000;
    let held = 0;
    while (performance.now() < deadline) {
      held = s.room.streams.get(crowd)?.objects.size ?? 0;
      if (held >= count) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const completeMs = performance.now() - started;
    await s.close();
    return { held, connectedMs, completeMs, sent: s.conn.dropped };
  }, [env.GSRELAY_TOKEN, Number(env.GSRELAY_CROWD_SSRC), Number(env.GSRELAY_CROWD_OBJECTS)]);
  console.log(`late joiner: connected in ${r.connectedMs.toFixed(0)} ms, ${r.held} objects by ${r.completeMs.toFixed(0)} ms`);
  t.check(r.held === Number(env.GSRELAY_CROWD_OBJECTS), `snapshot held ${r.held} objects`);
}

/** A page publishing over WebRTC until the Rust UDP/SRTP subscriber has its head. */
async function pagePublishesToUdp(page) {
  await page.goto(`${base}/viewer`);
  await page.evaluate(async ([token, x]) => {
    const gs = await import("/client/gsrelay.js");
    const s = await gs.Session.connect({ room: "dev", token, transport: "webrtc" });
    window.publisher = s;
    window.publishing = setInterval(() => {
      s.publish([{ type: "Head1", id: 7, time: gs.time1(), location: { x, y: 1.6, z: -1, vx: 0, vy: 0, vz: 0 },
        rotation: { si: 0, sj: 0, sk: 0, ei: 0, ej: 0, ek: 0 } }]);
    }, 50);
  }, [env.GSRELAY_TOKEN, Number(env.GSRELAY_BROWSER_HEAD_X)]);
  const ssrc = await page.evaluate(() => window.publisher.answer.ssrc);
  console.log(`publisher ssrc ${ssrc}`);
  const deadline = Date.now() + WAIT.timeout;
  while (!existsSync(env.GSRELAY_STOP_FILE) && Date.now() < deadline) await page.waitForTimeout(50);
  t.check(existsSync(env.GSRELAY_STOP_FILE), "the UDP/SRTP subscriber got the page's head");
  const dropped = await page.evaluate(async () => {
    clearInterval(window.publishing);
    const d = window.publisher.conn.dropped;
    await window.publisher.close();
    return d;
  });
  t.check(dropped.oversize === 0 && dropped.closed === 0 && dropped.buffered === 0, `page dropped ${JSON.stringify(dropped)}`);
}
