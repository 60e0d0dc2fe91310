// The client's room state and transport framing (driven by tests/web_client.rs).
// Prints "N passed, M failed".
import * as gs from "../client/gsrelay.js";
import { Tally } from "./support.mjs";

const t = new Tally();
let clock = 0;
const room = new gs.RoomState({ now: () => clock });
let changes = 0;
room.onchange = () => changes++;

const still = (x) => ({ x, y: 0, z: 0, vx: 0, vy: 0, vz: 0 });
const rot = { si: 0, sj: 0, sk: 0, ei: 0, ej: 0, ek: 0 };
const head = (id, x) => ({ type: "Head1", id, time: 0, location: still(x), rotation: rot });
const rtp = (ssrc, seq, objects) =>
  gs.buildRtp({ sequenceNumber: seq, timestamp: seq * 3000, ssrc, payload: gs.encode(objects) });
const x = (ssrc, id) => room.streams.get(ssrc)?.objects.get(String(id))?.object.location.x;

// Latest state per (SSRC, objectID); a reordered older packet does not overwrite it.
t.check(room.ingest(rtp(1, 65535, [head(1, 1), head(2, 2)])) === "rtp", "first packet");
t.check(room.ingest(rtp(1, 0, [head(1, 10)])) === "rtp", "next packet, across the wrap");
t.check(room.ingest(rtp(1, 65534, [head(1, 99), head(2, 98)])) === "rtp", "late packet");
t.check(x(1, 1) === 10 && x(1, 2) === 2, `latest kept: ${x(1, 1)}, ${x(1, 2)}`);
t.check(room.dropped.stale === 2, `stale counted: ${room.dropped.stale}`);
t.check(room.objectCount === 2 && changes === 3, `count ${room.objectCount}, changes ${changes}`);

// Aggregated delivery: each container's objects belong to its sender.
const agg = gs.buildRtp({ sequenceNumber: 7, timestamp: 0, ssrc: 0xabc,
  payload: gs.encode([{ type: "Container", ssrc: 2, objects: [head(1, 5)] },
    { type: "Container", ssrc: 3, objects: [head(1, 6), { type: "Unknown", tag: 16384, data: gs.fromHex("0901") }] }]) });
t.check(room.ingest(agg) === "rtp" && x(2, 1) === 5 && x(3, 1) === 6, "containers unpacked per sender");
t.check(room.streams.get(3).objects.has("9"), "an unknown object keyed by its leading VarUInt");
t.check(!room.streams.has(0xabc), "the relay's own SSRC holds no objects");

// Rates over the last two seconds of the injected clock.
clock = 1000;
for (let i = 1; i <= 10; i++) room.ingest(rtp(4, i, [head(1, i)]));
t.check(room.rate(4) === 5, `rate ${room.rate(4)}`);
clock = 3500;
t.check(room.rate(4) === 0, `rate after 2.5 s idle: ${room.rate(4)}`);

// BYE removes the stream and its objects; RTCP otherwise changes nothing.
t.check(room.ingest(gs.buildBye(1)) === "rtcp" && !room.streams.has(1), "BYE removes");
t.check(room.ingest(gs.buildFir(9, 2, 1)) === "rtcp" && room.streams.has(2), "FIR changes nothing");
const items = gs.parseRtcp(Uint8Array.from([...gs.buildRr(5), ...gs.buildFir(5, 6, 7), ...gs.buildPli(5, 6)])).items;
t.check(items.map((i) => i.type).join() === "rr,fir,pli" && items[1].entries[0].ssrc === 6 && items[1].entries[0].seq === 7,
  `compound RTCP ${JSON.stringify(items)}`);

// Malformed input is dropped by reason, never thrown.
t.check(room.ingest(Uint8Array.of(0x80, 0x60, 0)) === "dropped:rtp", "short RTP");
t.check(room.ingest(gs.buildRtp({ sequenceNumber: 1, timestamp: 0, ssrc: 8, payload: Uint8Array.of(0xff) })) === "dropped:payload", "bad payload");
t.check(room.ingest(Uint8Array.of(0x80, 0xc9, 0, 9)) === "dropped:rtcp", "RTCP length past the end");
t.check(!room.streams.has(8), "nothing kept from a bad payload");

// RTP: header fields, CSRCs, extension and padding.
const p = gs.parseRtp(gs.fromHex("b1e1000a000000010000000200000003beef000101020304aabb0002"));
t.check(p.ok && p.packet.marker && p.packet.payloadType === 97 && p.packet.sequenceNumber === 10 &&
  p.packet.timestamp === 1 && p.packet.ssrc === 2 && p.packet.csrcs.join() === "3" &&
  p.packet.extension.profile === 0xbeef && gs.toHex(p.packet.extension.data) === "01020304" &&
  gs.toHex(p.packet.payload) === "aabb", `RTP parse ${JSON.stringify(p)}`);
const built = gs.parseRtp(gs.buildRtp({ payloadType: 96, marker: true, sequenceNumber: 65535, timestamp: 0xffffffff, ssrc: 0xdeadbeef, payload: Uint8Array.of(1, 2) }));
t.check(built.ok && built.packet.marker && built.packet.ssrc === 0xdeadbeef && built.packet.timestamp === 0xffffffff &&
  gs.toHex(built.packet.payload) === "0102", "RTP build → parse");
t.check(!gs.parseRtp(gs.fromHex("a0600001000000000000000100")).ok, "padding count 0 refused");

// QUIC varints at every length boundary; RoQ datagrams and streams.
for (const [v, len] of [[0, 1], [63, 1], [64, 2], [16383, 2], [16384, 4], [2 ** 30 - 1, 4], [2 ** 30, 8], [2n ** 62n - 1n, 8]]) {
  const e = gs.encodeQuicVarint(v);
  const d = gs.decodeQuicVarint(e);
  t.check(e.length === len && String(d.value) === String(v) && d.length === len, `varint ${v}`);
}
t.check(gs.decodeQuicVarint(Uint8Array.of(0x40)) === null, "truncated varint");
const dg = gs.parseDatagram(gs.frameDatagram(300, Uint8Array.of(0x80, 0xc8, 0, 0)));
t.check(dg.ok && dg.flowId === 300 && dg.packet.length === 4, "datagram");
t.check(!gs.parseDatagram(Uint8Array.of(0x41)).ok && !gs.parseDatagram(Uint8Array.of(0x05)).ok, "bad datagrams");
const stream = Uint8Array.from([...gs.frameStreamHeader(7), ...gs.frameStreamPacket(Uint8Array.of(1, 2, 3)),
  ...gs.frameStreamPacket(new Uint8Array(200).fill(9))]);
const reader = new gs.RoqStreamReader();
const got = [];
for (let i = 0; i < stream.length; i += 5) got.push(...reader.push(stream.subarray(i, i + 5)));
t.check(reader.flowId === 7 && got.length === 2 && got[0].length === 3 && got[1].length === 200 && !reader.error, "stream in 5-byte chunks");
const big = new gs.RoqStreamReader({ maxPacket: 100 });
big.push(Uint8Array.from([...gs.frameStreamHeader(7), ...gs.encodeQuicVarint(101)]));
t.check(big.error instanceof gs.DecodeError && big.push(Uint8Array.of(1)).length === 0, "oversized stream packet stops the stream");

// Prediction bounds: capped extrapolation, Time1 wrap-around.
const moving = { type: "Head1", id: 1, time: 65500, location: { x: 0, y: 0, z: 0, vx: 2, vy: 0, vz: 0 }, rotation: rot };
t.check(Math.abs(gs.predict(moving, 65536 + 400).position[0] - 0.872) < 1e-9, "Time1 wraps");
t.check(gs.predict(moving, 65536 + 30000, { maxAheadMs: 1000 }).position[0] === 2, "capped at one second");
t.check(Object.keys(gs.predict({ type: "GameControl1" }, 0)).length === 0, "no position for a controller");

t.finish();
