// The viewer and the client module in headless Chromium, against a real relay (driven by
// tests/web_viewer.rs). Environment: GSRELAY_BASE (relay HTTP base), GSRELAY_TOKEN (room
// "dev", subscribe + admin), GSRELAY_SUBSCRIBE_TOKEN (subscribe only), GSRELAY_PUBLISHER_SSRC and GSRELAY_PUBLISHER_IDENTITY (a Rust
// client publishing three objects over UDP/SRTP), GSRELAY_CHROMIUM (the browser),
// GSRELAY_NODE_TOOLS (where playwright-core is installed), GSRELAY_ARTIFACTS (screenshot
// directory), GSRELAY_DOCS_SCREENSHOT (optional: also write the screenshot there).
// The viewer joins live over WebTransport. Prints "N passed, M failed".
import { mkdirSync, copyFileSync } from "node:fs";
import { join } from "node:path";
import { Tally, withChromium } from "./support.mjs";

const env = process.env;
const base = env.GSRELAY_BASE;
const publisher = Number(env.GSRELAY_PUBLISHER_SSRC);
const t = new Tally();
const WAIT = { timeout: 15000 };

await withChromium(t, run);
t.finish();

async function run(page) {
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));

  // The module, as the relay serves it.
  const js = await page.goto(`${base}/client/gsrelay.js`);
  const h = js.headers();
  t.check(js.status() === 200, `module status ${js.status()}`);
  t.check(h["content-type"] === "text/javascript; charset=utf-8", `module type ${h["content-type"]}`);
  t.check(h["cache-control"] === "no-cache" && /^"[0-9a-f]{32}"$/.test(h.etag ?? ""), "module cache headers");

  // The viewer, with the token in the fragment (which it then removes from the address).
  const html = await page.goto(`${base}/viewer#token=${env.GSRELAY_TOKEN}&room=dev`);
  t.check(html.status() === 200 && /script-src 'self'/.test(html.headers()["content-security-policy"] ?? ""), "viewer CSP");
  await page.waitForFunction(() => window.gsrelayViewer !== undefined, null, WAIT);
  t.check(!page.url().includes("token="), `token left in the address: ${page.url()}`);

  // The module imports in the page, its codec round-trips, garbage is an error value.
  const mod = await page.evaluate(async () => {
    const gs = await import("/client/gsrelay.js");
    const head = { type: "Head1", id: 1, time: 5, location: { x: 1, y: 2, z: 3, vx: 0, vy: 0, vz: 0 },
      rotation: { si: 0, sj: 0, sk: 0, ei: 0, ej: 0, ek: 0 } };
    const d = gs.decode(gs.encode([head]));
    const bad = gs.decode(new Uint8Array([0xff, 0xff, 0x01]));
    const roq = gs.parseDatagram(gs.frameDatagram(37, Uint8Array.of(0x80, 0xc8)));
    let webrtc;
    try { await gs.WebRtcConnection.open(null, { RTCPeerConnectionImpl: null }); } catch (e) { webrtc = e.message; }
    return { exports: Object.keys(gs), ok: d.ok && d.objects[0].location.z === 3, badOk: bad.ok,
      badKind: bad.error?.kind, roq: roq.ok && roq.flowId === 37 && roq.packet.length === 2,
      wt: gs.hasWebTransport(), webrtc };
  });
  for (const name of ["decode", "encode", "RoomState", "Session", "WebTransportConnection", "WebRtcConnection", "predict", "buildFir", "frameDatagram"]) {
    t.check(mod.exports.includes(name), `module exports ${name}`);
  }
  t.check(mod.ok, "codec round trip in the page");
  t.check(mod.badOk === false && mod.badKind === "invalid_var_prefix", `garbage: ${mod.badKind}`);
  t.check(mod.roq, "RoQ framing in the page");
  t.check(mod.wt, "Chromium has WebTransport");
  t.check(/no RTCPeerConnection/.test(mod.webrtc ?? ""), `WebRTC without RTCPeerConnection says so: ${mod.webrtc}`);

  // The publisher's stream, from the relay's room inspection: identity and object count.
  await page.waitForFunction(([ssrc, who]) => {
    const tr = document.querySelector(`#streams tr[data-ssrc="${ssrc}"]`);
    return tr && tr.children[1].textContent === who && tr.children[2].textContent === "3";
  }, [publisher, env.GSRELAY_PUBLISHER_IDENTITY], WAIT).then(() => t.check(true), (e) => t.check(false, `publisher row: ${e.message}`));
  // Live over WebTransport: a session, the publisher's three objects drawn from it, and the
  // time the snapshot on join took.
  await page.waitForFunction(() => /^WebTransport, session s[0-9a-f]{16}$/.test(document.getElementById("transport").textContent), null, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `live transport: ${e.message}`));
  await page.waitForFunction((ssrc) => window.gsrelayViewer.drawn.filter((d) => d.ssrc === ssrc).length === 3, publisher, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `publisher's objects drawn live: ${e.message}`));
  // The table (and with it the snapshot time) is redrawn every 250 ms.
  await page.waitForFunction(() => /^\d+ ms to first state$/.test(document.getElementById("snapshot").textContent), null, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `snapshot time shown: ${e.message}`));
  const live = await page.evaluate(() => document.getElementById("status").className);
  t.check(live === "live", `live page: ${live}`);

  // Packets in, as a transport delivers them: a stream of six objects, and an aggregated
  // packet from the relay carrying another sender's head in a container.
  const fed = await page.evaluate(async () => {
    const gs = await import("/client/gsrelay.js");
    const v = window.gsrelayViewer;
    const time = gs.time1();
    const rot = { si: 0, sj: 0.38, sk: 0, ei: 0, ej: 0.38, ek: 0 };
    const still = (x, y, z) => ({ x, y, z, vx: 0, vy: 0, vz: 0 });
    const objects = [
      { type: "Head1", id: 1, time, location: { x: 0, y: 1.7, z: 0, vx: 1, vy: 0, vz: 0 }, rotation: rot },
      { type: "Hand1", id: 2, time, left: true, location: still(-0.4, 1.2, -0.3), rotation: rot },
      { type: "Hand1", id: 3, time, left: false, location: still(0.4, 1.2, -0.3), rotation: rot },
      { type: "Object1", id: 10, time, position: { x: 3, y: 0, z: -2 }, rotation: { i: 0, j: 0, k: 0 }, scale: 1, active: true },
      { type: "SixDOF1", id: 4, time, left: true, location: still(-2.5, 1, 1.5), rotation: rot },
      { type: "Mesh2", id: 5, location: still(2, 0, 2.5), rotation: rot, scale: still(1, 1, 1), meshUrl: "crate.glb" },
    ];
    const stream = gs.buildRtp({ sequenceNumber: 1, timestamp: 0, ssrc: 0x51a7e, payload: gs.encode(objects) });
    const other = { type: "Head1", id: 1, time, location: { x: -3, y: 1.7, z: -3, vx: 0, vy: 0, vz: 0 }, rotation: rot };
    const aggregated = gs.buildRtp({ sequenceNumber: 1, timestamp: 0, ssrc: 0x7e1a7,
      payload: gs.encode([{ type: "Container", ssrc: 0xb0b, objects: [other] }]) });
    v.fedAt = Date.now();
    return [v.ingest(stream), v.ingest(aggregated)];
  });
  t.check(fed[0] === "rtp" && fed[1] === "rtp", `ingest: ${fed}`);
  await page.waitForFunction(() => Number(document.getElementById("map").dataset.drawn) === 10, null, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `7 fed objects drawn beside the live 3: ${e.message}`));

  // Prediction: the head moves at 1 m/s along x between updates, capped at one second ahead.
  await page.waitForFunction(() => {
    const head = window.gsrelayViewer.drawn.find((d) => d.ssrc === 0x51a7e && d.key === "1");
    return head && head.x >= 0.3;
  }, null, WAIT).then(() => t.check(true), (e) => t.check(false, `head moves: ${e.message}`));
  const moved = await page.evaluate(() => {
    const v = window.gsrelayViewer;
    const head = v.drawn.find((d) => d.ssrc === 0x51a7e && d.key === "1");
    return { x: head.x, expected: Math.min(Date.now() - v.fedAt, 1000) / 1000 };
  });
  // Within one frame or two of the draw (and Time1's millisecond grain).
  t.check(Math.abs(moved.x - moved.expected) < 0.15, `head at x=${moved.x}, expected ${moved.expected}`);
  const row = await page.evaluate(() => {
    const tr = document.querySelector('#streams tr[data-ssrc="' + 0x51a7e + '"]');
    return tr && [...tr.children].map((c) => c.textContent);
  });
  t.check(row && row[2] === "6" && Number(row[3]) > 0, `stream row ${row}`);
  t.check(row && /^WebTransport, session/.test(await page.textContent("#transport")), "transport shown");

  // The screenshot (after the view has eased onto the objects; for the image only).
  await page.waitForTimeout(1200);
  mkdirSync(env.GSRELAY_ARTIFACTS, { recursive: true });
  const shot = join(env.GSRELAY_ARTIFACTS, "viewer.png");
  await page.screenshot({ path: shot });
  if (env.GSRELAY_DOCS_SCREENSHOT) copyFileSync(shot, env.GSRELAY_DOCS_SCREENSHOT);
  console.error(`screenshot: ${shot}`);

  // A BYE removes the stream and its objects; garbage is dropped, never thrown.
  const after = await page.evaluate(async () => {
    const gs = await import("/client/gsrelay.js");
    const v = window.gsrelayViewer;
    const bye = v.ingest(gs.buildBye(0x51a7e));
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
    const outcomes = new Set();
    for (let i = 0; i < 2000; i++) outcomes.add(v.ingest(Uint8Array.from({ length: rand() % 80 }, rand)));
    return { bye, outcomes: [...outcomes], streams: [...v.room.streams.keys()] };
  });
  const left = [...after.streams].sort((a, b) => a - b);
  t.check(after.bye === "rtcp" && left.length === 2 && left.includes(0xb0b) && left.includes(publisher), `after BYE: ${JSON.stringify(after)}`);
  t.check(after.outcomes.every((o) => o.startsWith("dropped:") || o === "rtp" || o === "rtcp"), `garbage outcomes ${after.outcomes}`);
  await page.waitForFunction(() => Number(document.getElementById("map").dataset.drawn) <= 4, null, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `BYE clears the stream from the map: ${e.message}`));
  t.check(pageErrors.length === 0, `uncaught errors in the page: ${pageErrors}`);

  // Without the admin right the page still goes live: the stream is seen from the live
  // transport, named by the room's presence (which a subscribe token may watch), and the
  // refused inspection shows no error.
  await page.goto("about:blank"); // else the new fragment is a same-document navigation
  await page.goto(`${base}/viewer#token=${env.GSRELAY_SUBSCRIBE_TOKEN}&room=dev`);
  await page.waitForFunction(() => /^WebTransport, session/.test(document.getElementById("transport").textContent), null, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `subscriber's transport status: ${e.message}`));
  await page.waitForFunction(() => window.gsrelayViewer.info?.error?.status === 403, null, WAIT);
  const renders = await page.evaluate(() => window.gsrelayViewer.renders);
  await page.waitForFunction((n) => window.gsrelayViewer.renders > n, renders, WAIT);
  await page.waitForFunction((ssrc) => document.querySelector(`#streams tr[data-ssrc="${ssrc}"]`), publisher, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `subscriber sees the stream live: ${e.message}`));
  await page.waitForFunction(([ssrc, who]) =>
    document.querySelector(`#streams tr[data-ssrc="${ssrc}"]`)?.children[1].textContent === who,
  [publisher, env.GSRELAY_PUBLISHER_IDENTITY], WAIT)
    .then(() => t.check(true), (e) => t.check(false, `presence names the publisher's stream: ${e.message}`));
  await page.waitForFunction((who) => {
    const names = document.getElementById("participants").textContent.split(", ");
    return names.includes(who) && names.includes("subscriber");
  }, env.GSRELAY_PUBLISHER_IDENTITY, WAIT)
    .then(() => t.check(true), (e) => t.check(false, `participants listed: ${e.message}`));
  const sub = await page.evaluate((ssrc) => ({
    status: document.getElementById("status").className,
    rows: document.querySelectorAll("#streams tbody tr").length,
    identity: document.querySelector(`#streams tr[data-ssrc="${ssrc}"]`)?.children[1].textContent,
    fromPresence: window.gsrelayViewer.presence?.identityOf(ssrc),
    participants: document.getElementById("participants").textContent.split(", "),
    forbidden: window.gsrelayViewer.info?.error?.status,
  }), publisher);
  const who = env.GSRELAY_PUBLISHER_IDENTITY;
  t.check(sub.status === "live" && sub.rows === 1 && sub.identity === who && sub.fromPresence === who
    && sub.participants.includes(who) && sub.participants.includes("subscriber") && sub.forbidden === 403,
  `subscribe-only page: ${JSON.stringify(sub)}`);
}
