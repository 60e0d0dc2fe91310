// Runs one dense-room measurement: starts server.js, then clients.js, samples the server's
// CPU time from /proc at the clients' window edges, writes a JSON summary, stops both.
// Usage: node run.js --players 200 --patch-ms 16 --duration 10 --warmup 3 [--json out.json]
const { fork, execSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const argv = process.argv;
const opt = (name, def) => { const i = argv.indexOf(name); return i > 0 ? argv[i + 1] : def; };
const players = Number(opt("--players", 50)), patchMs = Number(opt("--patch-ms", 16));
const duration = Number(opt("--duration", 10)), warmup = Number(opt("--warmup", 3)), jsonOut = opt("--json");

const CLK_TCK = Number(execSync("getconf CLK_TCK").toString().trim());
// utime + stime of one process, in seconds (fields 14 and 15 of /proc/<pid>/stat; the
// split starts after the ")" that closes the command name, so field 3 is index 0).
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}
const version = (pkg) => JSON.parse(fs.readFileSync(path.join(__dirname, "node_modules", pkg, "package.json"))).version;
const round = (x, d = 3) => (x == null ? null : Math.round(x * 10 ** d) / 10 ** d);

// Children write their logs to our stderr so that stdout carries only the JSON.
const stdio = ["ignore", 2, 2, "ipc"];
const server = fork(path.join(__dirname, "server.js"), ["--patch-ms", String(patchMs)], { stdio });
let clients;

function stopped(child, ms) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(true);
    const t = setTimeout(() => resolve(false), ms);
    child.once("exit", () => { clearTimeout(t); resolve(true); });
  });
}

let shuttingDown = false;
async function shutdown(code) {
  if (shuttingDown) return;
  shuttingDown = true;
  // Clients first (they leave their rooms, then exit), then the server (SIGTERM: Colyseus's
  // graceful shutdown). SIGKILL only if one hangs.
  for (const child of [clients, server]) {
    if (!child) continue;
    if (!(await stopped(child, child === clients ? 5000 : 0))) child.kill("SIGTERM");
    if (!(await stopped(child, 5000))) { console.error(`pid ${child.pid} did not stop; SIGKILL`); child.kill("SIGKILL"); }
  }
  process.exit(code);
}
server.on("exit", (code, sig) => { if (!shuttingDown) { console.error(`server exited early (${code ?? sig})`); shutdown(1); } });
setTimeout(() => { console.error("timed out"); shutdown(1); }, (warmup + duration + 120) * 1000).unref();

server.once("message", ({ port }) => {
  clients = fork(path.join(__dirname, "clients.js"),
    ["--port", String(port), "--players", String(players), "--warmup", String(warmup), "--duration", String(duration)], { stdio });
  let cpu0, t0, ccpu0, cpu1, t1, ccpu1, load0;
  clients.on("message", (m) => {
    if (m.ev === "window-start") { cpu0 = cpuSeconds(server.pid); ccpu0 = cpuSeconds(clients.pid); t0 = performance.now(); load0 = os.loadavg()[0]; }
    else if (m.ev === "window-end") { cpu1 = cpuSeconds(server.pid); ccpu1 = cpuSeconds(clients.pid); t1 = performance.now(); }
    else if (m.ev === "result") {
      const w = m.window_s, serverCpu = cpu1 - cpu0;
      const out = {
        players, patch_ms: patchMs, duration_s: duration, warmup_s: warmup, window_s: round(w),
        sent_updates_per_s: round(m.sent / w, 1),
        offered_share: round(m.sent / (players * 20 * w), 4),
        // every changed Player entry decoded by every client, own echo included (N per send)
        delivered_updates_per_s: round(m.delivered / w, 1),
        // the same without each client's own avatar (at most N-1 per send)
        delivered_other_updates_per_s: round((m.delivered - m.delivered_self) / w, 1),
        delivery_ratio: round(m.delivered / (m.sent * players), 4),
        server_cpu_s: round(serverCpu, 3),
        server_cpu_share_of_one_core: round(serverCpu / ((t1 - t0) / 1000), 3),
        server_cpu_us_per_delivered_update: round((serverCpu * 1e6) / m.delivered, 4),
        server_cpu_us_per_delivered_other_update: round((serverCpu * 1e6) / (m.delivered - m.delivered_self), 4),
        server_cpu_us_per_sent_update: round((serverCpu * 1e6) / m.sent, 2),
        clients_cpu_s: round(ccpu1 - ccpu0, 3),
        latency_ms: { p50: round(m.p50_ms, 2), p99: round(m.p99_ms, 2), max: round(m.max_ms, 2) },
        negative_latencies: m.negative_latencies,
        patches_per_s_per_client: round(m.patches_client0 / w, 1),
        avg_patch_bytes: m.patches_client0 ? Math.round(m.bytes_client0 / m.patches_client0) : null,
        disconnects: m.disconnects,
        loadavg_1m_at_start: round(load0, 2),
        versions: {
          node: process.version, colyseus: version("colyseus"), "@colyseus/core": version("@colyseus/core"),
          "@colyseus/ws-transport": version("@colyseus/ws-transport"), "@colyseus/schema": version("@colyseus/schema"),
          "@colyseus/sdk": version("@colyseus/sdk"), ws: version("ws"),
        },
      };
      const text = JSON.stringify(out, null, 2);
      console.log(text);
      if (jsonOut) fs.writeFileSync(jsonOut, text + "\n");
      shutdown(0);
    }
  });
  clients.on("exit", (code, sig) => { if (!shuttingDown) { console.error(`clients exited early (${code ?? sig})`); shutdown(1); } });
});
