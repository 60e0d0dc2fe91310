// The viewer on a replay room and on a mirror room in headless Chromium, against a real
// relay (driven by tests/web_replay.rs) while a Rust client publishes a moving head into
// room "arena" over UDP/SRTP. Node records the room and starts the replay and the mirror
// with the client module; the page's scrubber must then move the relay's replay.
// Environment: GSRELAY_BASE, GSRELAY_RELAY_ADMIN (admin of every room), GSRELAY_TOKENS
// (JSON: `watch_admin`, subscribe + admin without publish, as a replay room refuses a
// join that may publish; `subscribe`; `publish`, every right: each a token by room, for
// "arena-replay" and "arena-delayed"), GSRELAY_CHROMIUM,
// GSRELAY_NODE_TOOLS, GSRELAY_ARTIFACTS (screenshot directory).
// Prints "N passed, M failed".
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import * as gs from "../client/gsrelay.js";
import { Tally, withChromium } from "./support.mjs";

const env = process.env;
const baseUrl = env.GSRELAY_BASE;
const token = env.GSRELAY_RELAY_ADMIN;
const t = new Tally();
const tokens = JSON.parse(env.GSRELAY_TOKENS);
const WAIT = { timeout: 15000 };
const ROOM = "arena";
const REPLAY = "arena-replay";
const MIRROR = "arena-delayed";
const DELAY_MS = 2000;
/** How long the room is recorded: enough for a scrubber to seek within. */
const RECORD_MS = 5000;

/** Resolves to what `call` resolves to once `ok` holds of it; throws after 15 s. */
async function until(what, call, ok) {
  const deadline = Date.now() + WAIT.timeout;
  for (;;) {
    const v = await call();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits in the page for `fn(arg)` to hold, as one check named `what`. */
function waitFor(page, what, fn, arg) {
  return page.waitForFunction(fn, arg, WAIT).then(() => t.check(true), (e) => t.check(false, `${what}: ${e.message}`));
}

mkdirSync(env.GSRELAY_ARTIFACTS, { recursive: true });
const { id, duration } = await record();
await withChromium(t, run);
t.finish();

/** Records the room, then plays it paused into REPLAY and mirrors the live room. */
async function record() {
  const rec = await gs.startRecording({ baseUrl, token, room: ROOM });
  await until("the recording's length", () => gs.getRecording({ baseUrl, token, id: rec.id }),
    (v) => v.bytes > 0 && Date.now() - v.started_at >= RECORD_MS);
  await gs.stopRecording({ baseUrl, token, room: ROOM });
  const replay = await gs.startReplay({ baseUrl, token, recording: rec.id, room: REPLAY, paused: true });
  await gs.startMirror({ baseUrl, token, room: ROOM, mirror: MIRROR, delayMs: DELAY_MS });
  return { id: rec.id, duration: replay.duration_ms };
}

async function run(page) {
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  const target = { baseUrl, token, room: REPLAY };

  // An admin (without the publish right) on the replay room: the scrubber, enabled, from
  // the join answer; the recorded head drawn from the replay's snapshot.
  await page.goto(`${baseUrl}/viewer#token=${tokens.watch_admin[REPLAY]}&room=${REPLAY}`);
  await waitFor(page, "live in the replay room", () => /^WebTransport, session/.test(document.getElementById("transport").textContent));
  await waitFor(page, "scrubber shown with the recording's length", (d) => {
    const s = document.getElementById("replay-scrub");
    return !document.getElementById("replay").hidden && Number(s.max) === d && !s.disabled;
  }, duration);
  await waitFor(page, "the replayed head drawn", () => window.gsrelayViewer.drawn.some((d) => d.type === "Head1"));
  const before = await page.evaluate(() => ({
    time: document.getElementById("replay-time").textContent,
    speeds: [...document.getElementById("replay-speed").options].map((o) => o.value),
    badge: document.getElementById("delayed").hidden,
    answer: window.gsrelayViewer.session.replay,
  }));
  t.check(/^0:00\.\d \/ 0:0\d\.\d \(paused\)$/.test(before.time), `time shown: ${before.time}`);
  t.check(before.speeds.join() === "0.25,0.5,1,2,4,8", `speeds offered: ${before.speeds}`);
  t.check(before.badge, "no delay badge on a replay");
  t.check(before.answer?.recording === id && before.answer.paused, `session.replay ${JSON.stringify(before.answer)}`);

  // Seek by dragging the scrubber's thumb from the start to three quarters of its track.
  const box = await page.locator("#replay-scrub").boundingBox();
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + 4, y);
  await page.mouse.down();
  for (const f of [0.25, 0.5, 0.75]) await page.mouse.move(box.x + box.width * f, y, { steps: 4 });
  await page.mouse.up();
  // The scrubber holds its value until the seek's answer (`dragging` until then).
  const dragged = await page.evaluate(() => Number(document.getElementById("replay-scrub").value));
  t.check(dragged > duration * 0.6 && dragged < duration * 0.9, `dragged to ${dragged} of ${duration} ms`);
  const seeked = await until("the relay's replay after the drag", () => gs.replayStatus(target), (s) => s.position_ms > duration / 2)
    .catch((e) => ({ error: e.message }));
  t.check(seeked.position_ms === dragged && seeked.paused, `relay's replay after the seek: ${JSON.stringify(seeked)}, scrubber at ${dragged}`);
  await waitFor(page, "the page shows the seek's answer", (ms) =>
    window.gsrelayViewer.replay.status?.position_ms === ms && !window.gsrelayViewer.replay.dragging, dragged);

  // Speed and play from the page; the relay's clock runs at 4x from the seek's position.
  await page.selectOption("#replay-speed", "4");
  await until("the speed set from the page", () => gs.replayStatus(target), (s) => s.speed === 4)
    .then(() => t.check(true), (e) => t.check(false, e.message));
  await page.click("#replay-play");
  const playing = await until("played from the page", () => gs.replayStatus(target), (s) => !s.paused && s.position_ms > dragged)
    .catch((e) => ({ error: e.message }));
  t.check(playing.position_ms > dragged, `playing: ${JSON.stringify(playing)}`);
  await waitFor(page, "the button offers a pause", () => document.getElementById("replay-play").textContent === "Pause");
  // Back to the start at 1x, paused, for the screenshot and the read-only viewer.
  await page.click("#replay-play");
  await until("paused from the page", () => gs.replayStatus(target), (s) => s.paused)
    .then(() => t.check(true), (e) => t.check(false, e.message));
  await page.waitForTimeout(300); // for the image only: the view eases onto the objects
  await page.screenshot({ path: join(env.GSRELAY_ARTIFACTS, "viewer-replay.png") });

  // A spectator's page (subscribe only): the scrubber read-only, its position extrapolated
  // from the join answer at the replay's speed, never asked of the relay again.
  await gs.controlReplay({ ...target, seekMs: 0, speed: 1, paused: false });
  await page.goto("about:blank"); // else the new fragment is a same-document navigation
  await page.goto(`${baseUrl}/viewer#token=${tokens.subscribe[REPLAY]}&room=${REPLAY}`);
  await waitFor(page, "read-only scrubber", () => {
    const s = document.getElementById("replay-scrub");
    return !document.getElementById("replay").hidden && s.disabled && document.getElementById("replay-play").disabled
      && /read-only/.test(document.getElementById("replay-note").textContent);
  });
  const first = await page.evaluate(() => window.gsrelayViewer.replayShownMs);
  await waitFor(page, "the spectator's scrubber moves on", (ms) => window.gsrelayViewer.replayShownMs >= ms + 500, first);
  const [shownMs, relay] = [await page.evaluate(() => window.gsrelayViewer.replayShownMs), await gs.replayStatus(target)];
  // One poll's latency and a frame apart, or both at the end.
  t.check(Math.abs(shownMs - relay.position_ms) < 500, `spectator shows ${shownMs} ms, relay at ${relay.position_ms} ms`);
  const forbidden = await page.evaluate(() => window.gsrelayViewer.info?.error?.status);
  t.check(forbidden === 403, `the spectator does not inspect the room: ${forbidden}`);

  // The mirror room: the delay badge, and the live head shown two seconds late.
  await page.goto("about:blank");
  await page.goto(`${baseUrl}/viewer#token=${tokens.subscribe[MIRROR]}&room=${MIRROR}`);
  await waitFor(page, "delay badge", (ms) => {
    const b = document.getElementById("delayed");
    return !b.hidden && b.textContent === `delayed ${ms / 1000}s` && Number(b.dataset.delayMs) === ms;
  }, DELAY_MS);
  await waitFor(page, "the mirrored head drawn", () => window.gsrelayViewer.drawn.some((d) => d.type === "Head1"));
  t.check(await page.evaluate(() => document.getElementById("replay").hidden), "no scrubber on a mirror");
  await waitFor(page, "the mirrored stream listed", () => document.querySelectorAll("#streams tbody tr").length === 1);
  await page.screenshot({ path: join(env.GSRELAY_ARTIFACTS, "viewer-mirror.png") });

  // A token that may publish is refused by a replay room: the page says why, and, the
  // token being an admin's, still shows the replay from the room info.
  await page.goto("about:blank");
  await page.goto(`${baseUrl}/viewer#token=${tokens.publish[REPLAY]}&room=${REPLAY}`);
  await waitFor(page, "a publisher's page says why it is not live", () =>
    /without the publish right/.test(document.getElementById("transport").textContent));
  await waitFor(page, "and shows the replay from the room info", () =>
    !document.getElementById("replay").hidden && !document.getElementById("replay-scrub").disabled);
  t.check(pageErrors.length === 0, `uncaught errors in the page: ${pageErrors}`);

  await gs.stopMirror({ baseUrl, token, room: ROOM });
  await gs.stopReplay(target);
}
