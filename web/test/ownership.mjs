// Room streams and object ownership in the JavaScript client (driven by
// tests/web_client.rs): a Session over a stand-in connection publishes on its room stream,
// sends requests and releases, and keeps what it holds in step with the relay's notices,
// which the Rust test hands in as hex (argv[2]) from the relay's own codec. Prints the
// request it built as a JSON line for the Rust side to decode, then "N passed, M failed".
import * as gs from "../client/gsrelay.js";
import { Tally } from "./support.mjs";

const t = new Tally();
const sent = [];
const s = new gs.Session({ baseUrl: "http://relay.test", token: "tok", dialect: "draft01", startedMs: 0,
  answer: { session_id: "s1", ssrc: 0x1111, relay_ssrc: 0x9999, room_ssrc: 0x5555, streams: [] } });
s.conn = { send: async (p) => { sent.push(p); return true; } };
const notices = [];
s.onownership = (n) => notices.push(n);

t.check(s.roomSsrc === 0x5555, `room ssrc ${s.roomSsrc}`);
const ball = { type: "Object1", id: 100, time: 0, position: { x: 1, y: 2, z: 3 },
  rotation: { i: 0, j: 0, k: 0 }, scale: 1, active: true };
await s.publishRoom([ball]);
const rtp = gs.parseRtp(sent.at(-1));
t.check(rtp.ok && rtp.packet.ssrc === 0x5555, "published on the room stream");

const big = 2n ** 60n + 3n;
await s.requestObjects([[0x7777, 9], [0x7777, big]]);
const request = gs.parseRtcp(sent.at(-1));
const item = request.ok ? request.items[0] : null;
t.check(item?.type === "ownership" && item.kind === "request" && item.sender === 0x1111, "a request");
t.check(item?.entries.length === 2 && item.entries[0].object === 9 && item.entries[1].object === big,
  `entries ${JSON.stringify(item?.entries, (_, v) => typeof v === "bigint" ? String(v) : v)}`);
console.log(JSON.stringify({ request: gs.toHex(sent.at(-1)) }));

// More than 16 objects go in several messages.
const before = sent.length;
await s.requestObjects(Array.from({ length: 20 }, (_, i) => [0x7777, i]));
t.check(sent.length - before === 2, `20 objects in ${sent.length - before} messages`);
let threw = false;
try { gs.buildOwnership("granted", 1, [[1, 1]]); } catch { threw = true; }
t.check(threw, "a client does not build notices");

// The relay's notices (from the Rust codec): granted (0x7777, 9), refused (0x7777, big)
// contended, then lost (0x7777, 9) gone.
for (const hex of process.argv.slice(2)) s.onPacket(gs.fromHex(hex));
t.check(notices.length === 3, `notices ${notices.length}`);
t.check(notices[0]?.kind === "granted" && notices[0].object === 9, "granted");
t.check(notices[1]?.kind === "refused" && notices[1].reason === "contended" && notices[1].object === big, "refused");
t.check(notices[2]?.kind === "lost" && notices[2].reason === "gone", "lost");
t.check(!s.holds(0x7777, 9), "lost is no longer held");

// A notice not from the relay's SSRC, and garbage, change nothing.
const forged = gs.fromHex(process.argv[2]);
new DataView(forged.buffer).setUint32(4, 0x1234);
s.onPacket(forged);
t.check(notices.length === 3 && !s.holds(0x7777, 9), "a notice from another SSRC is ignored");
const bad = gs.buildOwnership("request", 1, [[1, 1]]).slice(0, 20);
new DataView(bad.buffer).setUint16(2, 4);
const parsed = gs.parseRtcp(bad);
t.check(parsed.ok && parsed.items[0].type === "other", "a short ownership message reads as other");
t.finish();
