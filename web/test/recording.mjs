// The client's recording, replay and mirror calls in Node against a real relay (driven by
// tests/web_replay.rs), while a Rust client publishes a moving head into room "arena" over
// UDP/SRTP. Environment: GSRELAY_BASE, GSRELAY_RELAY_ADMIN (admin of every room),
// GSRELAY_ROOM_ADMIN (admin of "arena" only), GSRELAY_TOKENS (JSON: `subscribe` and
// `publish`, each a token by room, for "arena-replay" and "arena-delayed"; only an admin
// token may name every room).
// Prints "N passed, M failed".
import * as gs from "../client/gsrelay.js";
import { Tally } from "./support.mjs";

const env = process.env;
const baseUrl = env.GSRELAY_BASE;
const token = env.GSRELAY_RELAY_ADMIN;
const t = new Tally();
const tokens = JSON.parse(env.GSRELAY_TOKENS);
const ROOM = "arena";
const REPLAY = "arena-replay";
const MIRROR = "arena-delayed";
/** How long the room is recorded: long enough to seek within, past two checkpoints. */
const RECORD_MS = 3000;
const WAIT_MS = 15000;

/** Resolves to what `call` resolves to once `ok` holds of it; fails after WAIT_MS. */
async function until(what, call, ok) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const v = await call();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)} after ${WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Checks that `promise` rejects with an ApiError of `status` (and `code`, if given). */
async function refused(what, promise, status, code) {
  try {
    const v = await promise;
    t.check(false, `${what}: accepted (${JSON.stringify(v)})`);
  } catch (e) {
    const ok = e instanceof gs.ApiError && e.status === status && (code === undefined || e.code === code);
    t.check(ok, `${what}: ${e instanceof gs.ApiError ? `${e.status} ${e.code}` : e}, expected ${status} ${code ?? ""}`);
  }
}

/** Checks that `promise` rejects with a TypeError before anything is sent. */
async function mistaken(what, promise) {
  try {
    await promise;
    t.check(false, `${what}: accepted`);
  } catch (e) {
    t.check(e instanceof TypeError && e.message.length > 10, `${what}: ${e}`);
  }
}

try {
  await run();
} catch (e) {
  t.check(false, `unexpected: ${e.stack}`);
}
t.finish();

async function run() {
  // Garbage is refused by the client itself, with a message naming the argument.
  await mistaken("startRecording without a room", gs.startRecording({ baseUrl, token }));
  await mistaken("startRecording with a numeric room", gs.startRecording({ baseUrl, token, room: 7 }));
  await mistaken("listRecordings without a token", gs.listRecordings({ baseUrl }));
  await mistaken("getRecording with an empty id", gs.getRecording({ baseUrl, token, id: "" }));
  await mistaken("startReplay with a word for a speed", gs.startReplay({ baseUrl, token, recording: "r", room: "x", speed: "fast" }));
  await mistaken("startReplay from a negative time", gs.startReplay({ baseUrl, token, recording: "r", room: "x", fromMs: -1 }));
  await mistaken("controlReplay with nothing to change", gs.controlReplay({ baseUrl, token, room: REPLAY }));
  await mistaken("seekReplay to a fraction", gs.seekReplay({ baseUrl, token, room: REPLAY, positionMs: 1.5 }));
  await mistaken("pauseReplay with a string for paused", gs.controlReplay({ baseUrl, token, room: REPLAY, paused: "yes" }));
  await mistaken("startMirror without a delay", gs.startMirror({ baseUrl, token, room: ROOM, mirror: MIRROR }));
  await mistaken("startMirror with NaN", gs.startMirror({ baseUrl, token, room: ROOM, mirror: MIRROR, delayMs: NaN }));
  for (const bad of [null, 5, {}, { position_ms: 1 }, { position_ms: "1", speed: 1 }]) {
    try { gs.replayPosition(bad, 5); t.check(false, `replayPosition(${JSON.stringify(bad)}) accepted`); } catch (e) { t.check(e instanceof TypeError, `replayPosition: ${e}`); }
  }
  try { gs.replayPosition({ position_ms: 1, speed: 1 }, "soon"); t.check(false, "replayPosition with a word for a time"); } catch (e) { t.check(e instanceof TypeError, `${e}`); }
  try { gs.recordingDownloadUrl({ baseUrl }); t.check(false, "recordingDownloadUrl without an id"); } catch (e) { t.check(e instanceof TypeError, `${e}`); }

  // replayPosition: moves at the speed, stops paused, ended and at the end.
  const r = { recording: "r", position_ms: 1000, duration_ms: 5000, speed: 2, paused: false, ended: false };
  t.check(gs.replayPosition(r, 500) === 2000, "replayPosition at 2x");
  t.check(gs.replayPosition({ ...r, paused: true }, 500) === 1000, "replayPosition paused");
  t.check(gs.replayPosition({ ...r, ended: true }, 500) === 1000, "replayPosition ended");
  t.check(gs.replayPosition(r, 60_000) === 5000, "replayPosition capped at the duration");
  t.check(gs.replayPosition(r, -50) === 1000, "replayPosition never goes back");
  t.check(gs.REPLAY_SPEEDS[0] === 0.25 && gs.REPLAY_SPEEDS.at(-1) === 8, `speeds ${gs.REPLAY_SPEEDS}`);

  // Record the room the Rust client publishes into.
  const started = await gs.startRecording({ baseUrl, token, room: ROOM });
  t.check(started.room === ROOM && started.state === "recording" && /^rec-/.test(started.id), `started ${JSON.stringify(started)}`);
  const id = started.id;
  await refused("a second recording of the room", gs.startRecording({ baseUrl, token, room: ROOM }), 409, "already_recording");
  await refused("recording a room nobody is in", gs.startRecording({ baseUrl, token, room: "nobody-here" }), 404, "room_not_found");
  const running = await gs.recording({ baseUrl, token: env.GSRELAY_ROOM_ADMIN, room: ROOM });
  t.check(running.id === id, `running ${running.id}`);
  await refused("deleting a running recording", gs.deleteRecording({ baseUrl, token, id }), 409, "recording_running");
  await until("the recording's length", () => gs.getRecording({ baseUrl, token, id }),
    (v) => v.bytes > 0 && Date.now() - v.started_at >= RECORD_MS);
  const stopped = await gs.stopRecording({ baseUrl, token, room: ROOM });
  t.check(stopped.id === id && stopped.state === "stopped" && stopped.stop_reason === "stopped" && stopped.bytes > 0,
    `stopped ${JSON.stringify(stopped)}`);
  await refused("the room's recording once stopped", gs.recording({ baseUrl, token, room: ROOM }), 404, "not_recording");
  await refused("stopping it again", gs.stopRecording({ baseUrl, token, room: ROOM }), 404, "not_recording");

  // List, inspect, download.
  const all = await gs.listRecordings({ baseUrl, token });
  t.check(Array.isArray(all) && all.some((x) => x.id === id && x.room === ROOM), `listed ${JSON.stringify(all)}`);
  await refused("listing with one room's admin token", gs.listRecordings({ baseUrl, token: env.GSRELAY_ROOM_ADMIN }), 403);
  await refused("listing with a subscribe token", gs.listRecordings({ baseUrl, token: tokens.subscribe[REPLAY] }), 403);
  await refused("listing with a made-up token", gs.listRecordings({ baseUrl, token: "not.a.token" }), 401);
  const one = await gs.getRecording({ baseUrl, token: env.GSRELAY_ROOM_ADMIN, id });
  t.check(one.id === id && one.state === "stopped" && one.checkpoint_secs >= 1, `one ${JSON.stringify(one)}`);
  await refused("an unknown recording", gs.getRecording({ baseUrl, token, id: "rec-0-00000000" }), 404, "recording_not_found");
  await refused("a recording id with a slash", gs.getRecording({ baseUrl, token, id: "../etc" }), 404);
  const url = gs.recordingDownloadUrl({ baseUrl, id });
  t.check(url === `${baseUrl}/v1/recordings/${id}/pcapng`, `download url ${url}`);
  const pcap = await gs.downloadRecording({ baseUrl, token, id });
  const shb = new DataView(pcap.buffer, pcap.byteOffset).getUint32(0, true);
  t.check(pcap instanceof Uint8Array && pcap.length > 100 && shb === 0x0a0d0d0a, `pcapng of ${pcap.length} bytes, first block 0x${shb.toString(16)}`);
  await refused("downloading an unknown recording", gs.downloadRecording({ baseUrl, token, id: "rec-0-00000000" }), 404, "recording_not_found");

  // Replay it, paused, into a room of its own.
  await refused("replaying into the live room", gs.startReplay({ baseUrl, token, recording: id, room: ROOM }), 409, "room_live");
  await refused("replaying at 9x", gs.startReplay({ baseUrl, token, recording: id, room: REPLAY, speed: 9 }), 422, "invalid_speed");
  await refused("replaying an unknown recording", gs.startReplay({ baseUrl, token, recording: "rec-0-00000000", room: REPLAY }), 404, "recording_not_found");
  await refused("replaying from past the end", gs.startReplay({ baseUrl, token, recording: id, room: REPLAY, fromMs: 3_600_000 }), 422);
  await refused("replaying into a bad room name", gs.startReplay({ baseUrl, token, recording: id, room: "no spaces" }), 400);
  const replay = await gs.startReplay({ baseUrl, token, recording: id, room: REPLAY, paused: true });
  t.check(replay.room === REPLAY && replay.recording === id && replay.paused === true && replay.speed === 1
    && replay.duration_ms >= RECORD_MS - 1000 && replay.position_ms < 1000 && Array.isArray(replay.remapped),
  `replay ${JSON.stringify(replay)}`);
  await refused("a second replay into the room", gs.startReplay({ baseUrl, token, recording: id, room: REPLAY }), 409);
  const listed = await gs.listReplays({ baseUrl, token });
  t.check(listed.some((x) => x.room === REPLAY && x.recording === id), `replays ${JSON.stringify(listed)}`);
  await refused("replays listed with a room token", gs.listReplays({ baseUrl, token: env.GSRELAY_ROOM_ADMIN }), 403);
  const status = await gs.replayStatus({ baseUrl, token, room: REPLAY });
  t.check(status.position_ms === replay.position_ms && status.paused, `status ${JSON.stringify(status)}`);
  await refused("the status of a room without a replay", gs.replayStatus({ baseUrl, token, room: "no-replay" }), 404, "replay_not_found");

  // A viewer's join answer and the room info say it is a replay; a publisher is refused.
  const viewerJoin = await gs.join({ baseUrl, token: tokens.subscribe[REPLAY], room: REPLAY, request: { transport: "rtp" } });
  t.check(viewerJoin.replay?.recording === id && viewerJoin.replay.duration_ms === replay.duration_ms
    && viewerJoin.replay.paused === true && viewerJoin.delayed === undefined, `join answer ${JSON.stringify(viewerJoin.replay)}`);
  const info = await gs.roomInfo({ baseUrl, token, room: REPLAY });
  t.check(info.replay?.recording === id && info.replay.position_ms === replay.position_ms, `room info ${JSON.stringify(info.replay)}`);
  await gs.leave({ baseUrl, token: tokens.subscribe[REPLAY], sessionId: viewerJoin.session_id });
  await refused("a publisher joining the replay", gs.join({ baseUrl, token: tokens.publish[REPLAY], room: REPLAY, request: { transport: "rtp" } }), 403, "room_read_only");

  // Seek, speed, resume, pause.
  const target = { baseUrl, token, room: REPLAY };
  const seeked = await gs.seekReplay({ ...target, positionMs: 2000 });
  t.check(seeked.position_ms === 2000 && seeked.paused, `seeked ${JSON.stringify(seeked)}`);
  const fast = await gs.setReplaySpeed({ ...target, speed: 0.5 });
  t.check(fast.speed === 0.5 && fast.position_ms === 2000, `speed ${JSON.stringify(fast)}`);
  const both = await gs.controlReplay({ ...target, seekMs: 500, speed: 2, paused: false });
  t.check(both.position_ms >= 500 && both.position_ms < 1500 && both.speed === 2 && !both.paused, `all three ${JSON.stringify(both)}`);
  const readAt = Date.now();
  const moved = await until("the replay's clock", () => gs.replayStatus(target), (v) => v.position_ms >= 1000);
  // The relay's clock against the client's extrapolation of it, within a poll's latency.
  const predicted = gs.replayPosition(both, Date.now() - readAt);
  t.check(Math.abs(predicted - moved.position_ms) < 400, `extrapolated ${predicted} ms, relay at ${moved.position_ms} ms`);
  const paused = await gs.pauseReplay(target);
  t.check(paused.paused && paused.position_ms >= 1000, `paused ${JSON.stringify(paused)}`);
  const resumed = await gs.resumeReplay(target);
  t.check(!resumed.paused, `resumed ${JSON.stringify(resumed)}`);
  await gs.pauseReplay(target);
  await refused("seeking past the end", gs.seekReplay({ ...target, positionMs: replay.duration_ms + 60_000 }), 422, "seek_past_end");
  await refused("a speed of 0.1", gs.setReplaySpeed({ ...target, speed: 0.1 }), 422, "invalid_speed");
  await refused("controlling a room without a replay", gs.pauseReplay({ baseUrl, token, room: "no-replay" }), 404, "replay_not_found");
  await refused("controlling with a subscribe token", gs.pauseReplay({ ...target, token: tokens.subscribe[REPLAY] }), 403);

  // A mirror of the live room, two seconds late.
  await refused("a mirror into its own room", gs.startMirror({ baseUrl, token, room: ROOM, mirror: ROOM, delayMs: 2000 }), 422, "invalid_request");
  await refused("a mirror 10 ms late", gs.startMirror({ baseUrl, token, room: ROOM, mirror: MIRROR, delayMs: 10 }), 422, "invalid_delay");
  await refused("a mirror of a room nobody is in", gs.startMirror({ baseUrl, token, room: "nobody-here", mirror: MIRROR, delayMs: 2000 }), 404, "room_not_found");
  await refused("no mirror yet", gs.mirror({ baseUrl, token, room: ROOM }), 404, "no_mirror");
  const m = await gs.startMirror({ baseUrl, token, room: ROOM, mirror: MIRROR, delayMs: 2000 });
  t.check(m.room === ROOM && m.mirror === MIRROR && m.delay_ms === 2000 && Math.abs(m.started_at - Date.now()) < 60_000,
    `mirror ${JSON.stringify(m)}`);
  await refused("a second mirror of the room", gs.startMirror({ baseUrl, token, room: ROOM, mirror: "another", delayMs: 2000 }), 409, "already_mirrored");
  const shown = await gs.mirror({ baseUrl, token: env.GSRELAY_ROOM_ADMIN, room: ROOM });
  t.check(shown.mirror === MIRROR && shown.delay_ms === 2000, `mirror shown ${JSON.stringify(shown)}`);
  const spectator = await gs.join({ baseUrl, token: tokens.subscribe[MIRROR], room: MIRROR, request: { transport: "rtp" } });
  t.check(spectator.delayed?.source === ROOM && spectator.delayed.delay_ms === 2000 && spectator.replay === undefined,
    `spectator's answer ${JSON.stringify(spectator.delayed)}`);
  const mirrorInfo = await gs.roomInfo({ baseUrl, token, room: MIRROR });
  t.check(mirrorInfo.delayed?.source === ROOM && mirrorInfo.delayed.delay_ms === 2000, `mirror room info ${JSON.stringify(mirrorInfo.delayed)}`);
  await gs.leave({ baseUrl, token: tokens.subscribe[MIRROR], sessionId: spectator.session_id });
  await refused("a publisher joining the mirror", gs.join({ baseUrl, token: tokens.publish[MIRROR], room: MIRROR, request: { transport: "rtp" } }), 403, "room_read_only");
  await gs.stopMirror({ baseUrl, token, room: ROOM });
  await refused("the mirror once stopped", gs.mirror({ baseUrl, token, room: ROOM }), 404, "no_mirror");
  await refused("stopping it again", gs.stopMirror({ baseUrl, token, room: ROOM }), 404, "no_mirror");

  // Stop the replay, delete the recording.
  await gs.stopReplay(target);
  await refused("the replay once stopped", gs.replayStatus(target), 404, "replay_not_found");
  await refused("stopping it again", gs.stopReplay(target), 404, "replay_not_found");
  await gs.deleteRecording({ baseUrl, token, id });
  await refused("the recording once deleted", gs.getRecording({ baseUrl, token, id }), 404, "recording_not_found");
  await refused("deleting it again", gs.deleteRecording({ baseUrl, token, id }), 404, "recording_not_found");
}
