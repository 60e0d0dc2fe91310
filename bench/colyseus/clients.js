// N Colyseus clients in one Node process, all in one room. Each sends its avatar at 20 Hz
// at a random phase; every client decodes every patch and counts the player entries in it.
// Usage (normally forked by run.js): node clients.js --port P --players N --warmup S --duration S
// Reports over IPC (or stdout): {ev:"window-start"}, {ev:"window-end"}, then {ev:"result", ...}.
const { Client, Callbacks } = require("@colyseus/sdk");

const arg = (name, def) => { const i = process.argv.indexOf(name); return i > 0 ? Number(process.argv[i + 1]) : def; };
const PORT = arg("--port"), N = arg("--players", 50), WARMUP_S = arg("--warmup", 3), DURATION_S = arg("--duration", 10);
const PERIOD_MS = 50; // 20 Hz
const GRACE_MS = 2000;
const report = (msg) => (process.send ? process.send(msg) : console.log(JSON.stringify(msg)));
// Wall clock with sub-ms precision. Sender and receiver of an update are both in this
// process, so latency never compares two processes' clocks.
const now = () => performance.timeOrigin + performance.now();

// Latency histogram: 10 µs buckets up to 5 s, anything later kept exactly.
const BUCKET_MS = 0.01, NBUCKETS = 500000;
const hist = new Uint32Array(NBUCKETS);
const late = [];
const c = { sent: 0, delivered: 0, deliveredSelf: 0, patches0: 0, bytes0: 0, disconnects: 0, negative: 0, maxLat: 0 };

// An update belongs to the window if it was *sent* inside it (its t field), wherever it
// arrives; so sends and deliveries cover the same updates and delivery_ratio has no edge
// effect. Deliveries are collected until GRACE_MS after the window closes.
let wStart = Infinity, wEnd = -Infinity;
const inWindow = (t) => t >= wStart && t < wEnd;

function onEntry(selfId, key, p) {
  if (!inWindow(p.t)) return; // also skips the join-time value (t === 0)
  const lat = now() - p.t;
  c.delivered++;
  if (key === selfId) c.deliveredSelf++;
  if (lat < 0) c.negative++;
  if (lat > c.maxLat) c.maxLat = lat;
  const b = Math.max(0, Math.floor(lat / BUCKET_MS));
  if (b < NBUCKETS) hist[b]++; else late.push(lat);
}

function percentile(q) {
  const total = hist.reduce((a, b) => a + b, 0) + late.length;
  if (total === 0) return null;
  let rank = Math.ceil(q * total), acc = 0;
  for (let b = 0; b < NBUCKETS; b++) { acc += hist[b]; if (acc >= rank) return (b + 0.5) * BUCKET_MS; }
  late.sort((a, b) => a - b);
  return late[rank - acc - 1];
}

function watch(room, index) {
  const cb = Callbacks.get(room);
  // onChange(instance) fires once per decoded patch for each Player whose fields changed,
  // after the whole patch is applied — exactly "one changed player entry in a patch".
  cb.onAdd("players", (p, key) => cb.onChange(p, () => onEntry(room.sessionId, key, p)));
  room.onLeave(() => { c.disconnects++; });
  if (index === 0) { // one client's view of patch rate and size (every client gets the same bytes)
    room.onStateChange(() => { if (inWindow(now())) c.patches0++; });
    room.connection.transport.ws.addEventListener("message", (e) => { if (inWindow(now())) c.bytes0 += e.data.byteLength; });
  }
}

// Drift-free 20 Hz sender: slot k is due at start + phase + k*50 ms. If the process falls more
// than a period behind, missed slots are skipped (not burst), so the offered share shows it.
function startSending(room, start, stopAt) {
  const phase = Math.random() * PERIOD_MS;
  let k = 0, x = Math.random() * 100, z = Math.random() * 100, yaw = 0;
  const tick = () => {
    const tNow = now();
    if (tNow >= stopAt) return;
    const behind = Math.floor((tNow - (start + phase)) / PERIOD_MS);
    if (behind > k) k = behind;
    x += Math.random() - 0.5; z += Math.random() - 0.5; yaw = (yaw + 0.05) % (2 * Math.PI);
    const t = now();
    room.send("u", { x, y: 1.7 + Math.random() * 0.01, z, yaw, t });
    if (inWindow(t)) c.sent++;
    k++;
    setTimeout(tick, Math.max(0, start + phase + k * PERIOD_MS - now()));
  };
  setTimeout(tick, phase);
}

async function main() {
  const client = new Client(`http://127.0.0.1:${PORT}`);
  // One create, then joinById: concurrent joinOrCreate calls could race into several rooms.
  const rooms = [await client.create("dense")];
  watch(rooms[0], 0);
  while (rooms.length < N) { // joins in batches of 25 to keep the matchmaker's HTTP path calm
    const batch = Math.min(25, N - rooms.length);
    const joined = await Promise.all(Array.from({ length: batch }, () => client.joinById(rooms[0].roomId)));
    for (const r of joined) { watch(r, rooms.length); rooms.push(r); }
  }
  await new Promise((r) => setTimeout(r, 500)); // let the last joins' patches settle

  const start = now();
  wStart = start + WARMUP_S * 1000; wEnd = wStart + DURATION_S * 1000;
  for (const r of rooms) startSending(r, start, wEnd); // sending stops when the window closes
  // run.js samples the server's CPU when these arrive (a timer firing late moves both edges).
  setTimeout(() => report({ ev: "window-start" }), wStart - now());
  setTimeout(() => report({ ev: "window-end" }), wEnd - now());
  setTimeout(async () => {
    report({
      ev: "result", players: N, window_s: DURATION_S, sent: c.sent, delivered: c.delivered, delivered_self: c.deliveredSelf,
      patches_client0: c.patches0, bytes_client0: c.bytes0, disconnects: c.disconnects, negative_latencies: c.negative,
      p50_ms: percentile(0.5), p99_ms: percentile(0.99), max_ms: c.maxLat,
    });
    // Leave consented so the server sees clean closes, then exit.
    await Promise.race([Promise.all(rooms.map((r) => r.leave(true).catch(() => {}))), new Promise((r) => setTimeout(r, 3000))]);
    process.exit(0);
  }, wEnd + GRACE_MS - now());
}

main().catch((e) => { console.error(e); process.exit(1); });
