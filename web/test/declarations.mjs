// The TypeScript declarations against the module (driven by tests/js_package.rs): every
// export of web/client/gsrelay.js is declared in web/client/gsrelay.d.ts as what it is
// (class, function or constant of its type), and nothing else is declared as a value;
// every member of each exported class (static, on the prototype, or an own property of a
// live instance made through the class's own entry points) is declared, `private` for the
// internals, and every declared member exists; a declared function or public method takes
// at least the arguments the JavaScript one needs. The declarations are parsed with the
// TypeScript compiler found in GSRELAY_NODE_TOOLS. Prints "N passed, M failed".
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import * as gs from "../client/gsrelay.js";
import { Tally } from "./support.mjs";

const t = new Tally();
const ts = createRequire(join(process.env.GSRELAY_NODE_TOOLS, "node_modules", "/"))("typescript");
const dtsPath = new URL("../client/gsrelay.d.ts", import.meta.url);
const source = ts.createSourceFile("gsrelay.d.ts", readFileSync(dtsPath, "utf8"), ts.ScriptTarget.Latest, true);

// --- What the declarations say ------------------------------------------------------------

const has = (node, kind) => (ts.canHaveModifiers(node) ? ts.getModifiers(node) ?? [] : []).some((m) => m.kind === kind);
const where = (node) => `gsrelay.d.ts:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;

/** The arguments a declared signature requires. */
function required(params) {
  return params.filter((p) => !p.questionToken && !p.initializer && !p.dotDotDotToken).length;
}

/** Declared values by name: {kind: "class" | "function" | "const", node, ...}. */
const values = new Map();
/** Declared type-only names (interfaces, type aliases). */
const types = new Set();
let exportsNothingElse = false;
for (const stmt of source.statements) {
  if (ts.isExportDeclaration(stmt)) {
    // Only the closing `export {}`, which stops the file exporting what is not marked.
    t.check(!stmt.exportClause || (ts.isNamedExports(stmt.exportClause) && stmt.exportClause.elements.length === 0),
      `${where(stmt)}: export lists are not checked; mark each declaration \`export\``);
    exportsNothingElse = true;
    continue;
  }
  if (!has(stmt, ts.SyntaxKind.ExportKeyword)) continue;
  if (ts.isVariableStatement(stmt)) {
    for (const d of stmt.declarationList.declarations) values.set(d.name.text, { kind: "const", node: d });
  } else if (ts.isFunctionDeclaration(stmt)) {
    const prev = values.get(stmt.name.text);
    values.set(stmt.name.text, { kind: "function", node: stmt, overloads: [...(prev?.overloads ?? []), stmt] });
  } else if (ts.isClassDeclaration(stmt)) {
    values.set(stmt.name.text, { kind: "class", node: stmt });
  } else if (ts.isInterfaceDeclaration(stmt) || ts.isTypeAliasDeclaration(stmt)) {
    types.add(stmt.name.text);
  } else {
    t.check(false, `${where(stmt)}: an export of a kind this check does not know`);
  }
}
t.check(exportsNothingElse, "gsrelay.d.ts ends with `export {}`, so that only what is marked `export` is exported");

/** A class's declared members: name → {isStatic, isPrivate, kind, node}. */
function declaredMembers(cls) {
  const members = new Map();
  let ctor = null;
  for (const m of cls.members) {
    if (ts.isConstructorDeclaration(m)) {
      ctor = m;
      continue;
    }
    const name = m.name && ts.isIdentifier(m.name) ? m.name.text : null;
    if (!name) {
      t.check(false, `${where(m)}: a member without a plain name`);
      continue;
    }
    const kind = ts.isMethodDeclaration(m) ? "method" : ts.isGetAccessorDeclaration(m) ? "getter"
      : ts.isSetAccessorDeclaration(m) ? "setter" : "property";
    const key = `${has(m, ts.SyntaxKind.StaticKeyword) ? "static " : ""}${name}`;
    if (kind === "setter" && members.has(key)) continue;
    members.set(key, { name, isStatic: has(m, ts.SyntaxKind.StaticKeyword), isPrivate: has(m, ts.SyntaxKind.PrivateKeyword),
      kind, node: m });
  }
  return { members, ctor };
}

// --- What the module exports --------------------------------------------------------------

const isClass = (v) => typeof v === "function" && /^class\b/.test(Function.prototype.toString.call(v));
const runtimeKind = (v) => (isClass(v) ? "class" : typeof v === "function" ? "function" : "const");

// Live instances, made as an app gets them: the errors as thrown, the connections through
// `open` over stand-in browser objects, the session through `connect` over a stand-in
// relay (and closed again), the presence watch through `watchPresence` (closed again).
const FLOW = 9;
const answer = { session_id: "s1", ssrc: 0x1234, relay_ssrc: 0xfeed, streams: [],
  webtransport: { url: "https://relay.test/webtransport", cert_sha256: null, flow_id: FLOW, session_token: "t" },
  webrtc: { sdp_answer: "v=0\r\n", addr: "127.0.0.1:8445", channel: "gsrelay", max_message_size: 1500, max_packet: 1160 } };
class StandInWebTransport {
  constructor(url) {
    this.url = url;
    this.ready = Promise.resolve();
    this.closed = new Promise((resolve) => { this.close = () => resolve(); });
    this.datagrams = { readable: new ReadableStream({}), writable: new WritableStream({}), maxDatagramSize: 1200 };
    this.incomingUnidirectionalStreams = new ReadableStream({});
  }
  async createBidirectionalStream() {
    const line = new TextEncoder().encode("ok s1\n");
    return { writable: new WritableStream({}), readable: new ReadableStream({ start: (c) => { c.enqueue(line); c.close(); } }) };
  }
}
class StandInPeerConnection {
  constructor() {
    this.connectionState = "new";
    this.localDescription = null;
  }
  createDataChannel(label) {
    return { label, readyState: "open", bufferedAmount: 0, binaryType: "blob", onmessage: null,
      addEventListener() {}, send() {}, close() { this.readyState = "closed"; } };
  }
  async createOffer() { return { type: "offer", sdp: "v=0\r\n" }; }
  async setLocalDescription(d) { this.localDescription = d; }
  async setRemoteDescription() {}
  addEventListener() {}
  close() { this.connectionState = "closed"; }
}
globalThis.WebTransport = StandInWebTransport;
globalThis.fetch = async (url, init) => new Response(init.method === "POST" ? JSON.stringify(answer) : "",
  { status: init.method === "POST" ? 201 : 204 });

async function session() {
  const s = await gs.Session.connect({ baseUrl: "http://relay.test", room: "lobby", token: "t", transport: "webtransport" });
  await s.close();
  return s;
}
const samples = {
  DecodeError: () => gs.decode(Uint8Array.of(0)).error,
  EncodeError: () => { try { gs.encode([{ type: "Nothing" }]); } catch (e) { return e; } },
  ApiError: () => new gs.ApiError(404, "room_not_found", "no such room"),
  RoqStreamReader: () => new gs.RoqStreamReader(),
  RoomState: () => new gs.RoomState(),
  Liveness: () => new gs.Liveness(),
  WebTransportConnection: () => gs.WebTransportConnection.open(answer, {}),
  WebRtcConnection: () => gs.WebRtcConnection.open(async () => answer, { RTCPeerConnectionImpl: StandInPeerConnection }),
  Session: session,
  Presence: () => {
    const p = gs.watchPresence({ baseUrl: "http://relay.test", room: "lobby", token: "t" });
    p.close();
    return p;
  },
  RoomAdmin: () => new gs.RoomAdmin("http://relay.test", "t"),
};

// --- The comparison -----------------------------------------------------------------------

const runtime = new Map(Object.entries(gs));
for (const [name, value] of runtime) {
  const d = values.get(name);
  if (!d) {
    t.check(false, `${name} (a ${runtimeKind(value)}) is exported by gsrelay.js but not declared${types.has(name) ? " as a value" : ""}`);
    continue;
  }
  t.check(d.kind === runtimeKind(value), `${name}: declared a ${d.kind}, exported a ${runtimeKind(value)}`);
}
for (const [name, d] of values) {
  t.check(runtime.has(name), `${where(d.node)}: ${name} is declared but gsrelay.js does not export it`);
}
for (const name of types) t.check(!runtime.has(name), `${name} is declared as a type only, but gsrelay.js exports it`);

// Constants: a `number` or `string` declaration holds one.
for (const [name, d] of values) {
  if (d.kind !== "const" || !runtime.has(name) || !d.node.type) continue;
  const keyword = { [ts.SyntaxKind.NumberKeyword]: "number", [ts.SyntaxKind.StringKeyword]: "string" }[d.node.type.kind];
  if (keyword) t.check(typeof runtime.get(name) === keyword, `${name}: declared ${keyword}, is ${typeof runtime.get(name)}`);
  else t.check(typeof runtime.get(name) === "object", `${name}: declared ${d.node.type.getText()}, is ${typeof runtime.get(name)}`);
}

// Functions: the declaration requires at least what the JavaScript takes without a default.
function checkArity(what, fn, signatures) {
  const most = Math.max(...signatures.map((s) => required(s.parameters)));
  t.check(most >= fn.length, `${what}: gsrelay.js needs ${fn.length} arguments, the declaration requires ${most}`);
}
for (const [name, d] of values) {
  if (d.kind === "function" && typeof runtime.get(name) === "function") checkArity(name, runtime.get(name), d.overloads);
}

// Classes, member by member.
for (const [name, d] of values) {
  const cls = runtime.get(name);
  if (d.kind !== "class" || !isClass(cls)) continue;
  const { members, ctor } = declaredMembers(d.node);
  if (!samples[name]) {
    t.check(false, `${name}: no sample instance in web/test/declarations.mjs to check its members against; add one`);
    continue;
  }
  const instance = await samples[name]();
  t.check(instance instanceof cls, `${name}: the sample is one`);
  const found = new Map();
  for (const key of Object.getOwnPropertyNames(cls)) {
    if (!["length", "name", "prototype"].includes(key)) found.set(`static ${key}`, { where: "static", value: cls[key] });
  }
  for (const key of Object.getOwnPropertyNames(cls.prototype)) {
    if (key === "constructor") continue;
    const desc = Object.getOwnPropertyDescriptor(cls.prototype, key);
    found.set(key, desc.get || desc.set ? { where: "accessor" } : { where: "method", value: desc.value });
  }
  for (const key of Object.keys(instance)) if (!found.has(key)) found.set(key, { where: "field" });

  for (const [key, r] of found) {
    const m = members.get(key);
    if (!m) {
      const what = { static: "static member", method: "method", accessor: "getter", field: "field" }[r.where];
      t.check(false, `${name}: gsrelay.js has ${what} ${key.replace("static ", "")}, not declared ` +
        "(declare it, `private` if internal)");
      continue;
    }
    if (m.isPrivate) continue;
    const expected = { static: m.kind === "method" ? "method" : "property", method: "method", accessor: "getter",
      field: "property" }[r.where];
    const declaredAs = m.isStatic && m.kind !== "method" ? "property" : m.kind;
    const is = { static: "a static member", method: "a method", accessor: "a getter", field: "a field" }[r.where];
    t.check(declaredAs === expected, `${name}.${m.name}: declared a ${m.kind}, but gsrelay.js has ${is}`);
    if (m.kind === "method" && typeof r.value === "function") checkArity(`${name}.${m.name}`, r.value, [m.node]);
  }
  for (const [key, m] of members) {
    t.check(found.has(key), `${where(m.node)}: ${name}.${key} is declared but gsrelay.js has no such member`);
  }
  if (!ctor) t.check(false, `${name}: declare its constructor (\`private constructor()\` if apps do not call it)`);
  else if (!has(ctor, ts.SyntaxKind.PrivateKeyword)) checkArity(`new ${name}`, cls, [ctor]);
}

t.check(values.size >= 50 && [...values.values()].filter((d) => d.kind === "class").length >= 9,
  `the declarations were read: ${values.size} values`);
t.finish();
