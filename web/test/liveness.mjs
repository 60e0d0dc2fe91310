// The client's silence watchdog (driven by tests/web_client.rs): `Liveness` on an injected
// clock, the rejoin back-off, and a `Session` whose transport and HTTP are stand-ins, taken
// from silence to a rejoin that asks for the whole room again. Prints "N passed, M failed".
import * as gs from "../client/gsrelay.js";
import { Tally } from "./support.mjs";

const t = new Tally();
let clock = 0;
const now = () => clock;
const rr = gs.buildRr(0xaaaa);
const head = { type: "Head1", id: 1, time: 0, location: { x: 1, y: 0, z: 0, vx: 0, vy: 0, vz: 0 },
  rotation: { si: 0, sj: 0, sk: 0, ei: 0, ej: 0, ek: 0 } };
const rtp = gs.buildRtp({ sequenceNumber: 1, timestamp: 0, ssrc: 7, payload: gs.encode([head]) });

// Silent after SILENCE_MS of nothing; any packet from the relay resets it.
let l = new gs.Liveness({ now });
t.check(l.thresholdMs === gs.SILENCE_MS && gs.SILENCE_MS === 15000, `default ${l.thresholdMs}`);
clock = 14999;
t.check(!l.isSilent(), "not silent before the threshold");
clock = 15000;
t.check(l.isSilent() && l.silentMs() === 15000, "silent at the threshold");
l.heard(false);
t.check(!l.isSilent() && l.heardMs === 15000, "heard again");

// Reports 3 s apart (the relay's minimum interval) keep the default.
l = new gs.Liveness({ now });
for (clock = 0; clock <= 9000; clock += 3000) l.heard(true);
t.check(l.thresholdMs === gs.SILENCE_MS, `reports at the minimum interval: ${l.thresholdMs}`);

// Reports 20 s then 10 s apart (one split over two packets) stretch it to three of the
// longer gap; a silence the app sets is used as it is.
l = new gs.Liveness({ now });
for (const [ms, report] of [[0, true], [20000, true], [20010, true], [25000, false], [30000, true]]) {
  clock = ms;
  l.heard(report);
}
t.check(l.thresholdMs === 60000, `stretched to ${l.thresholdMs}`);
clock = 89999;
t.check(!l.isSilent(), "quiet room: not silent within three report gaps");
clock = 90000;
t.check(l.isSilent(), "quiet room: silent after them");
l.silenceMs = 2000;
t.check(l.thresholdMs === 2000, "the app's silence");

// A closed transport is silence at once, and for good: a packet read after the close was
// sent before it.
l = new gs.Liveness({ now });
l.fail();
t.check(l.isSilent(), "closed: silent at once");
l.heard(false);
t.check(l.isSilent(), "still silent after a packet read late");

// Back-off: 0.25 s doubling to 8 s, randomised over [0.5, 1.5).
t.check(gs.rejoinDelayMs(1, () => 0.5) === 250, "first retry");
t.check(gs.rejoinDelayMs(3, () => 0.5) === 1000, "third retry");
t.check(gs.rejoinDelayMs(20, () => 0.5) === 8000, "bounded");
t.check(gs.rejoinDelayMs(20, () => 0) === 4000 && gs.rejoinDelayMs(1, () => 0.999) < 375, "randomised");

// RoomState.clear drops every stream and tells onchange once; nothing to clear, no change.
const room = new gs.RoomState();
let changes = 0;
room.onchange = () => changes++;
room.ingest(rtp);
room.clear();
room.clear();
t.check(room.streams.size === 0 && changes === 2, `cleared: ${room.streams.size} streams, ${changes} changes`);

// A Session over a stand-in WebTransport and HTTP, on the real clock with a 300 ms
// silence: the relay's reports keep it; then silence → rejoin with the same request and
// SSRC, the old session left, the room started afresh, a FIR for the relay's SSRC,
// onrejoin told; a failed attempt is told and tried again; a lost connection rejoins
// without waiting for the silence; a leave that never gets an answer does not hold a
// rejoin up; a resume request that gets no answer is hedged; a closed session rejoins no
// more.
const FLOW = 5;
const transports = [];
class FakeWebTransport {
  constructor(url) {
    this.url = url;
    this.sent = [];
    this.closed = new Promise((resolve, reject) => { this.closeOk = resolve; this.lose = () => reject(new Error("lost")); });
    this.closed.catch(() => {});
    this.ready = Promise.resolve();
    const readable = new ReadableStream({ start: (c) => { this.incoming = c; } });
    this.datagrams = { readable, writable: new WritableStream({ write: (d) => { this.sent.push(gs.parseDatagram(d).packet); } }),
      maxDatagramSize: 1200 };
    this.incomingUnidirectionalStreams = new ReadableStream({});
    transports.push(this);
  }
  deliver(packet) { this.incoming.enqueue(gs.frameDatagram(FLOW, packet)); }
  async createBidirectionalStream() {
    const line = new TextEncoder().encode("ok s\n");
    return { writable: new WritableStream({}), readable: new ReadableStream({ start: (c) => { c.enqueue(line); c.close(); } }) };
  }
  close() { this.closedByClient = true; this.closeOk(); }
}
globalThis.WebTransport = FakeWebTransport;
// `credentials`: answers carry a resume credential; `refuseResume`: a join with one is
// refused as spent; `holdLeaves`: a leave is never answered (the relay that held the
// session died with the connection open) until its signal aborts it, when it is counted in
// `leavesGivenUp`; `resumes`: how the next joins with a resume credential go, one word
// each: "hold" (a frozen node: taken, never answered until the test calls the request's
// `release(sessionId)` or its signal aborts it, which sets its `aborted`), "refuse" (409
// `resume_stale`), "unreachable" (a transport error). Each request records when it came
// (`at`) and the answer it got (`answered`).
const http = { requests: [], down: false, joins: 0, credentials: false, refuseResume: false, holdLeaves: false,
  leavesGivenUp: 0, resumes: [] };
const answerFor = (sessionId, resume) => ({ session_id: sessionId, ssrc: 0x1234, relay_ssrc: 0xfeed, resume,
  webtransport: { url: "https://relay.test/webtransport", flow_id: FLOW, session_token: "t" } });
globalThis.fetch = async (url, init) => {
  const path = new URL(url).pathname;
  const body = init.body && JSON.parse(init.body);
  const request = { method: init.method, path, body, signal: init.signal, at: performance.now() };
  http.requests.push(request);
  if (init.method === "DELETE" && http.holdLeaves) {
    return new Promise((_, reject) => init.signal?.addEventListener("abort", () => {
      http.leavesGivenUp++;
      reject(init.signal.reason);
    }));
  }
  if (init.method === "DELETE") return new Response("", { status: 404 });
  if (http.down) throw new TypeError("fetch failed");
  const plan = body?.resume ? http.resumes.shift() : undefined;
  if (plan === "unreachable") throw new TypeError("fetch failed");
  if (plan === "hold") {
    return new Promise((resolve, reject) => {
      request.release = (sessionId) => {
        request.answered = answerFor(sessionId, "cred-held");
        resolve(new Response(JSON.stringify(request.answered), { status: 200 }));
      };
      init.signal?.addEventListener("abort", () => {
        request.aborted = true;
        reject(init.signal.reason);
      });
    });
  }
  if (body?.resume && (http.refuseResume || plan === "refuse")) {
    request.answered = { status: 409 };
    return new Response(JSON.stringify({ error: { code: "resume_stale", message: "spent" } }), { status: 409 });
  }
  http.joins++;
  const resume = http.credentials ? `cred${http.joins}` : undefined;
  request.answered = answerFor(body?.resume ? "s1-resumed" : `s${http.joins}`, resume);
  return new Response(JSON.stringify(request.answered), { status: 200 });
};
const until = async (what, f, ms = 5000) => {
  const deadline = performance.now() + ms;
  while (!f()) {
    if (performance.now() > deadline) { t.check(false, `not within ${ms} ms: ${what}`); return false; }
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
};

const s = await gs.Session.connect({ baseUrl: "http://relay.test", room: "lobby", token: "tok",
  transport: "webtransport", roomState: room, silenceMs: 300 });
const told = { rejoin: [], errors: [] };
s.onrejoin = (info) => told.rejoin.push(info);
s.onrejoinerror = (e) => told.errors.push(e.message);
const first = transports[0];
t.check(http.requests[0].method === "POST" && http.requests[0].path === "/v1/rooms/lobby/sessions" &&
  http.requests[0].body.transport === "webtransport", `joined: ${JSON.stringify(http.requests[0])}`);
first.deliver(rtp);
await until("first state", () => room.streams.has(7));
// Reports every 100 ms for a second: never silent.
for (let i = 0; i < 10; i++) {
  first.deliver(rr);
  await new Promise((r) => setTimeout(r, 100));
}
t.check(s.rejoins === 0 && !s.isSilent(), "heard reports: no rejoin");
// The relay goes silent, and its HTTP is down for the first attempt.
http.down = true;
await until("a failed attempt", () => told.errors.length > 0);
http.down = false;
await until("rejoined", () => told.rejoin.length === 1);
const info = told.rejoin[0];
t.check(info.reason === "silence" && info.previousSessionId === "s1" && info.sessionId === "s2" &&
  info.ssrc === 0x1234 && info.silentMs >= 300 && info.attempts >= 2, `onrejoin: ${JSON.stringify(info)}`);
t.check(first.closedByClient, "the old transport closed");
const deletes = http.requests.filter((r) => r.method === "DELETE").map((r) => r.path);
t.check(deletes.join() === "/v1/sessions/s1", `the old session left: ${deletes}`);
const rejoinBody = http.requests.filter((r) => r.method === "POST").at(-1).body;
t.check(rejoinBody.ssrc === 0x1234 && rejoinBody.transport === "webtransport" && rejoinBody.dialect === "draft01",
  `joined again asking for the same SSRC: ${JSON.stringify(rejoinBody)}`);
t.check(room.streams.size === 0 && s.room === room, "the room started afresh");
const second = transports.at(-1);
const fir = gs.parseRtcp(second.sent[0]);
t.check(fir.ok && fir.items[0].type === "fir" && fir.items[0].entries[0].ssrc === 0xfeed,
  `asked for the whole room: ${JSON.stringify(fir)}`);
first.deliver(rtp);
second.deliver(rr);
await new Promise((r) => setTimeout(r, 20));
t.check(!room.streams.has(7), "the old transport's packets are ignored");

// The connection is lost: rejoin at once.
const lostAt = performance.now();
second.deliver(rr);
second.lose();
await until("rejoined after the loss", () => told.rejoin.length === 2);
t.check(told.rejoin[1].reason === "closed" && performance.now() - lostAt < 300 + 250,
  `rejoined after the loss: ${JSON.stringify(told.rejoin[1])}`);

// With a credential, a rejoin resumes: no leave, the credential sent, told `resumed`.
http.credentials = true;
await s.rejoin("asked");
const credential = s.answer.resume;
const deletesBefore = http.requests.filter((r) => r.method === "DELETE").length;
await s.rejoin("asked");
const resumeBody = http.requests.filter((r) => r.method === "POST").at(-1).body;
t.check(resumeBody.resume === credential && resumeBody.ssrc === 0x1234, `resumed with the credential: ${JSON.stringify(resumeBody)}`);
t.check(http.requests.filter((r) => r.method === "DELETE").length === deletesBefore, "a resume leaves nothing");
t.check(told.rejoin.at(-1).resumed === true, `told resumed: ${JSON.stringify(told.rejoin.at(-1))}`);
// A refused credential: join afresh without it, and leave the old session meanwhile.
http.refuseResume = true;
await s.rejoin("asked");
const posts = http.requests.filter((r) => r.method === "POST").slice(-2).map((r) => r.body);
t.check(posts[0].resume !== undefined && posts[1].resume === undefined, `joined afresh after the refusal: ${JSON.stringify(posts)}`);
t.check(http.requests.filter((r) => r.method === "DELETE").length === deletesBefore + 1, "the old session left");
t.check(told.rejoin.at(-1).resumed === false, `told not resumed: ${JSON.stringify(told.rejoin.at(-1))}`);

// The old session's relay died with the connection open: its leave never gets an answer.
// The rejoin does not wait for it (it is back while the leave is still pending), and the
// leave is given up after LEAVE_TIMEOUT_MS (2 s): nothing stays open.
http.holdLeaves = true;
const heldFrom = performance.now();
const previousSession = s.answer.session_id;
t.check(await s.rejoin("asked"), "rejoined past a leave that hangs");
const tookMs = performance.now() - heldFrom;
const held = http.requests.filter((r) => r.method === "DELETE").at(-1);
t.check(held.path === `/v1/sessions/${previousSession}` && held.signal && !held.signal.aborted && http.leavesGivenUp === 0,
  `back while the old session's leave is pending: ${JSON.stringify({ path: held.path, given: http.leavesGivenUp })}`);
t.check(tookMs < 1000 && told.rejoin.at(-1).resumed === false, `the rejoin took ${tookMs} ms`);
// Meanwhile the new relay reports, so that the watchdog has no reason to rejoin.
const reporting = setInterval(() => transports.at(-1).deliver(rr), 100);
await until("the hanging leave given up", () => http.leavesGivenUp === 1, 5000);
clearInterval(reporting);
const givenUpMs = performance.now() - heldFrom;
t.check(givenUpMs >= 1900 && s.rejoins === 6, `given up after ${givenUpMs} ms, ${s.rejoins} rejoins`);
http.holdLeaves = false;
http.refuseResume = false;

// A frozen node behind the Service takes the resume's connection and never answers. The
// resume goes again beside it after RESUME_HEDGE_MS, through the same base URL, and the
// session is back on the second request's answer while the first is still held, neither
// answered nor given up; when the held one answers after all with a session of its own,
// that session is left (it would hold the SSRC).
t.check(gs.RESUME_HEDGE_MS === 400 && gs.RESUME_ATTEMPTS === 4, `hedge ${gs.RESUME_HEDGE_MS} ms, ${gs.RESUME_ATTEMPTS}`);
const resumePosts = (from) => http.requests.slice(from).filter((r) => r.method === "POST" && r.body.resume);
const keepReporting = () => setInterval(() => transports.at(-1).deliver(rr), 100);
// A rejoin that is not back within 5 s is false (a client that waited on the held request
// would wait for ever).
const rejoinWithin = (reason) => Promise.race([s.rejoin(reason), new Promise((r) => setTimeout(() => r(false), 5000))]);
let from = http.requests.length;
let credentialNow = s.answer.resume;
http.resumes = ["hold"];
t.check(await rejoinWithin("asked"), "resumed past a request held unanswered");
let seen = resumePosts(from);
t.check(seen.length === 2 && seen.every((r) => r.body.resume === credentialNow && r.body.ssrc === 0x1234),
  `the resume sent again alike: ${JSON.stringify(seen.map((r) => r.body))}`);
t.check(seen.length === 2 && seen[0].answered === undefined && !seen[0].aborted && seen[0].signal?.aborted === false,
  "back while the first request is still held");
t.check(seen.length === 2 && s.answer.resume === seen[1].answered?.resume && told.rejoin.at(-1).resumed === true,
  `on the second request's answer: ${JSON.stringify(s.answer)}`);
const hedgedAfter = seen[1]?.at - seen[0].at;
t.check(hedgedAfter >= 380 && hedgedAfter < 1000, `the second sent ${hedgedAfter} ms after the first`);
let reporting2 = keepReporting();
seen[0].release?.("s-frozen");
await until("the held request's session left", () =>
  http.requests.some((r) => r.method === "DELETE" && r.path === "/v1/sessions/s-frozen"));
t.check(s.answer.session_id === "s1-resumed" && resumePosts(from).length === 2,
  `the session kept, nothing more sent: ${s.answer.session_id}`);
clearInterval(reporting2);

// Every node frozen: at most RESUME_ATTEMPTS requests in flight, RESUME_HEDGE_MS apart;
// the first to answer wins (here the third), and one answering later with the same
// session leaves nothing.
from = http.requests.length;
http.resumes = ["hold", "hold", "hold", "hold"];
let back = null;
const frozen = rejoinWithin("asked").then((ok) => { back = ok; });
await until("four requests in flight", () => resumePosts(from).length === 4);
await new Promise((r) => setTimeout(r, 2 * gs.RESUME_HEDGE_MS));
seen = resumePosts(from);
const spacing = seen.slice(1).map((r, i) => Math.round(r.at - seen[i].at));
t.check(seen.length === 4 && back === null && spacing.every((ms) => ms >= 380 && ms < 1000),
  `${seen.length} in flight, ${JSON.stringify(spacing)} ms apart, back: ${back}`);
seen[2]?.release("s1-resumed");
await frozen;
t.check(back === true && s.answer.resume === "cred-held" && seen.every((r, i) => i === 2 || !r.aborted),
  `back on the third's answer, the others still under way: ${back}`);
reporting2 = keepReporting();
seen[0]?.release("s1-resumed");
await new Promise((r) => setTimeout(r, 100));
clearInterval(reporting2);
// (An earlier rejoin's old session, whose leave this fake relay refused, may be left again
// meanwhile: that leave is retried in the background.)
t.check(!http.requests.slice(from).some((r) => r.method === "DELETE" && r.path === "/v1/sessions/s1-resumed") &&
  resumePosts(from).length === 4,
  "the same session answered late: nothing left, nothing more sent");

// A resume that reaches no relay (connection refused) goes again at once, not after the hedge.
from = http.requests.length;
http.resumes = ["unreachable"];
t.check(await rejoinWithin("asked"), "resumed past an unreachable node");
seen = resumePosts(from);
t.check(seen.length === 2 && seen[0].answered === undefined && seen[1]?.at - seen[0].at < 200,
  `sent again ${seen[1]?.at - seen[0]?.at} ms after the transport error`);

// A relay's refusal (an HTTP error status) is the answer once the requests still under
// way have had a hedge's length to succeed: told as the error, no further request, the
// held request left to run (a session it opens after all is left); the session then
// joins afresh.
from = http.requests.length;
credentialNow = s.answer.resume;
const errorsBefore = told.errors.length;
http.resumes = ["hold", "refuse"];
t.check(await rejoinWithin("asked"), "rejoined after a refused resume");
reporting2 = keepReporting();
await new Promise((r) => setTimeout(r, 2 * gs.RESUME_HEDGE_MS));
clearInterval(reporting2);
seen = resumePosts(from);
const refusal = told.errors.slice(errorsBefore);
t.check(seen.length === 2 && seen[1]?.answered?.status === 409 && !seen[0].aborted && seen[0].answered === undefined,
  `the refusal ended the resume: ${JSON.stringify(seen.map((r) => ({ answered: r.answered, aborted: r.aborted })))}`);
const gaveUp = http.requests.slice(from).find((r) => r.method === "POST" && !r.body.resume);
t.check(gaveUp && gaveUp.at - seen[1].at >= gs.RESUME_HEDGE_MS - 50,
  `the refusal waited a hedge for the held request: ${gaveUp && gaveUp.at - seen[1].at} ms`);
t.check(refusal.length === 1 && refusal[0].startsWith("409 resume_stale"), `told the refusal: ${refusal}`);
const afresh = http.requests.slice(from).filter((r) => r.method === "POST" && !r.body.resume);
t.check(afresh.length === 1 && afresh[0].at > seen[1]?.at && told.rejoin.at(-1).resumed === false,
  `then joined afresh once: ${afresh.length}`);
http.resumes = [];

// Closed: no more rejoins.
await s.close();
const joins = http.joins;
await new Promise((r) => setTimeout(r, 700));
t.check(http.joins === joins && s.rejoins === 10, `no rejoin once closed: ${http.joins - joins} joins, ${s.rejoins} rejoins`);

t.finish();
