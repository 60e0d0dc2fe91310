// Colyseus 0.18 dense-room server: one room type whose state is a map of avatars.
// Usage: node server.js [--patch-ms 16]   (or PATCH_MS=16). Prints "PORT <n>" once listening.
//
// We import @colyseus/core and @colyseus/ws-transport rather than the `colyseus` meta
// package: those are the two modules it re-exports that a server needs, and this keeps its
// other re-exports (auth, monitor, playground, redis, tools/dotenv) out of the process
// whose CPU we measure.
const { Server, Room } = require("@colyseus/core");
const { WebSocketTransport } = require("@colyseus/ws-transport");
const { schema, t } = require("@colyseus/schema");

const i = process.argv.indexOf("--patch-ms");
const patchMs = Number(i > 0 ? process.argv[i + 1] : process.env.PATCH_MS || 16);

// `number` is Colyseus's idiomatic numeric type (it picks the smallest encoding per value;
// our non-integer floats go out as float64). `t` is the sender's wall-clock send time in ms,
// float64 so sub-millisecond precision survives.
const Player = schema({ x: t.number(), y: t.number(), z: t.number(), yaw: t.number(), t: t.float64() }, "Player");
const DenseState = schema({ players: t.map(Player) }, "DenseState");

class DenseRoom extends Room {
  onCreate() {
    this.state = new DenseState();
    this.patchRate = patchMs; // (setPatchRate() is deprecated in 0.18; this is the same setter)
    this.onMessage("u", (client, m) => {
      const p = this.state.players.get(client.sessionId);
      if (!p) return;
      p.x = m.x; p.y = m.y; p.z = m.z; p.yaw = m.yaw; p.t = m.t;
    });
  }
  onJoin(client) { this.state.players.set(client.sessionId, new Player()); }
  onLeave(client) { this.state.players.delete(client.sessionId); }
}

async function main() {
  // Plain WebSocket on loopback, the transport's defaults (perMessageDeflate off).
  const server = new Server({ transport: new WebSocketTransport(), greet: false });
  server.define("dense", DenseRoom);
  await server.listen(0, "127.0.0.1"); // port 0: the kernel picks a free one
  const port = server.transport.server.address().port;
  console.log(`PORT ${port}`);
  if (process.send) process.send({ port });
  // Colyseus installs its own SIGTERM/SIGINT handlers (graceful shutdown, then exit).
}

main().catch((e) => { console.error(e); process.exit(1); });
