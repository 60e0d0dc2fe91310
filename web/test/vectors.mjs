// The JS codec against the reference implementation's interop vectors, and against
// garbage. Usage: node vectors.mjs <vectors dir>. Prints "N passed, M failed".
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as gs from "../client/gsrelay.js";
import { parseJson, Tally } from "./support.mjs";

const dir = process.argv[2];
const t = new Tally();
const load = (f) => parseJson(readFileSync(join(dir, f), "utf8"));
const vectors = (f) => load(f).vectors;
const bytes = (v) => gs.fromHex(v.hex);
const hexEq = (a, b) => gs.toHex(a) === b;

const f32 = new DataView(new ArrayBuffer(4));
const bitsOf = (s) => parseInt(String(s).replace(/^0x/, ""), 16) >>> 0;
/** An f32 from its bits, in the codec's value form (NaNs as their strings). */
function f32Value(bits) {
  if ((bits & 0x7f800000) === 0x7f800000 && bits & 0x7fffff) {
    return bits === 0x7fc00000 ? NaN : `NaN:0x${bits.toString(16).padStart(8, "0")}`;
  }
  f32.setUint32(0, bits);
  return f32.getFloat32(0);
}
function valueBits(v) {
  if (typeof v === "string") {
    if (v === "-NaN") return 0xffc00000;
    return bitsOf(v.slice(4));
  }
  if (Number.isNaN(v)) return 0x7fc00000;
  f32.setFloat32(0, v);
  return f32.getUint32(0);
}

// VarUInt/VarInt: read through objectIDs and GameControl1 buttons, written back minimally.
for (const v of vectors("varuint.json")) {
  const d = gs.decode(gs.fromHex(`7f${hex1(bytes(v).length)}${v.hex}`), "draft01");
  const id = d.ok ? gs.objectKey(d.objects[0]) : null;
  t.check(id === String(v.fields.value), `${v.name}: reads ${id}`);
  const re = gs.encode([{ type: "Object1", id: v.fields.value, time: 0, position: { x: 0, y: 0, z: 0 },
    rotation: { i: 0, j: 0, k: 0 }, scale: 1, active: false }]);
  const want = v.gse_reencodes_as ?? v.hex;
  t.check(gs.toHex(re).slice(4, 4 + want.length) === want, `${v.name}: writes ${gs.toHex(re)}, want ${want}`);
}
for (const v of vectors("varint.json")) {
  const b = bytes(v);
  const body = `01${"0000"}${v.hex}0000${"0000".repeat(4)}`;
  const d = gs.decode(gs.fromHex(`8085${hex1(body.length / 2)}${body}`), "draft01");
  const got = d.ok ? String(d.objects[0].buttons) : d.error.message;
  t.check(got === String(v.fields.value), `${v.name}: reads ${got} from ${gs.toHex(b)}`);
  const re = gs.encode([{ type: "GameControl1", id: 1, time: 0, buttons: v.fields.value, buttonsTime: 0,
    left: { x: 0, y: 0 }, right: { x: 0, y: 0 } }]);
  const want = v.gse_reencodes_as ?? v.hex;
  t.check(gs.toHex(re).slice(12, 12 + want.length) === want, `${v.name}: writes ${gs.toHex(re)}, want ${want}`);
}

function hex1(n) {
  return n.toString(16).padStart(2, "0");
}

// Float16: IEEE round-to-nearest-even on encode, exact on decode.
for (const v of vectors("float16.json")) {
  const f = v.fields;
  if (v.kind === "encode") {
    const got = gs.f32ToF16(f32Value(bitsOf(f.input_f32_bits)));
    t.check(got === bitsOf(v.ieee_rne_half_bits), `${v.name}: f16 ${got.toString(16)}`);
  } else {
    const want = v.ieee_f32_bits !== undefined ? bitsOf(v.ieee_f32_bits) : bitsOf(f.decoded_f32_bits);
    const got = valueBits(gs.f16ToF32(bitsOf(f.half_bits)));
    // IEEE quiets a signalling NaN; the codec keeps it signalling (as crates/core/src/wire/float16.rs
    // does) so that a payload re-encodes to its own bytes: equal but for the quiet bit.
    const quiet = (x) => ((x & 0x7f800000) === 0x7f800000 && x & 0x7fffff ? (x | 0x400000) >>> 0 : x);
    t.check(quiet(got) === quiet(want), `${v.name}: f32 ${got.toString(16)} want ${want.toString(16)}`);
  }
}
for (const row of load("float16_encode_sweep.json").rows) {
  const input = bitsOf(row[0]);
  const got = gs.f32ToF16(f32Value(input));
  const nan = (input & 0x7f800000) === 0x7f800000 && input & 0x7fffff;
  t.check(nan ? (got & 0x7c00) === 0x7c00 && got & 0x3ff : got === bitsOf(row[2]), `sweep ${row[0]}`);
}

// Objects: decoded fields as gse decodes them, and decode → encode reproduces the bytes.
const KEYS = { data_hex: "data", loc: "location", rot: "rotation", scale1: "scale", scale2: "scale",
  isLeft: "left", textureCoord: "textures" };
const round32 = (x) => Math.fround(Number(x));
function floatsMatch(w, g) {
  if (typeof g === "string" || typeof w === "string") return String(w) === String(g) || (w === "NaN" && Number.isNaN(g));
  const a = round32(w);
  const b = round32(g);
  return Object.is(a, b) || gs.f32ToF16(a) === gs.f32ToF16(b);
}
function tuples(s) {
  const list = s.slice(0, s.lastIndexOf(")") + 1);
  return list.split("),(").map((x) => x.replace(/[()]/g, "").split(",").map(Number));
}
function fields(want, got, path) {
  if (want === null) return t.check(got === undefined || got === null, `${path}: want null, got ${got}`);
  if (typeof want === "string" && want.startsWith("(") && Array.isArray(got)) {
    const w = tuples(want);
    t.check(w.length === got.length, `${path}: length`);
    w.forEach((tuple, i) => t.check(tuple.every((x, k) => x === Number(Object.values(got[i] ?? {})[k])), `${path}[${i}]`));
    return;
  }
  if (Array.isArray(want)) {
    t.check(Array.isArray(got) && got.length === want.length, `${path}: length`);
    want.forEach((w, i) => fields(w, got?.[i], `${path}[${i}]`));
    return;
  }
  if (typeof want === "object" && typeof want !== "bigint") {
    for (const [k, w] of Object.entries(want)) {
      if (["type", "data_length", "left_raw_byte"].includes(k)) continue;
      if (k === "textureUrl") {
        t.check(w === (got?.texture?.url ?? null), `${path}.textureUrl`);
        continue;
      }
      const key = k === "loc" && got && "position" in got ? "position" : (KEYS[k] ?? k);
      fields(w, got?.[key], `${path}.${k}`);
    }
    return;
  }
  if (typeof want === "number" && !Number.isInteger(want)) return t.check(floatsMatch(want, got), `${path}: want ${want}, got ${got}`);
  if (typeof want === "number" && typeof got === "number" && !Number.isInteger(got)) return t.check(floatsMatch(want, got), `${path}`);
  if (typeof got === "number" && typeof want === "string" && /^-?(NaN|Infinity)/.test(want)) return t.check(floatsMatch(want, got), path);
  t.check(String(want) === String(got), `${path}: want ${want}, got ${got}`);
}
const ourType = (ty) => (ty.split(" ")[0] === "UnknownObject" ? "Unknown" : ty.split(" ")[0]);
function checkObjects(b, want, dialect, what) {
  const d = gs.decode(b, dialect);
  if (!d.ok) return t.check(false, `${what}: ${d.error.message}`);
  t.check(d.objects.length === want.length, `${what}: count ${d.objects.length}`);
  d.objects.forEach((o, i) => {
    const json = gs.objectToJson(o);
    t.check(json.type === ourType(want[i].type), `${what}[${i}] type ${json.type}`);
    fields(want[i], json, `${what}[${i}]`);
  });
  t.check(hexEq(gs.encode(d.objects, dialect), gs.toHex(b)), `${what}: re-encode`);
  const back = parseJson(JSON.stringify(d.objects.map(gs.objectToJson), (_, v) => (typeof v === "bigint" ? String(v) : v)));
  t.check(hexEq(gs.encode(back.map(gs.objectFromJson), dialect), gs.toHex(b)), `${what}: JSON round trip`);
}
for (const v of vectors("objects.json")) checkObjects(bytes(v), [v.fields], "gse", v.name);
for (const v of vectors("concatenated.json")) checkObjects(bytes(v), v.fields.objects, "gse", v.name);
for (const v of vectors("draft01_objects_not_in_gse.json")) {
  const b = bytes(v);
  if (v.fields.type.includes("EBNF literal")) {
    // The literal `80 02` reads as tag 2, no optional part of Head1: kept as an extension.
    const d = gs.decode(b, "draft01");
    t.check(d.ok && d.objects.length === 1 && gs.toHex(d.objects[0].extra) === "8002022b2b", `${v.name}: extension`);
    t.check(d.ok && hexEq(gs.encode(d.objects, "draft01"), v.hex), `${v.name}: re-encode`);
  } else {
    checkObjects(b, [v.fields], "draft01", v.name);
  }
  if (v.gse_decode.result === "ok") checkObjects(b, v.gse_decode.objects, "gse", `${v.name} (gse)`);
  else t.check(!gs.decode(b, "gse").ok, `${v.name}: gse rejects it`);
}

// Malformed: refused where gse refuses, the same objects where gse accepts; never a throw.
for (const v of vectors("malformed.json")) {
  const d = gs.decode(bytes(v), "gse");
  if (v.fields.result === "error") t.check(!d.ok && d.error instanceof gs.DecodeError, `${v.name}: refused`);
  else {
    t.check(d.ok && d.objects.length === v.fields.objects.length, `${v.name}: accepted`);
    if (d.ok) d.objects.forEach((o, i) => fields(v.fields.objects[i], gs.objectToJson(o), `${v.name}[${i}]`));
  }
  t.check(typeof gs.decode(bytes(v), "draft01").ok === "boolean", `${v.name}: draft01 answers`);
}

// Tags: classified like gse; the probe (tag + Length 0) accepted exactly when gse accepted it.
for (const v of vectors("tags.json")) {
  const probe = gs.fromHex(v.probe_hex);
  const c = v.fields.gse_classification;
  const kind = gs.kindOf(v.fields.varuint_value, "gse");
  if (!c.startsWith("error")) t.check(kind.toLowerCase() === (c === "UnknownObject" ? "unknown" : c.toLowerCase()), `${v.name}: ${kind}`);
  t.check(gs.decode(probe, "gse").ok === (v.probe_decode.result === "ok"), `${v.name}: probe`);
}

// Garbage: random bytes and mutated vectors never throw from any decoder.
let seed = 0x9e3779b9;
const rand = () => ((seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32);
const samples = [...vectors("objects.json"), ...vectors("draft01_objects_not_in_gse.json")].map(bytes);
let thrown = 0;
let refused = 0;
const RUNS = 20000;
for (let i = 0; i < RUNS; i++) {
  let b;
  if (i % 2) {
    b = Uint8Array.from({ length: Math.floor(rand() * 64) }, () => Math.floor(rand() * 256));
  } else {
    b = samples[i % samples.length].slice(0, 1 + Math.floor(rand() * 200));
    for (let k = 0; k < 3; k++) if (b.length) b[Math.floor(rand() * b.length)] ^= 1 << Math.floor(rand() * 8);
  }
  try {
    for (const dialect of gs.DIALECTS) refused += gs.decode(b, dialect).ok ? 0 : 1;
    gs.parseRtp(b);
    gs.parseRtcp(b);
    gs.parseDatagram(b);
    new gs.RoqStreamReader().push(b);
    new gs.RoomState().ingest(b);
  } catch (e) {
    thrown++;
    if (thrown < 5) console.error(`threw on ${gs.toHex(b)}: ${e.stack}`);
  }
}
t.check(thrown === 0, `garbage: ${thrown} of ${RUNS} inputs threw`);
t.check(refused > RUNS / 2, `garbage: only ${refused} refusals`);
t.check(!gs.decode("not bytes").ok, "a string is refused, not thrown");
console.error(`garbage: ${RUNS} inputs, ${refused} dialect decodes refused, none threw`);

t.finish();
