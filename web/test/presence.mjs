// Presence and the server API of the client module (driven by tests/web_presence.rs).
// First in Node over stand-in answers: the event-stream reading (chunks cut anywhere,
// CRLF, keep-alive comments), a dropped stream reopened with its new snapshot replacing
// the state, the endings (relay_stopping, a refused token, close()). Then against a real
// relay: a page in headless Chromium watches room "hall" with `watchPresence` while
// players join and leave over HTTP and a backend in Node administers the room with
// `RoomAdmin`; each side waits for what the other did, with deadlines.
// Environment: GSRELAY_BASE (relay HTTP base), GSRELAY_ADMIN_TOKEN (relay-wide admin),
// GSRELAY_WATCH_TOKEN (room "hall", subscribe), GSRELAY_ALICE_TOKEN and
// GSRELAY_BOB_TOKEN (room "hall", identities alice and bob), GSRELAY_CHROMIUM,
// GSRELAY_NODE_TOOLS. Prints "N passed, M failed".
import * as gs from "../client/gsrelay.js";
import { Tally, withChromium } from "./support.mjs";

const env = process.env;
const base = env.GSRELAY_BASE;
const t = new Tally();
const WAIT_MS = 15000;
const WAIT = { timeout: WAIT_MS };

/** Resolves once `cond()` holds, polling; rejects naming `what` after the wait. */
async function until(what, cond) {
  const deadline = Date.now() + WAIT_MS;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** `promise`, or a rejection naming `what` after the wait. */
function within(what, promise) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), WAIT_MS); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// --- Over stand-in answers --------------------------------------------------------------

/** A fetch answering each call with the next of `answers`: chunks of an event stream, or a refusal. */
function standIn(answers) {
  const calls = [];
  const fetchImpl = async (url, init) => {
    calls.push({ url, init });
    const a = answers.shift();
    if (!a) return new Promise(() => {}); // no more answers: hangs, as an idle relay
    if (a.status) return new Response(JSON.stringify(a.body), { status: a.status });
    const bytes = a.chunks.map((c) => new TextEncoder().encode(c));
    const body = new ReadableStream({
      pull(controller) {
        if (bytes.length) controller.enqueue(bytes.shift());
        else if (a.hang) return new Promise(() => {}); // open, and quiet
        else controller.close();
      },
    });
    return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  };
  return { fetchImpl, calls };
}

async function standInStreams() {
  const alice = { identity: "alice", metadata: null, ssrcs: [0xdeadbeef], muted: false };
  const bob = { identity: "bob", metadata: { nick: "B" }, ssrcs: [7], muted: true };
  const snapshot1 = `event: snapshot\r\ndata: ${JSON.stringify({ room: "r", metadata: "one", participants: [alice] })}\r\n\r\n`;
  const snapshot2 = `event: snapshot\ndata: ${JSON.stringify({ room: "r", metadata: null, participants: [bob] })}\n\n`;
  const { fetchImpl, calls } = standIn([
    // Cut inside the event name, between "\r" and "\n", and after a keep-alive comment.
    { chunks: [":\n\nevent: snap", snapshot1.slice(11, 40), snapshot1.slice(40, -4), "\r", "\n\r\n"] },
    // The drop: the stream ends with no ending event; the next one's snapshot replaces all.
    { chunks: [snapshot2, "event: room_updated\ndata: {\"metadata\":", "{\"round\":2}}\n\n",
      "event: participant_left\ndata: {\"identity\":\"bob\"}\n\n", "event: relay_stopping\ndata: {}\n\n"] },
  ]);
  const seen = [];
  const p = gs.watchPresence({
    baseUrl: "http://relay.test/", room: "r", token: "tok", fetchImpl,
    onsnapshot: (w) => seen.push(`snapshot ${[...w.participants.keys()]}`),
    onleave: (x) => seen.push(`left ${x.identity} ${x.muted}`),
    onroom: (m) => seen.push(`room ${JSON.stringify(m)}`),
    onerror: (e) => seen.push(`error ${e.message}`),
  });
  const byUpdate = [];
  p.onchange = (w) => byUpdate.push(w.identityOf(0xdeadbeef));
  const end = await within("the stand-in watch ends", p.done);
  t.check(end.reason === "relay_stopping" && end.error === null, `ending: ${JSON.stringify(end)}`);
  t.check(JSON.stringify(seen) === JSON.stringify(["snapshot alice", "error the presence stream ended",
    "snapshot bob", "room {\"round\":2}", "left bob true"]), `events: ${JSON.stringify(seen)}`);
  t.check(byUpdate[0] === "alice" && byUpdate[1] === null, `SSRC → identity follows the snapshots: ${byUpdate}`);
  t.check(p.reconnects === 1 && calls.length === 2 && p.ended === "relay_stopping" && !p.connected,
    `one reconnection: ${p.reconnects}, ${calls.length} calls`);
  t.check(calls[0].url === "http://relay.test/v1/rooms/r/presence", `url ${calls[0].url}`);
  t.check(calls[0].init.headers.Authorization === "Bearer tok" && calls[0].init.headers.Accept === "text/event-stream",
    `headers ${JSON.stringify(calls[0].init.headers)}`);
  t.check(p.participants.size === 0 && JSON.stringify(p.metadata) === "{\"round\":2}", "state after the events");

  // A refused token: reported once, not retried.
  const refused = standIn([{ status: 403, body: { error: { code: "forbidden_right", message: "no subscribe" } } }]);
  const r = gs.watchPresence({ baseUrl: "http://relay.test", room: "r", token: "t", fetchImpl: refused.fetchImpl });
  const rEnd = await within("the refused watch ends", r.done);
  t.check(rEnd.reason === "refused" && rEnd.error instanceof gs.ApiError && rEnd.error.code === "forbidden_right"
    && rEnd.error.status === 403 && refused.calls.length === 1, `refused: ${rEnd.reason} ${rEnd.error}`);

  // close() while the stream is open ends it at once, told once.
  // A handler that throws is reported as uncaught, and the watch goes on.
  const open = standIn([{ chunks: [snapshot2], hang: true }]);
  const ends = [];
  const uncaught = [];
  const report = (e) => uncaught.push(e.message);
  process.on("uncaughtException", report);
  const c = gs.watchPresence({ baseUrl: "http://relay.test", room: "r", token: "t", fetchImpl: open.fetchImpl,
    onsnapshot: () => { throw new Error("a bug in the app"); }, onend: (e) => ends.push(e.reason) });
  await until("the snapshot and the handler's error", () => c.connected && uncaught.length === 1);
  process.off("uncaughtException", report);
  t.check(uncaught[0] === "a bug in the app" && c.participants.has("bob") && !c.ended,
    `a throwing handler: ${uncaught}, ${[...c.participants.keys()]}, ${c.ended}`);
  t.check((() => { try { gs.watchPresence({ room: "r", token: "t" }); } catch (e) { return e instanceof TypeError; } })(),
    "no base URL (Node has no page origin) throws at once");
  c.close();
  c.close();
  t.check((await c.done).reason === "closed" && ends.join() === "closed", `closed: ${ends}`);
}

// --- Against the relay --------------------------------------------------------------------

/** In the page: watch room "hall", logging each event on window.presenceLog. */
async function watchInPage({ base, token }) {
  const gs = await import("/client/gsrelay.js");
  const log = (window.presenceLog = []);
  window.presence = gs.watchPresence({
    baseUrl: base, room: "hall", token,
    onsnapshot: (p) => log.push({ event: "snapshot", identities: [...p.participants.keys()] }),
    onjoin: (p) => log.push({ event: "join", identity: p.identity, ssrcs: p.ssrcs }),
    onupdate: (p) => log.push({ event: "update", identity: p.identity, metadata: p.metadata, muted: p.muted }),
    onleave: (p) => log.push({ event: "leave", identity: p.identity }),
    onroom: (metadata) => log.push({ event: "room", metadata }),
    onend: ({ reason }) => log.push({ event: "end", reason }),
  });
}

/** Waits until the page logged an event matching `match`; returns it. */
async function logged(page, what, match) {
  try {
    const handle = await page.waitForFunction((m) => window.presenceLog.find((e) =>
      Object.entries(m).every(([k, v]) => JSON.stringify(e[k]) === JSON.stringify(v))), match, WAIT);
    const e = await handle.jsonValue();
    t.check(true);
    return e;
  } catch (e) {
    const log = await page.evaluate(() => window.presenceLog).catch(() => null);
    t.check(false, `${what}: ${e.message}; the page logged ${JSON.stringify(log)}`);
    return null;
  }
}

/** A player's session over HTTP (RTP transport, never used): joins "hall". */
function joinHall(token) {
  return gs.join({ baseUrl: base, room: "hall", token, request: { transport: "rtp" } });
}

async function againstTheRelay(page) {
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  const admin = new gs.RoomAdmin(base, env.GSRELAY_ADMIN_TOKEN);
  const alice = await joinHall(env.GSRELAY_ALICE_TOKEN);

  await page.goto(`${base}/viewer`);
  await page.evaluate(watchInPage, { base, token: env.GSRELAY_WATCH_TOKEN });
  await logged(page, "the snapshot names alice", { event: "snapshot", identities: ["alice"] });

  // A join, seen with its stream's SSRC, which then names the stream.
  const bob = await joinHall(env.GSRELAY_BOB_TOKEN);
  await logged(page, "bob's join", { event: "join", identity: "bob", ssrcs: [bob.ssrc] });
  const named = await page.evaluate(([a, b]) => [window.presence.identityOf(a), window.presence.identityOf(b),
    window.presence.identityOf(1)], [alice.ssrc, bob.ssrc]);
  t.check(named[0] === "alice" && named[1] === "bob" && named[2] === null, `SSRC → identity: ${named}`);

  // The backend: rooms and participants, as the relay counts them.
  const rooms = await admin.listRooms();
  const hall = rooms.find((r) => r.room === "hall");
  t.check(hall && hall.sessions === 2 && hall.participants === 2 && hall.metadata === null, `listRooms: ${JSON.stringify(rooms)}`);
  const people = await admin.listParticipants("hall");
  t.check(people.map((p) => p.identity).join() === "alice,bob" && people[1].sessions[0] === bob.session_id
    && people[1].ssrcs[0] === bob.ssrc && typeof people[0].joined_at === "number", `listParticipants: ${JSON.stringify(people)}`);

  // Updates: metadata and a mute, returned as they are now and seen by the page.
  const updated = await admin.updateParticipant("hall", "bob", { metadata: { nick: "B", team: "red" } });
  t.check(updated.identity === "bob" && updated.metadata.nick === "B" && updated.muted === false, `update: ${JSON.stringify(updated)}`);
  await logged(page, "bob's metadata", { event: "update", identity: "bob", metadata: { nick: "B", team: "red" } });
  const muted = await admin.updateParticipant("hall", "alice", { publish: false });
  t.check(muted.muted === true && muted.metadata === null, `mute: ${JSON.stringify(muted)}`);
  await logged(page, "alice muted", { event: "update", identity: "alice", muted: true });
  t.check((await admin.getParticipant("hall", "alice")).muted === true, "getParticipant after the mute");
  await admin.setRoomMetadata("hall", { round: 2 });
  await logged(page, "the room's metadata", { event: "room", metadata: { round: 2 } });
  t.check(JSON.stringify((await admin.getRoom("hall")).metadata) === "{\"round\":2}", "getRoom's metadata");

  // A removal: the page sees bob leave; the relay no longer knows him.
  await admin.removeParticipant("hall", "bob");
  await logged(page, "bob's removal", { event: "leave", identity: "bob" });
  const gone = await admin.getParticipant("hall", "bob").catch((e) => e);
  t.check(gone instanceof gs.ApiError && gone.status === 404 && gone.code === "participant_not_found",
    `removed participant: ${gone}`);
  t.check((await admin.listParticipants("hall")).map((p) => p.identity).join() === "alice", "alice alone");

  // Refusals carry the relay's code: a room's token cannot list every room.
  const player = new gs.RoomAdmin(base, env.GSRELAY_WATCH_TOKEN);
  const refused = await player.listRooms().catch((e) => e);
  t.check(refused instanceof gs.ApiError && refused.status === 403 && refused.code === "forbidden_room",
    `listRooms with a player's token: ${refused}`);
  const forbidden = await player.updateParticipant("hall", "alice", { publish: true }).catch((e) => e);
  t.check(forbidden instanceof gs.ApiError && forbidden.code === "forbidden_right", `update with a player's token: ${forbidden}`);

  // A leave of the player's own, then the room closes: the watch ends, told why.
  await gs.leave({ baseUrl: base, sessionId: alice.session_id, token: env.GSRELAY_ALICE_TOKEN });
  await logged(page, "alice's leave", { event: "leave", identity: "alice" });
  await admin.closeRoom("hall");
  await logged(page, "the room's closing", { event: "end", reason: "room_closed" });
  const after = await page.evaluate(() => ({ ended: window.presence.ended, size: window.presence.participants.size,
    connected: window.presence.connected, reconnects: window.presence.reconnects }));
  t.check(after.ended === "room_closed" && after.size === 0 && !after.connected && after.reconnects === 0,
    `after the close: ${JSON.stringify(after)}`);
  const closed = await joinHall(env.GSRELAY_ALICE_TOKEN).catch((e) => e);
  t.check(closed instanceof gs.ApiError && closed.code === "room_closed", `join after the close: ${closed}`);
  t.check(pageErrors.length === 0, `uncaught errors in the page: ${pageErrors}`);
}

try {
  await standInStreams();
} catch (e) {
  t.check(false, `stand-in streams: ${e.stack}`);
}
await withChromium(t, againstTheRelay);
t.finish();
