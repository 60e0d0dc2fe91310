// A page using the client as the npm package, in TypeScript: type-checked (never run) by
// tests/js_package.rs with `tsc --noEmit --strict` against the declarations of the package
// as `npm pack` makes it. Each `@ts-expect-error` is a misuse the declarations must refuse
// (tsc fails if one is accepted).
import * as gs from "gsrelay";
import {
  ApiError,
  Liveness,
  RoomState,
  Session,
  type GameObject,
  type Head1,
  type Interest,
  type JoinAnswer,
  type PayloadObject,
  type RejoinInfo,
  type RoomInfo,
} from "gsrelay";
// The relay's copy, typed by the package (web/test/relay-module.d.ts).
import * as fromRelay from "http://relay:8080/client/gsrelay.js";

declare function drawAt(label: string, x: number, z: number, yaw: number): void;
declare function freshToken(): Promise<string>;

const params = new URLSearchParams(location.hash.slice(1));
const token = params.get("token") ?? "";
const roomName = params.get("room") ?? "dev";
const status = document.querySelector("#status")!;

// Connect, with every option.
const interest: Interest = {
  types: { deny: ["Mesh1", 20000] },
  area: { radius: 30 },
  rates: [{ within: 10 }, { max_hz: 2 }],
  delivery: { mode: "aggregated", max_delay_ms: 10 },
};
let session: Session;
try {
  session = await Session.connect({
    baseUrl: location.origin,
    room: roomName,
    token,
    dialect: "draft01",
    interest,
    roomState: new RoomState({ dialect: "draft01" }),
    transport: gs.hasWebTransport() ? "webtransport" : "webrtc",
    silenceMs: 2000,
    autoRejoin: true,
  });
} catch (e) {
  if (e instanceof ApiError && e.code === "unsupported_transport") {
    session = await Session.connect({ room: roomName, token, transport: "webrtc" });
  } else {
    throw e;
  }
}
const s: Session = session;
const answer: JoinAnswer = s.answer;
status.textContent = `session ${answer.session_id} (SSRC ${answer.ssrc}), ${answer.streams.length} streams`;
if (s.firstStateMs !== null) status.textContent += `, first state after ${s.firstStateMs.toFixed(0)} ms`;

// Receive objects: the room state, narrowed by type, drawn where prediction puts them.
s.room.onchange = (room: RoomState) => {
  status.textContent = `${room.objectCount} objects in ${room.streams.size} streams`;
};
function draw(): void {
  for (const { ssrc, key, object, receivedMs } of s.room.objects()) {
    const p = gs.predict(object, Date.now(), { maxAheadMs: 1000 });
    if (p.position && p.rotation) drawAt(`${ssrc}/${key}`, p.position[0], p.position[2], gs.yawOf(p.rotation));
    switch (object.type) {
      case "Head1": {
        const ipd: gs.Float | undefined = object.ipd;
        const x = object.location.x;
        // A float may be a NaN payload kept as a string.
        if (typeof x === "number" && ipd !== undefined) console.log(x.toFixed(2), receivedMs);
        break;
      }
      case "Object1":
        console.log(typeof object.scale === "object" ? object.scale.x : object.scale, object.parent);
        break;
      case "Mesh2":
        console.log(object.meshUrl, object.texture && "url" in object.texture ? object.texture.url : "");
        break;
      case "Unknown":
        console.log(object.tag, gs.toHex(object.data));
        break;
    }
  }
  for (const [ssrc, stream] of s.room.streams) console.log(ssrc, stream.objects.size, s.room.rate(ssrc));
  const d: { stale: number } = s.room.dropped;
  console.log(d.stale);
  requestAnimationFrame(draw);
}
requestAnimationFrame(draw);

// Publish.
const head: Head1 = {
  type: "Head1",
  id: 1,
  time: gs.time1(),
  location: { x: 0, y: 1.7, z: 0, vx: 0, vy: 0, vz: 0 },
  rotation: { si: 0, sj: 0, sk: 0, ei: 0, ej: 0, ek: 0 },
};
const sent: boolean = await s.publish([head, { type: "Hand1", id: 2n ** 60n, time: 0, left: true,
  location: head.location, rotation: head.rotation }]);
await s.publish(head, { payloadType: 96 });
await s.requestSnapshot();

// Reconnection: told after each rejoin and each failed attempt; a fresh token for the next.
s.onrejoin = (info: RejoinInfo) => {
  const why: "silence" | "closed" | "asked" = info.reason;
  status.textContent = `rejoined (${why}) after ${info.silentMs} ms silence in ${info.attempts} attempts: ` +
    `${info.previousSessionId} → ${info.sessionId}, SSRC ${info.ssrc}`;
  void s.publish(head);
};
s.onrejoinerror = (error: Error) => console.warn("rejoin failed, trying again", error.message);
s.token = await freshToken();
const silent: boolean = s.isSilent();
const heard: number = s.lastHeardMs;
const threshold: number = s.liveness.thresholdMs;
console.log(silent, heard, threshold, s.rejoins, sent);
const back: boolean = await s.rejoin();

// Watching the silence itself (`autoRejoin: false`).
const manual = await Session.connect({ room: roomName, token, autoRejoin: false, silenceMs: null });
setInterval(() => {
  if (manual.isSilent()) void manual.rejoin("silence");
}, 250);

// Interest and the admin inspection.
await gs.setInterest({ sessionId: s.answer.session_id, token, interest: { echo: true, streams: { deny: [42] } } });
const claims = gs.tokenClaims(token);
if (claims?.admin) {
  const info: RoomInfo = await gs.roomInfo({ room: claims.room, token });
  for (const row of info.sessions) console.log(row.identity, row.rtt_ms ?? "no RTT yet", row.delivery);
  for (const row of info.streams) console.log(row.ssrc, row.objects, row.bytes);
}

// Presence: who is in the room, whose stream is which; the whole room again after a drop.
const who: gs.Presence = gs.watchPresence({
  room: roomName,
  token,
  onjoin: (p: gs.PresenceParticipant) => console.log(p.identity, "joined with", p.ssrcs, p.muted),
  onend: ({ reason, error }: gs.PresenceEndInfo) => console.log("presence ended:", reason, error?.message),
});
who.onsnapshot = (presence) => console.log(presence.participants.size, "in", presence.roomName, presence.metadata);
who.onupdate = (p) => console.log(p.identity, JSON.stringify(p.metadata));
who.onleave = (p) => console.log(p.identity, "left");
who.onroom = (metadata: gs.Json) => console.log("room metadata", metadata);
who.onchange = () => {
  for (const [ssrc] of s.room.streams) console.log(ssrc, who.identityOf(ssrc) ?? "unknown");
};
who.onerror = (e) => console.warn("presence dropped, reopening", e.message, who.reconnects);
const viaFetch = gs.watchPresence({ baseUrl: location.origin, room: roomName, token, fetchImpl: fetch });
const ended: gs.PresenceEndInfo = await viaFetch.done;
const why: gs.PresenceEnd = ended.reason;
console.log(why, who.connected, who.ended);
who.close();

// The server API, as a backend (or a trusted page) calls it.
const admin = new gs.RoomAdmin(location.origin, token);
const rooms: gs.RoomSummary[] = await admin.listRooms();
for (const r of rooms) console.log(r.room, r.sessions, r.participants, r.streams, r.objects, r.metadata);
const roomNow: RoomInfo = await admin.getRoom(roomName);
console.log(roomNow.metadata);
const people: gs.Participant[] = await admin.listParticipants(roomName);
for (const p of people) console.log(p.identity, p.sessions.length, p.publish, p.subscribe, p.joined_at);
const muted: gs.Participant = await admin.updateParticipant(roomName, "mallory", { publish: false });
await admin.updateParticipant(roomName, "alice", { metadata: { team: "red", score: [1, 2] } });
console.log(muted.muted, (await admin.getParticipant(roomName, "alice")).metadata);
await admin.setRoomMetadata(roomName, { map: "dust", round: 3 });
await admin.setRoomMetadata(roomName, null);
try {
  await admin.removeParticipant(roomName, "mallory");
  await admin.closeRoom(roomName);
} catch (e) {
  if (e instanceof ApiError) console.log(e.status, e.code);
}

// The codec and the packets, without a relay.
const payload: Uint8Array = gs.encode([head], "gse");
const decoded = gs.decode(payload, "gse");
if (decoded.ok) {
  const objects: PayloadObject[] = decoded.objects;
  const json = objects.map(gs.objectToJson);
  const again = gs.objectFromJson(JSON.parse(gs.stringify(json)));
  console.log(gs.kindOf(gs.CONTAINER_TAG), gs.tagOf(again.type, "gse"), gs.DIALECTS.join());
} else {
  console.log(decoded.error.offset, decoded.error.kind, decoded.error.message);
}
const rtp = gs.buildRtp({ sequenceNumber: 1, timestamp: 0, ssrc: 7, payload });
const parsed = gs.parseRtp(rtp);
if (parsed.ok) console.log(parsed.packet.payloadType, parsed.packet.payload.length);
const rtcp = gs.parseRtcp(gs.buildFir(1, answer.relay_ssrc, 0));
if (rtcp.ok) {
  for (const item of rtcp.items) {
    if (item.type === "fir") console.log(item.entries.map((e) => e.ssrc));
    else if (item.type === "bye") console.log(item.ssrcs);
  }
}
const offline = new RoomState({ dialect: "gse", now: () => 0 });
const outcome: gs.IngestOutcome = offline.ingest(rtp);
offline.ingest(gs.buildBye(7));
offline.clear();
console.log(outcome, gs.isRtcp(gs.buildRr(1)), gs.buildPli(1, 2).length);
const datagram = gs.parseDatagram(gs.frameDatagram(answer.webtransport?.flow_id ?? 0, rtp));
if (datagram.ok) console.log(datagram.flowId, gs.decodeQuicVarint(gs.encodeQuicVarint(300))?.value);
const reader = new gs.RoqStreamReader({ maxPacket: 1500 });
const packets: Uint8Array[] = reader.push(gs.frameStreamHeader(3));
console.log(packets.length, reader.push(gs.frameStreamPacket(rtp)).length, reader.flowId, reader.error?.kind);
const q = gs.rot2At(head.rotation, 0.5);
console.log(gs.slerp(q, gs.quatFromVector(0, 0.5, 0), 0.5), gs.extrapolate(head.location, 1),
  gs.timeDeltaMs(1, gs.time1()), gs.f16ToF32(gs.f32ToF16(1.5)), gs.fromHex("ab:cd"), gs.objectKey(head));
const live = new Liveness({ silenceMs: 1000, now: () => performance.now() });
live.heard(true);
live.fail();
console.log(live.isSilent(), live.silentMs(), gs.SILENCE_MS, gs.SILENCE_REPORT_GAPS, gs.REPORT_INTERVAL_MS,
  gs.rejoinDelayMs(1, Math.random));

// The transports, on their own: the browser's objects fit the stand-in types.
const joinAnswer = await gs.join({ room: roomName, token, request: { transport: "webtransport", interest } });
const wt = await gs.WebTransportConnection.open(joinAnswer, {
  onpacket: (p) => offline.ingest(p),
  WebTransportImpl: WebTransport,
});
console.log(wt.status, wt.maxPacketSize, wt.dropped.flow, await wt.send(rtp));
wt.close();
await gs.leave({ sessionId: joinAnswer.session_id, token });
const rtc = await gs.WebRtcConnection.open(
  (sdp) => gs.join({ room: roomName, token, request: { transport: "webrtc", sdp_offer: sdp } }),
  { RTCPeerConnectionImpl: RTCPeerConnection, timeoutMs: 5000, onanswer: (a) => console.log(a.session_id) },
);
console.log(rtc.answer?.webrtc?.max_packet, rtc.dc.label === gs.WEBRTC_CHANNEL, rtc.pc.connectionState);
await (rtc.pc as RTCPeerConnection).getStats();
rtc.close();
await rtc.closed;

await s.close();
console.log(back, gs.VERSION);

// The relay's copy is the same module.
const viaRelay: fromRelay.Session = await fromRelay.Session.connect({ room: roomName, token });
const same: Session = viaRelay;
console.log(same.rejoins);

// Misuses the declarations refuse.
// Recordings, replays and mirrors (a backend's or a trusted page's admin token).
const rec: gs.Recording = await gs.startRecording({ room: roomName, token });
const stoppedRec = await gs.stopRecording({ room: roomName, token });
if (stoppedRec.state === "stopped") console.log(stoppedRec.bytes, stoppedRec.stop_reason);
const pcapng: Uint8Array = await gs.downloadRecording({ id: rec.id, token });
const replay: gs.ReplayStatus = await gs.startReplay({ recording: rec.id, room: `${roomName}-replay`, token, speed: 2 });
const after = await gs.controlReplay({ room: replay.room, token, seekMs: 1000, paused: true });
const nowAt: number = gs.replayPosition(after, performance.now());
for (const [recorded, played] of after.remapped) console.log(recorded, played, nowAt, pcapng.length);
const tv: gs.Mirror = await gs.startMirror({ room: roomName, mirror: `${roomName}-tv`, delayMs: 30_000, token });
console.log(tv.started_at, gs.REPLAY_SPEEDS.includes(replay.speed));
const playing: gs.ReplayInfo | null = s.replay;
const late: number | undefined = s.delayed?.delay_ms;
console.log(playing?.position_ms, late, (await gs.roomInfo({ room: roomName, token })).replay?.duration_ms);
// @ts-expect-error: a seek is in milliseconds, a number
await gs.seekReplay({ room: replay.room, token, positionMs: "1:30" });
// @ts-expect-error: a mirror needs its delay
await gs.startMirror({ room: roomName, mirror: "tv", token });
// @ts-expect-error: a replay status is read-only information, not a recording
const wrong: gs.Recording = replay;
// @ts-expect-error: no such dialect
gs.encode([head], "draft02");
// @ts-expect-error: a session needs a token
await Session.connect({ room: roomName });
// @ts-expect-error: a rejoin's reason is one of three
await s.rejoin("because");
// @ts-expect-error: sessions come from Session.connect
new Session();
// @ts-expect-error: the session's internals are not part of the API
s.generation;
// @ts-expect-error: a float may be a NaN payload string
const n: number = head.location.x;
// @ts-expect-error: a container holds no containers
const nested: GameObject = { type: "Container", ssrc: 1, objects: [] };
// @ts-expect-error: the transport is WebTransport or WebRTC
await Session.connect({ room: roomName, token, transport: "quic" });
// @ts-expect-error: metadata is JSON, not a function
await admin.setRoomMetadata(roomName, () => 1);
// @ts-expect-error: publish is a boolean
await admin.updateParticipant(roomName, "alice", { publish: "no" });
// @ts-expect-error: a presence watch needs its room
gs.watchPresence({ token });
// @ts-expect-error: presence ends for one of four reasons
if (who.ended === "timeout") console.log(who);
// @ts-expect-error: watches come from watchPresence
new gs.Presence();
s.onrejoin = (info) => {
  // @ts-expect-error: onrejoin is told no such reason
  if (info.reason === "timeout") console.log(n, nested, wrong);
};
