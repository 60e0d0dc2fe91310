// gsrelay browser client: one ES module, no build step, no dependencies.
//
// - the game-state codec of draft-jennings-dispatch-game-state-over-rtp-01 in both wire
//   dialects of the relay ("draft01" and "gse", docs/wire-format.md), including the
//   relay's aggregated container; unknown tags are kept as raw bytes and re-encoded as is;
// - RTP header parse/build and the RTCP the client needs (FIR, PLI, BYE, RR);
// - RoQ framing (draft-ietf-avtcore-rtp-over-quic): QUIC varint flow id + one RTP/RTCP
//   packet per datagram, and flow id then (varint length, packet)* on a unidirectional
//   stream;
// - room state keyed by (SSRC, objectID), prediction (Loc2/Rot2 extrapolation);
// - the HTTP join, and a WebTransport or a WebRTC data-channel connection.
//
// Objects are plain JS objects shaped like the JSON that `gsrelay decode` prints
// (`{"type":"Head1","id":1,...}`), except that byte fields (`extra`, `data`) are
// Uint8Array; `objectToJson`/`objectFromJson` convert to and from that JSON form exactly.
// Integers beyond 2^53 − 1 (objectIDs, tags, VarInts) are BigInt. Float fields are numbers;
// a NaN other than the default quiet one is the string "NaN:0x<f32 bits>" ("-NaN" for the
// negative quiet one) so that decode → encode reproduces the bytes.
// Reference: docs/js-client.md.

/** Module version, shown by the viewer. */
export const VERSION = "0.1.0";

/** The two wire dialects. */
export const DIALECTS = Object.freeze(["draft01", "gse"]);

/** Tag of the relay's container object (0x4753, "GS"). */
export const CONTAINER_TAG = 0x4753;
const PARENT1_TAG = 4;
const SIXDOF_POINTER1_TAG = 136;
const LOC1 = 12;
const LOC2 = 18;
const ROT2 = 12;
const TRANSFORM1 = 6;
const MESH2_FIXED = LOC2 + ROT2 + LOC2;

const TAGS = {
  draft01: { Head1: 1, Hand1: 2, Object1: 3, Mesh1: 128, Hand2: 129, HeadIPD1: 130, Object2: 131,
    Mesh2: 132, GameControl1: 133, ThreeDOF1: 134, SixDOF1: 135, Container: CONTAINER_TAG },
  gse: { Head1: 1, Hand1: 2, Object1: 3, Mesh1: 0x8000, Hand2: 0x8001, HeadIPD1: 0x8002,
    Container: CONTAINER_TAG },
};
const KINDS = Object.fromEntries(
  Object.entries(TAGS).map(([d, t]) => [d, new Map(Object.entries(t).map(([k, v]) => [v, k]))]),
);

/** The object type `tag` names in `dialect` ("Unknown" if none). */
export function kindOf(tag, dialect = "draft01") {
  return KINDS[checkDialect(dialect)].get(Number(tag)) ?? "Unknown";
}

/** The tag `dialect` writes for an object type, or undefined. */
export function tagOf(type, dialect = "draft01") {
  return TAGS[checkDialect(dialect)][type];
}

function checkDialect(d) {
  if (d !== "draft01" && d !== "gse") throw new TypeError(`unknown dialect ${JSON.stringify(d)}`);
  return d;
}

// ---------------------------------------------------------------------------------------
// Errors

/** A payload that does not parse: where, and why. */
export class DecodeError extends Error {
  constructor(offset, kind, message) {
    super(`at byte ${offset}: ${message}`);
    this.name = "DecodeError";
    this.offset = offset;
    this.kind = kind;
  }
}

/** An object that cannot be written in a dialect. */
export class EncodeError extends Error {
  constructor(object, message) {
    super(`${object}: ${message}`);
    this.name = "EncodeError";
    this.object = object;
  }
}

/** An HTTP API refusal: the relay's `{"error":{"code","message"}}` and the status. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

/** Runs `f`, turning any exception into `{ok:false,error}`; the decoders never throw. */
function attempt(f) {
  try {
    return { ok: true, ...f() };
  } catch (e) {
    if (e instanceof DecodeError) return { ok: false, error: e };
    return { ok: false, error: new DecodeError(0, "internal", String(e && e.message || e)) };
  }
}

// ---------------------------------------------------------------------------------------
// Floats: Float32 bits and Float16 (IEEE binary16, round to nearest even, NaN payload kept)

const f32buf = new DataView(new ArrayBuffer(4));

function f32FromBits(bits) {
  bits >>>= 0;
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) {
    if (bits === 0x7fc00000) return NaN;
    if (bits === 0xffc00000) return "-NaN";
    return `NaN:0x${bits.toString(16).padStart(8, "0")}`;
  }
  f32buf.setUint32(0, bits);
  return f32buf.getFloat32(0);
}

function f32ToBits(v) {
  if (typeof v === "string") {
    if (v === "NaN") return 0x7fc00000;
    if (v === "-NaN") return 0xffc00000;
    if (v === "Infinity") return 0x7f800000;
    if (v === "-Infinity") return 0xff800000;
    const m = /^NaN:0x([0-9a-fA-F]{8})$/.exec(v);
    const bits = m ? parseInt(m[1], 16) >>> 0 : 0;
    if (!m || (bits & 0x7f800000) !== 0x7f800000 || (bits & 0x7fffff) === 0) {
      throw new EncodeError("float", `not a float: ${JSON.stringify(v)}`);
    }
    return bits;
  }
  if (typeof v !== "number") throw new EncodeError("float", `not a number: ${String(v)}`);
  if (Number.isNaN(v)) return 0x7fc00000;
  f32buf.setFloat32(0, v);
  return f32buf.getUint32(0);
}

/** Float16 bits → f32 value (exact; NaN payloads shifted across as the Rust codec does). */
export function f16ToF32(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const man = h & 0x3ff;
  if (exp === 0x1f) {
    if (man === 0) return sign * Infinity;
    return f32FromBits(((h & 0x8000) << 16) | 0x7f800000 | (man << 13));
  }
  if (exp === 0) return sign * man * 2 ** -24;
  return sign * (1 + man / 1024) * 2 ** (exp - 15);
}

/** A value (number or NaN string) → Float16 bits, via f32, rounding to nearest even. */
export function f32ToF16(v) {
  const x = f32ToBits(v);
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const man = x & 0x7fffff;
  if (exp === 0xff) {
    if (man === 0) return sign | 0x7c00;
    const payload = (man >>> 13) & 0x3ff;
    return sign | 0x7c00 | (payload === 0 ? 0x200 : payload);
  }
  const e = exp - 127;
  if (e >= 16) return sign | 0x7c00;
  if (e >= -14) {
    const half = sign | ((e + 15) << 10) | (man >>> 13);
    const rest = man & 0x1fff;
    return rest > 0x1000 || (rest === 0x1000 && half & 1) ? half + 1 : half;
  }
  if (e < -25) return sign;
  const m = man | 0x800000;
  const s = -e - 1;
  const half = m >>> s;
  const rest = m & ((1 << s) - 1);
  const mid = 1 << (s - 1);
  return sign | (rest > mid || (rest === mid && half & 1) ? half + 1 : half);
}

// ---------------------------------------------------------------------------------------
// Reader: bounds-checked reads of the draft's primitives

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const utf8 = new TextDecoder("utf-8", { fatal: true });
const utf8enc = new TextEncoder();

function narrow(b) {
  return b <= MAX_SAFE && b >= -MAX_SAFE ? Number(b) : b;
}

class Reader {
  constructor(buf, start = 0, end = buf.length) {
    this.buf = buf;
    this.pos = start;
    this.end = end;
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  get remaining() { return this.end - this.pos; }
  get empty() { return this.pos === this.end; }
  clone() { return new Reader(this.buf, this.pos, this.end); }
  fail(kind, message, at = this.pos) { return new DecodeError(at, kind, message); }
  need(n) {
    if (n > this.remaining) {
      throw this.fail("truncated", `needs ${n} bytes, ${this.remaining} left`);
    }
  }
  take(n) {
    this.need(n);
    const s = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  sub(n) {
    this.need(n);
    const r = new Reader(this.buf, this.pos, this.pos + n);
    this.pos += n;
    return r;
  }
  takeRest() { return this.take(this.remaining); }
  rest() { return this.buf.subarray(this.pos, this.end); }
  u8() { this.need(1); return this.buf[this.pos++]; }
  u16() { this.need(2); const v = this.view.getUint16(this.pos); this.pos += 2; return v; }
  u32() { this.need(4); const v = this.view.getUint32(this.pos); this.pos += 4; return v; }
  u64() { this.need(8); const v = this.view.getBigUint64(this.pos); this.pos += 8; return v; }
  i64() { this.need(8); const v = this.view.getBigInt64(this.pos); this.pos += 8; return v; }
  f16() { return f16ToF32(this.u16()); }
  f32() { return f32FromBits(this.u32()); }
  boolean(strict) {
    const at = this.pos;
    const b = this.u8();
    if (b > 1 && strict) throw this.fail("invalid_boolean", `Boolean byte 0x${hex2(b)}`, at);
    return b !== 0;
  }
  varuint() {
    const at = this.pos;
    const b0 = this.u8();
    if (b0 < 0x80) return b0;
    if (b0 < 0xc0) return ((b0 & 0x3f) << 8) | this.u8();
    if (b0 < 0xe0) return (b0 & 0x1f) * 65536 + this.u16();
    if (b0 === 0xe1) return this.u32();
    if (b0 === 0xe2) return narrow(this.u64());
    throw this.fail("invalid_var_prefix", `invalid VarUInt prefix 0x${hex2(b0)}`, at);
  }
  varint() {
    const at = this.pos;
    const b0 = this.u8();
    const ext = (v, bits) => (v >= 2 ** (bits - 1) ? v - 2 ** bits : v);
    if (b0 < 0x80) return ext(b0, 7);
    if (b0 < 0xc0) return ext(((b0 & 0x3f) << 8) | this.u8(), 14);
    if (b0 < 0xe0) return ext((b0 & 0x1f) * 65536 + this.u16(), 21);
    if (b0 === 0xe1) return this.u32() | 0;
    if (b0 === 0xe2) return narrow(this.i64());
    throw this.fail("invalid_var_prefix", `invalid VarInt prefix 0x${hex2(b0)}`, at);
  }
  length() {
    const at = this.pos;
    const n = this.varuint();
    if (typeof n !== "number") throw this.fail("length_overflow", `length ${n} too large`, at);
    return n;
  }
  blob() { return this.take(this.length()); }
  string() {
    const at = this.pos;
    const bytes = this.blob();
    try {
      return utf8.decode(bytes);
    } catch {
      throw this.fail("invalid_utf8", "string is not UTF-8", at);
    }
  }
}

function hex2(b) { return b.toString(16).padStart(2, "0"); }

/** Bytes → lowercase hex. */
export function toHex(bytes) {
  let s = "";
  for (const b of bytes) s += hex2(b);
  return s;
}

/** Hex (whitespace and colons allowed) → bytes; throws TypeError on bad input. */
export function fromHex(text) {
  const h = String(text).replace(/[\s:]/g, "");
  if (h.length % 2 || /[^0-9a-fA-F]/.test(h)) throw new TypeError("not hex");
  const out = new Uint8Array(h.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
}

// ---------------------------------------------------------------------------------------
// Writer: the draft's primitives, minimal forms

class Writer {
  constructor(size = 64) {
    this.buf = new Uint8Array(size);
    this.len = 0;
  }
  grow(n) {
    if (this.len + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }
  bytes(b) { this.grow(b.length); this.buf.set(b, this.len); this.len += b.length; }
  u8(v) { this.grow(1); this.buf[this.len++] = v & 0xff; }
  u16(v) { this.u8(v >>> 8); this.u8(v); }
  u32(v) { this.u16((v >>> 16) & 0xffff); this.u16(v & 0xffff); }
  u64(b) {
    const v = BigInt.asUintN(64, BigInt(b));
    this.u32(Number(v >> 32n)); this.u32(Number(v & 0xffffffffn));
  }
  f16(v) { this.u16(f32ToF16(v)); }
  f32(v) { this.u32(f32ToBits(v)); }
  bool(v) { this.u8(v ? 1 : 0); }
  varuint(v) {
    const n = toUint(v);
    if (n < 0x80n) this.u8(Number(n));
    else if (n < 0x4000n) this.u16(0x8000 | Number(n));
    else if (n < 0x200000n) { this.u8(0xc0 | Number(n >> 16n)); this.u16(Number(n & 0xffffn)); }
    else if (n < 0x100000000n) { this.u8(0xe1); this.u32(Number(n)); }
    else { this.u8(0xe2); this.u64(n); }
  }
  varint(v) {
    const n = toInt(v);
    const u = BigInt.asUintN(64, n);
    if (n >= -64n && n <= 63n) this.u8(Number(u & 0x7fn));
    else if (n >= -8192n && n <= 8191n) this.u16(0x8000 | Number(u & 0x3fffn));
    else if (n >= -1048576n && n <= 1048575n) {
      this.u8(0xc0 | Number((u >> 16n) & 0x1fn)); this.u16(Number(u & 0xffffn));
    } else if (n >= -2147483648n && n <= 2147483647n) { this.u8(0xe1); this.u32(Number(u & 0xffffffffn)); }
    else { this.u8(0xe2); this.u64(u); }
  }
  blob(b) { this.varuint(b.length); this.bytes(b); }
  finish() { return this.buf.slice(0, this.len); }
}

function toUint(v) {
  const n = toInt(v);
  if (n < 0n || n > 0xffffffffffffffffn) throw new EncodeError("VarUInt", `${v} out of range`);
  return n;
}

function toInt(v) {
  if (typeof v === "bigint") return v;
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  if (typeof v === "string" && /^-?\d+$/.test(v)) return BigInt(v);
  throw new EncodeError("integer", `not an integer: ${String(v)}`);
}

function bytesOf(v) {
  if (v === undefined || v === null) return new Uint8Array(0);
  if (v instanceof Uint8Array) return v;
  if (typeof v === "string") return fromHex(v);
  if (Array.isArray(v)) return Uint8Array.from(v);
  throw new EncodeError("bytes", "expected a Uint8Array or hex string");
}

// ---------------------------------------------------------------------------------------
// Layout: the structure shared by decode (what follows each objectID)

const FIXED = {
  Head1: { size: 2 + LOC2 + ROT2 },
  Hand1: { size: 3 + LOC2 + ROT2, boolAt: 2 },
  Hand2: { size: 3 + LOC2 + ROT2 + 25 * TRANSFORM1, boolAt: 2 },
  Object1: { draft01: { size: 2 + LOC1 + 6 + 2 + 1, boolAt: 22 }, gse: { size: 2 + LOC1 + 6 + 12 + 1, boolAt: 32 } },
  Object2: { size: 2 + LOC2 + ROT2 + LOC2 + 1, boolAt: 50 },
  ThreeDOF1: { size: 3 + ROT2, boolAt: 2 },
  SixDOF1: { size: 3 + LOC2 + ROT2, boolAt: 2 },
};
const OPTIONAL = { Head1: "ipd", Object1: "parent", Object2: "parent", Mesh2: "parent", SixDOF1: "pointer" };

function fixedOf(kind, dialect) {
  const f = FIXED[kind];
  return f && (f.size ? f : f[dialect]);
}

function takeFixed(r, layout, dialect) {
  const part = r.sub(layout.size);
  if (layout.boolAt !== undefined && dialect === "draft01") {
    const b = part.buf[part.pos + layout.boolAt];
    if (b > 1) throw part.fail("invalid_boolean", `Boolean byte 0x${hex2(b)}`, part.pos + layout.boolAt);
  }
  return part;
}

function readTlv(r) {
  const start = r.pos;
  const tag = r.varuint();
  if (tag === 0) throw r.fail("tag_zero", "tag 0 is tagInvalid", start);
  const len = r.length();
  return { start, tag, body: r.sub(len) };
}

function extensions(r) {
  const all = r.rest();
  while (!r.empty) readTlv(r);
  return all;
}

function expectEnd(r) {
  if (!r.empty) throw r.fail("trailing_bytes", `${r.remaining} trailing bytes`);
}

function nested(r, tag, size) {
  const at = r.pos;
  const len = r.varuint();
  const ok = tag === PARENT1_TAG ? len >= size : len === size;
  if (!ok) throw r.fail("optional_too_short", `optional part ${tag} has length ${len}`, at);
  return r.sub(len);
}

function trailer(r, opt, dialect) {
  return dialect === "draft01" ? draft01Trailer(r, opt) : gseTrailer(r, opt);
}

function draft01Trailer(r, opt) {
  const t = { extra: new Uint8Array(0) };
  if (r.empty) return t;
  const peek = r.clone();
  const tag = peek.varuint();
  if (opt === "ipd" && tag === TAGS.draft01.HeadIPD1) {
    t.ipd = nested(peek, tag, 2).f16();
    r.pos = peek.pos;
  } else if (opt === "parent" && tag === PARENT1_TAG) {
    const v = nested(peek, tag, 1);
    t.parent = v.varuint();
    expectEnd(v);
    r.pos = peek.pos;
  } else if (opt === "pointer" && tag === SIXDOF_POINTER1_TAG) {
    // The EBNF gives this part no Length; exactly one Loc1 left means "bare".
    if (peek.remaining === LOC1) t.pointer = { r: peek.sub(LOC1), bare: true };
    else t.pointer = { r: nested(peek, tag, LOC1), bare: false };
    r.pos = peek.pos;
  }
  t.extra = extensions(r).slice();
  return t;
}

function gseTrailer(r, opt) {
  const t = { extra: new Uint8Array(0) };
  if (r.empty) return t;
  if (opt === "ipd") {
    const at = r.pos;
    const tag = r.varuint();
    if (tag !== TAGS.gse.HeadIPD1) throw r.fail("unexpected_optional", `unexpected optional part ${tag}`, at);
    const lenAt = r.pos;
    const len = r.length();
    if (len < 2) throw r.fail("optional_too_short", `optional part ${tag} has length ${len}`, lenAt);
    t.ipd = r.sub(len).f16();
    expectEnd(r);
  } else if (opt === "parent") {
    t.parent = r.varuint();
    expectEnd(r);
  } else {
    t.extra = r.takeRest().slice();
  }
  return t;
}

// ---------------------------------------------------------------------------------------
// Decode

/**
 * Decodes every object of a game-state payload.
 * Returns `{ok: true, objects}` or `{ok: false, error: DecodeError}`; never throws.
 */
export function decode(payload, dialect = "draft01") {
  return attempt(() => {
    checkDialect(dialect);
    const r = new Reader(asBytes(payload));
    const objects = [];
    while (!r.empty) objects.push(decodeTlv(readTlv(r), dialect));
    return { objects };
  });
}

function asBytes(b) {
  if (b instanceof Uint8Array) return b;
  if (b instanceof ArrayBuffer) return new Uint8Array(b);
  if (ArrayBuffer.isView(b)) return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  throw new DecodeError(0, "not_bytes", "input is not a Uint8Array or ArrayBuffer");
}

function withExtra(o, extra) {
  if (extra.length) o.extra = extra;
  return o;
}

function decodeTlv(tlv, d) {
  const b = tlv.body;
  const kind = kindOf(tlv.tag, d);
  switch (kind) {
    case "Unknown":
      return { type: "Unknown", tag: tlv.tag, data: b.takeRest().slice() };
    case "HeadIPD1": {
      const ipd = b.f16();
      return withExtra({ type: "HeadIPD1", ipd }, trailer(b, "none", d).extra);
    }
    case "Mesh1": return decodeMesh1(b, d);
    case "Mesh2": return decodeMesh2(b);
    case "GameControl1": return decodeGameControl1(b, d);
    case "Container": return decodeContainer(b, d);
    default: return decodeFixed(kind, b, d);
  }
}

function loc2(r) {
  return { x: r.f32(), y: r.f32(), z: r.f32(), vx: r.f16(), vy: r.f16(), vz: r.f16() };
}
function rot2(r) {
  return { si: r.f16(), sj: r.f16(), sk: r.f16(), ei: r.f16(), ej: r.f16(), ek: r.f16() };
}
function vec3f32(r) { return { x: r.f32(), y: r.f32(), z: r.f32() }; }
function transform(r) { return { tx: r.f16(), ty: r.f16(), tz: r.f16() }; }
function finger(r) {
  return { tip: transform(r), dip: transform(r), pip: transform(r), mcp: transform(r), cmc: transform(r) };
}

function decodeFixed(kind, b, d) {
  const id = b.varuint();
  const f = takeFixed(b, fixedOf(kind, d), d);
  const t = trailer(b, OPTIONAL[kind] ?? "none", d);
  const strict = d === "draft01";
  const o = { type: kind, id, time: f.u16() };
  switch (kind) {
    case "Head1":
      o.location = loc2(f);
      o.rotation = rot2(f);
      if (t.ipd !== undefined) o.ipd = t.ipd;
      break;
    case "Hand1":
      o.left = f.boolean(strict);
      o.location = loc2(f);
      o.rotation = rot2(f);
      break;
    case "Hand2":
      o.left = f.boolean(strict);
      o.location = loc2(f);
      o.rotation = rot2(f);
      o.wrist = transform(f);
      o.thumb = { tip: transform(f), ip: transform(f), mcp: transform(f), cmc: transform(f) };
      o.index = finger(f);
      o.middle = finger(f);
      o.ring = finger(f);
      o.pinky = finger(f);
      break;
    case "Object1":
      o.position = vec3f32(f);
      o.rotation = { i: f.f16(), j: f.f16(), k: f.f16() };
      o.scale = d === "draft01" ? f.f16() : vec3f32(f);
      o.active = f.boolean(strict);
      if (t.parent !== undefined) o.parent = t.parent;
      break;
    case "Object2":
      o.location = loc2(f);
      o.rotation = rot2(f);
      o.scale = loc2(f);
      o.active = f.boolean(strict);
      if (t.parent !== undefined) o.parent = t.parent;
      break;
    case "ThreeDOF1":
      o.left = f.boolean(strict);
      o.rotation = rot2(f);
      break;
    case "SixDOF1":
      o.left = f.boolean(strict);
      o.location = loc2(f);
      o.rotation = rot2(f);
      if (t.pointer) {
        o.pointer = vec3f32(t.pointer.r);
        if (t.pointer.bare) o.pointer.bare = true;
      }
      break;
  }
  return withExtra(o, t.extra);
}

function fixedArray(r, size) {
  const at = r.pos;
  const count = r.length();
  if (count * size > r.remaining) throw r.fail("count_too_large", `count ${count} too large`, at);
  return { count, r: r.sub(count * size) };
}

function varuintArray(r, per) {
  const at = r.pos;
  const count = r.length();
  if (count * per > r.remaining) throw r.fail("count_too_large", `count ${count} too large`, at);
  const start = r.pos;
  const values = [];
  for (let i = 0; i < count * per; i++) values.push(r.varuint());
  return { count, values, start };
}

function decodeMesh1(b, d) {
  const id = b.varuint();
  if (d === "gse") return { type: "Mesh1", id, ...mesh1Arrays(b, d) };
  // The draft gives ( TextureUrl1 | TextureRtpPT1 ) no discriminator: take the URL
  // reading if the rest then parses, else the payload-type reading.
  const asUrl = b.clone();
  try {
    const url = asUrl.string();
    const m = mesh1Arrays(asUrl, d);
    b.pos = asUrl.pos;
    return { type: "Mesh1", id, texture: { url }, ...m };
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
  }
  const rtpPT = b.u8();
  return { type: "Mesh1", id, texture: { rtpPT }, ...mesh1Arrays(b, d) };
}

function mesh1Arrays(r, d) {
  const v = fixedArray(r, LOC1);
  const n = fixedArray(r, 6);
  let textures;
  if (d === "draft01") {
    const uv = fixedArray(r, 8);
    textures = Array.from({ length: uv.count }, () => ({ u: uv.r.f32(), v: uv.r.f32() }));
  } else {
    const uv = varuintArray(r, 2);
    textures = Array.from({ length: uv.count }, (_, i) => ({ u: uv.values[2 * i], v: uv.values[2 * i + 1] }));
  }
  const triangles = varuintArray(r, 1).values;
  const extra = trailer(r, "none", d).extra;
  const m = {
    vertices: Array.from({ length: v.count }, () => vec3f32(v.r)),
    normals: Array.from({ length: n.count }, () => ({ x: n.r.f16(), y: n.r.f16(), z: n.r.f16() })),
    textures,
    triangles,
  };
  return withExtra(m, extra);
}

function decodeMesh2(b) {
  const id = b.varuint();
  const f = b.sub(MESH2_FIXED);
  const meshUrl = b.string();
  // The optional texture has no tag either. Readings, in order of preference: no texture
  // when nothing or a Parent1 follows; a URL; a payload type; no texture with extension
  // TLVs. The first after which the rest parses as optional TLVs wins.
  const read = (texture, plain) => {
    const c = b.clone();
    let tex;
    if (texture === 1) tex = { url: c.string() };
    else if (texture === 2) tex = { rtpPT: c.u8() };
    const t = trailer(c, "parent", "draft01");
    if (plain && t.parent === undefined && t.extra.length) {
      throw c.fail("trailing_bytes", `${t.extra.length} trailing bytes`);
    }
    return { c, tex, t };
  };
  let got;
  let last;
  for (const [texture, plain] of [[0, true], [1, false], [2, false], [0, false]]) {
    try {
      got = read(texture, plain);
      break;
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      last = e;
    }
  }
  if (!got) throw last;
  b.pos = got.c.pos;
  const o = { type: "Mesh2", id, location: loc2(f), rotation: rot2(f), scale: loc2(f), meshUrl };
  if (got.tex) o.texture = got.tex;
  if (got.t.parent !== undefined) o.parent = got.t.parent;
  return withExtra(o, got.t.extra);
}

function decodeGameControl1(b, d) {
  const id = b.varuint();
  const time = b.u16();
  const buttons = b.varint();
  const buttonsTime = b.u16();
  const s = b.sub(8);
  const t = trailer(b, "none", d);
  const o = {
    type: "GameControl1", id, time, buttons, buttonsTime,
    left: { x: s.f16(), y: s.f16() }, right: { x: s.f16(), y: s.f16() },
  };
  return withExtra(o, t.extra);
}

function readSsrc(b) {
  const at = b.pos;
  const id = b.varuint();
  if (typeof id !== "number" || id > 0xffffffff) {
    throw b.fail("container_id", `container objectID ${id} is not an SSRC`, at);
  }
  return id;
}

function decodeContainer(b, d) {
  const ssrc = readSsrc(b);
  const objects = [];
  while (!b.empty) {
    const tlv = readTlv(b);
    if (kindOf(tlv.tag, d) === "Container") {
      throw b.fail("nested_container", "a container cannot hold a container", tlv.start);
    }
    objects.push(decodeTlv(tlv, d));
  }
  return { type: "Container", ssrc, objects };
}

// ---------------------------------------------------------------------------------------
// Encode

/** Encodes objects into one payload (Uint8Array). Throws EncodeError on a bad object. */
export function encode(objects, dialect = "draft01") {
  checkDialect(dialect);
  const w = new Writer(256);
  for (const o of Array.isArray(objects) ? objects : [objects]) encodeObject(o, dialect, w);
  return w.finish();
}

function encodeObject(o, d, out) {
  if (!o || typeof o !== "object") throw new EncodeError("object", "not an object");
  let tag;
  let body;
  if (o.type === "Unknown") {
    tag = unknownTag(o, d);
    body = bytesOf(o.data);
  } else {
    tag = tagOf(o.type, d);
    if (tag === undefined) throw new EncodeError(String(o.type), `not part of the ${d} dialect`);
    const w = new Writer(64);
    writeBody(o, d, w);
    body = w.finish();
  }
  const start = out.len;
  out.varuint(tag);
  out.blob(body);
  // Extension bytes must not collide with the object's own optional part.
  if (o.extra && bytesOf(o.extra).length) {
    const check = decode(out.buf.slice(start, out.len), d);
    if (!check.ok) {
      out.len = start;
      throw new EncodeError(o.type, `\`extra\` makes the object undecodable: ${check.error.message}`);
    }
  }
}

function unknownTag(o, d) {
  const tag = o.tag;
  if (tag === 0 || tag === 0n) throw new EncodeError("Unknown", "tag 0 is tagInvalid");
  const kind = kindOf(tag, d);
  if (kind !== "Unknown") throw new EncodeError("Unknown", `tag ${tag} is ${kind} in the ${d} dialect`);
  return tag;
}

function wLoc2(w, l) { for (const k of ["x", "y", "z"]) w.f32(l[k]); for (const k of ["vx", "vy", "vz"]) w.f16(l[k]); }
function wRot2(w, r) { for (const k of ["si", "sj", "sk", "ei", "ej", "ek"]) w.f16(r[k]); }
function wTransform(w, t) { w.f16(t.tx); w.f16(t.ty); w.f16(t.tz); }
function wVec3f32(w, v) { w.f32(v.x); w.f32(v.y); w.f32(v.z); }
function wTexture(w, t) {
  if (typeof t.url === "string") w.blob(utf8enc.encode(t.url));
  else w.u8(t.rtpPT);
}
function wParentTlv(w, parent) {
  if (parent === undefined || parent === null) return;
  const id = new Writer(9);
  id.varuint(parent);
  w.varuint(PARENT1_TAG);
  w.blob(id.finish());
}

function need(o, field) {
  if (o[field] === undefined || o[field] === null) {
    throw new EncodeError(`${o.type}.${field}`, "missing");
  }
  return o[field];
}

function writeBody(o, d, w) {
  if (o.type === "Container") return writeContainer(o, d, w);
  if (o.type === "HeadIPD1") {
    w.f16(need(o, "ipd"));
    return w.bytes(bytesOf(o.extra));
  }
  w.varuint(need(o, "id"));
  switch (o.type) {
    case "Head1":
      w.u16(need(o, "time"));
      wLoc2(w, need(o, "location"));
      wRot2(w, need(o, "rotation"));
      if (o.ipd !== undefined && o.ipd !== null) {
        w.varuint(tagOf("HeadIPD1", d)); w.varuint(2); w.f16(o.ipd);
      }
      break;
    case "Hand1":
    case "Hand2":
      w.u16(need(o, "time"));
      w.bool(o.left);
      wLoc2(w, need(o, "location"));
      wRot2(w, need(o, "rotation"));
      if (o.type === "Hand2") {
        const t = need(o, "thumb");
        for (const j of [need(o, "wrist"), t.tip, t.ip, t.mcp, t.cmc]) wTransform(w, j);
        for (const f of ["index", "middle", "ring", "pinky"].map((k) => need(o, k))) {
          for (const j of [f.tip, f.dip, f.pip, f.mcp, f.cmc]) wTransform(w, j);
        }
      }
      break;
    case "Object1": writeObject1(o, d, w); break;
    case "Object2":
      w.u16(need(o, "time"));
      wLoc2(w, need(o, "location"));
      wRot2(w, need(o, "rotation"));
      wLoc2(w, need(o, "scale"));
      w.bool(o.active);
      wParentTlv(w, o.parent);
      break;
    case "Mesh1": writeMesh1(o, d, w); break;
    case "Mesh2":
      wLoc2(w, need(o, "location"));
      wRot2(w, need(o, "rotation"));
      wLoc2(w, need(o, "scale"));
      w.blob(utf8enc.encode(need(o, "meshUrl")));
      if (o.texture) wTexture(w, o.texture);
      wParentTlv(w, o.parent);
      break;
    case "GameControl1":
      w.u16(need(o, "time"));
      w.varint(o.buttons ?? 0);
      w.u16(o.buttonsTime ?? 0);
      for (const s of [need(o, "left"), need(o, "right")]) { w.f16(s.x); w.f16(s.y); }
      break;
    case "ThreeDOF1":
      w.u16(need(o, "time"));
      w.bool(o.left);
      wRot2(w, need(o, "rotation"));
      break;
    case "SixDOF1":
      w.u16(need(o, "time"));
      w.bool(o.left);
      wLoc2(w, need(o, "location"));
      wRot2(w, need(o, "rotation"));
      if (o.pointer) {
        w.varuint(SIXDOF_POINTER1_TAG);
        if (!o.pointer.bare) w.varuint(LOC1);
        wVec3f32(w, o.pointer);
      }
      break;
    default:
      throw new EncodeError(String(o.type), "unknown object type");
  }
  w.bytes(bytesOf(o.extra));
}

function writeObject1(o, d, w) {
  w.u16(need(o, "time"));
  wVec3f32(w, need(o, "position"));
  const r = need(o, "rotation");
  w.f16(r.i); w.f16(r.j); w.f16(r.k);
  const s = o.scale ?? 1;
  const uniform = typeof s !== "object";
  if (d === "draft01") {
    if (!uniform) throw new EncodeError("Object1.scale", "draft01 has one Float16 scale, not {x,y,z}");
    w.f16(s);
  } else {
    if (uniform) throw new EncodeError("Object1.scale", "gse has a {x,y,z} scale, not one number");
    wVec3f32(w, s);
  }
  w.bool(o.active);
  if (d === "draft01") wParentTlv(w, o.parent);
  else if (o.parent !== undefined && o.parent !== null) w.varuint(o.parent);
}

function writeMesh1(o, d, w) {
  if (d === "draft01") {
    if (!o.texture) throw new EncodeError("Mesh1.texture", "draft01 requires a texture");
    wTexture(w, o.texture);
  } else if (o.texture) {
    throw new EncodeError("Mesh1.texture", "gse Mesh1 has no texture");
  }
  const vertices = o.vertices ?? [];
  w.varuint(vertices.length);
  for (const v of vertices) wVec3f32(w, v);
  const normals = o.normals ?? [];
  w.varuint(normals.length);
  for (const n of normals) { w.f16(n.x); w.f16(n.y); w.f16(n.z); }
  const textures = o.textures ?? [];
  w.varuint(textures.length);
  for (const t of textures) {
    if (d === "draft01") { w.f32(Number(t.u)); w.f32(Number(t.v)); continue; }
    const whole = (x) => (typeof x === "bigint" || (Number.isInteger(x) && x >= 0));
    if (!whole(t.u) || !whole(t.v)) throw new EncodeError("Mesh1.textures", "gse texture coordinates are VarUInts");
    w.varuint(t.u); w.varuint(t.v);
  }
  const triangles = o.triangles ?? [];
  w.varuint(triangles.length);
  for (const t of triangles) w.varuint(t);
}

function writeContainer(c, d, w) {
  w.varuint(need(c, "ssrc"));
  for (const o of c.objects ?? []) {
    if (o.type === "Container") throw new EncodeError("Container", "a container cannot hold a container");
    encodeObject(o, d, w);
  }
}

// ---------------------------------------------------------------------------------------
// JSON form (what `gsrelay decode` prints and `gsrelay encode` reads)

function mapValues(v, f) {
  if (v instanceof Uint8Array) return f(v);
  if (Array.isArray(v)) return v.map((x) => mapValues(x, f));
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapValues(x, f)]));
  }
  return f(v);
}

/** An object in the JSON form: bytes as hex, non-finite floats as strings. */
export function objectToJson(o) {
  return mapValues(o, (v) => {
    if (v instanceof Uint8Array) return toHex(v);
    if (v === Infinity) return "Infinity";
    if (v === -Infinity) return "-Infinity";
    if (typeof v === "number" && Number.isNaN(v)) return "NaN";
    return v;
  });
}

/**
 * JSON text of a value such as `objects.map(objectToJson)`, exactly as `gsrelay encode`
 * reads it: BigInt written as plain integers and −0 kept (JSON.stringify drops both).
 */
export function stringify(value) {
  const mark = (_, v) => {
    if (typeof v === "bigint") return `\u0000int:${v}`;
    if (Object.is(v, -0)) return "\u0000int:-0.0";
    return v;
  };
  return JSON.stringify(value, mark).replace(/"\\u0000int:(-?[\d.]+)"/g, "$1");
}

const BYTE_FIELDS = new Set(["extra", "data"]);

/** An object from the JSON form (hex strings become Uint8Array). */
export function objectFromJson(j) {
  const walk = (v, key) => {
    if (BYTE_FIELDS.has(key) && typeof v === "string") return fromHex(v);
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === "object") {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
    }
    return v;
  };
  return walk(j);
}

// ---------------------------------------------------------------------------------------
// RTP (RFC 3550) and the RTCP the client needs (RFC 3550, 4585, 5104)

/** True when a packet on an RTP/RTCP-multiplexed flow is RTCP (RFC 5761 §4). */
export function isRtcp(packet) {
  return packet.length >= 2 && packet[1] >= 192 && packet[1] <= 223;
}

/**
 * Parses an RTP packet. Returns `{ok:true, packet:{marker, payloadType, sequenceNumber,
 * timestamp, ssrc, csrcs, extension, payload}}` or `{ok:false, error}`; never throws.
 */
export function parseRtp(bytes) {
  return attempt(() => {
    const b = asBytes(bytes);
    const r = new Reader(b);
    const b0 = r.u8();
    if (b0 >> 6 !== 2) throw r.fail("rtp_version", `RTP version ${b0 >> 6}`, 0);
    const b1 = r.u8();
    const sequenceNumber = r.u16();
    const timestamp = r.u32();
    const ssrc = r.u32();
    const csrcs = Array.from({ length: b0 & 0x0f }, () => r.u32());
    let extension = null;
    if (b0 & 0x10) {
      const profile = r.u16();
      extension = { profile, data: r.take(r.u16() * 4) };
    }
    let end = b.length;
    if (b0 & 0x20) {
      const pad = b[b.length - 1];
      if (pad === 0 || pad > r.remaining) throw r.fail("rtp_padding", `padding ${pad}`, b.length - 1);
      end -= pad;
    }
    return {
      packet: {
        marker: (b1 & 0x80) !== 0, payloadType: b1 & 0x7f, sequenceNumber, timestamp, ssrc,
        csrcs, extension, payload: b.subarray(r.pos, end),
      },
    };
  });
}

/** Builds an RTP packet (no CSRC, no extension, no padding). */
export function buildRtp({ payloadType = 96, marker = false, sequenceNumber, timestamp, ssrc, payload }) {
  const out = new Uint8Array(12 + payload.length);
  const v = new DataView(out.buffer);
  out[0] = 0x80;
  out[1] = (marker ? 0x80 : 0) | (payloadType & 0x7f);
  v.setUint16(2, sequenceNumber & 0xffff);
  v.setUint32(4, timestamp >>> 0);
  v.setUint32(8, ssrc >>> 0);
  out.set(payload, 12);
  return out;
}

const RTCP = { SR: 200, RR: 201, SDES: 202, BYE: 203, APP: 204, RTPFB: 205, PSFB: 206 };

function rtcpHeader(count, pt, words) {
  const out = new Uint8Array(4 * (words + 1));
  out[0] = 0x80 | count;
  out[1] = pt;
  new DataView(out.buffer).setUint16(2, words);
  return out;
}

/** RTCP FIR (RFC 5104 §4.3.1): `sender` asks `media` for a full state, `seq` 0–255. */
export function buildFir(sender, media, seq) {
  const p = rtcpHeader(4, RTCP.PSFB, 4);
  const v = new DataView(p.buffer);
  v.setUint32(4, sender >>> 0);
  v.setUint32(8, 0);
  v.setUint32(12, media >>> 0);
  p[16] = seq & 0xff;
  return p;
}

/** RTCP PLI (RFC 4585 §6.3.1). */
export function buildPli(sender, media) {
  const p = rtcpHeader(1, RTCP.PSFB, 2);
  const v = new DataView(p.buffer);
  v.setUint32(4, sender >>> 0);
  v.setUint32(8, media >>> 0);
  return p;
}

/** An empty RTCP RR (no report blocks) from `ssrc`. */
export function buildRr(ssrc) {
  const p = rtcpHeader(0, RTCP.RR, 1);
  new DataView(p.buffer).setUint32(4, ssrc >>> 0);
  return p;
}

/** RTCP BYE for `ssrc`. */
export function buildBye(ssrc) {
  const p = rtcpHeader(1, RTCP.BYE, 1);
  new DataView(p.buffer).setUint32(4, ssrc >>> 0);
  return p;
}

/**
 * Object ownership messages (docs/relay.md, "Room objects and ownership"): RTCP APP
 * packets named `GSOW` whose subtype is the kind; the relay's notices say why an object
 * was lost or a request refused, by the reason's name.
 */
export const OWNERSHIP = Object.freeze({
  name: "GSOW",
  kinds: Object.freeze({ request: 1, release: 2, granted: 3, lost: 4, refused: 5 }),
  reasons: Object.freeze(["none", "contended", "no_object", "gone", "not_home", "dialect_mismatch",
    "id_in_use", "too_many_held", "not_publisher"]),
  maxEntries: 16,
});

const OWNERSHIP_KIND_NAMES = Object.fromEntries(Object.entries(OWNERSHIP.kinds).map(([k, v]) => [v, k]));

/**
 * An ownership message of `kind` ("request" or "release") from `sender` about `objects`,
 * each `[ssrc, objectId]` (objectId a number or a BigInt); 1 to 16 objects.
 */
export function buildOwnership(kind, sender, objects) {
  const subtype = OWNERSHIP.kinds[kind];
  if (kind !== "request" && kind !== "release") throw new TypeError(`a client sends request or release, not ${kind}`);
  if (objects.length === 0 || objects.length > OWNERSHIP.maxEntries) {
    throw new RangeError(`1 to ${OWNERSHIP.maxEntries} objects, not ${objects.length}`);
  }
  const p = rtcpHeader(subtype, RTCP.APP, 2 + 4 * objects.length);
  const v = new DataView(p.buffer);
  v.setUint32(4, sender >>> 0);
  for (let i = 0; i < 4; i++) p[8 + i] = OWNERSHIP.name.charCodeAt(i);
  objects.forEach(([ssrc, object], i) => {
    v.setUint32(12 + 16 * i, ssrc >>> 0);
    v.setBigUint64(16 + 16 * i, BigInt(object));
  });
  return p;
}

/**
 * Parses a compound RTCP packet into items: `{type:"sr"|"rr", ssrc}`, `{type:"bye",
 * ssrcs}`, `{type:"fir", sender, entries:[{ssrc, seq}]}`, `{type:"pli", sender, media}`,
 * `{type:"ownership", kind, sender, entries:[{ssrc, object, reason}]}` (an ownership message:
 * `kind` by name, `object` a number or a BigInt past 2^53, `reason` by name), `{type:"other",
 * pt, count}`. Returns `{ok, items}` or `{ok:false, error}`; never throws.
 */
export function parseRtcp(bytes) {
  return attempt(() => {
    const r = new Reader(asBytes(bytes));
    const items = [];
    while (!r.empty) {
      const at = r.pos;
      const b0 = r.u8();
      if (b0 >> 6 !== 2) throw r.fail("rtcp_version", `RTCP version ${b0 >> 6}`, at);
      const pt = r.u8();
      const body = r.sub(r.u16() * 4);
      items.push(rtcpItem(b0 & 0x1f, pt, body));
    }
    return { items };
  });
}

function rtcpItem(count, pt, b) {
  if (pt === RTCP.SR || pt === RTCP.RR) return { type: pt === RTCP.SR ? "sr" : "rr", ssrc: b.u32() };
  if (pt === RTCP.BYE) return { type: "bye", ssrcs: Array.from({ length: count }, () => b.u32()) };
  if (pt === RTCP.PSFB && count === 1) return { type: "pli", sender: b.u32(), media: b.u32() };
  if (pt === RTCP.PSFB && count === 4) {
    const sender = b.u32();
    b.u32();
    const entries = [];
    while (b.remaining >= 8) {
      const ssrc = b.u32();
      const seq = b.u8();
      b.take(3);
      entries.push({ ssrc, seq });
    }
    return { type: "fir", sender, entries };
  }
  if (pt === RTCP.APP && b.remaining >= 8) {
    const sender = b.u32();
    const name = String.fromCharCode(...b.take(4));
    const kind = OWNERSHIP_KIND_NAMES[count];
    if (name === OWNERSHIP.name && kind && b.remaining > 0 && b.remaining % 16 === 0
      && b.remaining / 16 <= OWNERSHIP.maxEntries) {
      const entries = [];
      while (!b.empty) {
        const ssrc = b.u32();
        const object = narrow(b.u64());
        const reason = OWNERSHIP.reasons[b.u8()] ?? "none";
        b.take(3);
        entries.push({ ssrc, object, reason });
      }
      return { type: "ownership", kind, sender, entries };
    }
  }
  return { type: "other", pt, count };
}

// ---------------------------------------------------------------------------------------
// RoQ framing (draft-ietf-avtcore-rtp-over-quic): QUIC variable-length integers (RFC 9000 §16)

/** Writes a QUIC varint (1, 2, 4 or 8 bytes). */
export function encodeQuicVarint(value) {
  const v = BigInt(value);
  if (v < 0n || v >= 1n << 62n) throw new RangeError(`QUIC varint out of range: ${value}`);
  if (v < 64n) return Uint8Array.of(Number(v));
  if (v < 16384n) return Uint8Array.of(0x40 | Number(v >> 8n), Number(v & 0xffn));
  const len = v < 1n << 30n ? 4 : 8;
  const out = new Uint8Array(len);
  for (let i = len - 1, x = v; i >= 0; i--, x >>= 8n) out[i] = Number(x & 0xffn);
  out[0] |= len === 4 ? 0x80 : 0xc0;
  return out;
}

/** Reads a QUIC varint at `offset`: `{value, length}` or null if the bytes end first. */
export function decodeQuicVarint(bytes, offset = 0) {
  if (offset >= bytes.length) return null;
  const length = 1 << (bytes[offset] >> 6);
  if (offset + length > bytes.length) return null;
  let v = BigInt(bytes[offset] & 0x3f);
  for (let i = 1; i < length; i++) v = (v << 8n) | BigInt(bytes[offset + i]);
  return { value: narrow(v), length };
}

/** One RoQ datagram: the flow id, then one RTP or RTCP packet. */
export function frameDatagram(flowId, packet) {
  const id = encodeQuicVarint(flowId);
  const out = new Uint8Array(id.length + packet.length);
  out.set(id);
  out.set(packet, id.length);
  return out;
}

/** Splits a RoQ datagram: `{ok, flowId, packet}` or `{ok:false, error}`; never throws. */
export function parseDatagram(bytes) {
  return attempt(() => {
    const b = asBytes(bytes);
    const id = decodeQuicVarint(b);
    if (!id) throw new DecodeError(0, "roq_flow_id", "datagram ends inside its flow id");
    if (id.length === b.length) throw new DecodeError(id.length, "roq_empty", "datagram carries no packet");
    return { flowId: id.value, packet: b.subarray(id.length) };
  });
}

/** The opening of a RoQ unidirectional stream: the flow id. */
export function frameStreamHeader(flowId) {
  return encodeQuicVarint(flowId);
}

/** One packet on a RoQ stream: its QUIC-varint length, then the packet. */
export function frameStreamPacket(packet) {
  return frameDatagram(packet.length, packet);
}

/**
 * Incremental reader of a RoQ unidirectional stream: `push(chunk)` returns the complete
 * packets so far; `flowId` is set once read. A packet longer than `maxPacket` is an error
 * (`error` set, later input ignored): the stream is not trusted further.
 */
export class RoqStreamReader {
  constructor({ maxPacket = 65535 } = {}) {
    this.maxPacket = maxPacket;
    this.buf = new Uint8Array(0);
    this.flowId = undefined;
    this.error = null;
  }
  push(chunk) {
    if (this.error) return [];
    const joined = new Uint8Array(this.buf.length + chunk.length);
    joined.set(this.buf);
    joined.set(chunk, this.buf.length);
    let at = 0;
    const packets = [];
    if (this.flowId === undefined) {
      const id = decodeQuicVarint(joined, at);
      if (!id) { this.buf = joined; return packets; }
      this.flowId = id.value;
      at += id.length;
    }
    for (;;) {
      const len = decodeQuicVarint(joined, at);
      if (!len) break;
      if (typeof len.value !== "number" || len.value > this.maxPacket || len.value === 0) {
        this.error = new DecodeError(at, "roq_packet_length", `packet length ${len.value}`);
        break;
      }
      if (at + len.length + len.value > joined.length) break;
      packets.push(joined.slice(at + len.length, at + len.length + len.value));
      at += len.length + len.value;
    }
    this.buf = joined.slice(at);
    return packets;
  }
}

// ---------------------------------------------------------------------------------------
// Prediction (the draft's Appendix D/E; the same model as the relay's crates/core/src/wire/predict.rs)

/** Signed ms from Time1 `from` to `to` (both low 16 bits of epoch ms), within ±32.767 s. */
export function timeDeltaMs(from, to) {
  const d = (to - from) & 0xffff;
  return d >= 0x8000 ? d - 0x10000 : d;
}

/** Time1 now: the low 16 bits of the epoch in ms. */
export function time1(nowMs = Date.now()) {
  return Math.floor(nowMs) & 0xffff;
}

/** A Loc2 (or Scale2) `dt` seconds later. */
export function extrapolate(l, dt) {
  return [num(l.x) + num(l.vx) * dt, num(l.y) + num(l.vy) * dt, num(l.z) + num(l.vz) * dt];
}

function num(v) { return typeof v === "number" ? v : NaN; }

/** The unit quaternion [w, i, j, k] from its vector part (non-negative real part). */
export function quatFromVector(i, j, k) {
  const w2 = 1 - (num(i) ** 2 + num(j) ** 2 + num(k) ** 2);
  return normalize([Math.sqrt(Math.max(w2, 0)), num(i), num(j), num(k)]);
}

function dot(a, b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]; }
function normalize(q) {
  const n = Math.sqrt(dot(q, q));
  return n > 0 ? q.map((c) => c / n) : [1, 0, 0, 0];
}

/** Spherical linear interpolation along the shorter arc; `t` outside 0..1 extrapolates. */
export function slerp(a, b, t) {
  let d = dot(a, b);
  if (d < 0) { d = -d; b = b.map((c) => -c); }
  if (d > 0.9995) return normalize(a.map((c, n) => c + (b[n] - c) * t));
  const theta = Math.acos(Math.min(d, 1));
  const s = Math.sin(theta);
  const wa = Math.sin((1 - t) * theta) / s;
  const wb = Math.sin(t * theta) / s;
  return normalize(a.map((c, n) => c * wa + b[n] * wb));
}

/** Rot2's rotation `dt` seconds after its `s`. */
export function rot2At(r, dt) {
  return slerp(quatFromVector(r.si, r.sj, r.sk), quatFromVector(r.ei, r.ej, r.ek), dt);
}

/** Heading (radians about +y, 0 facing −z) of a quaternion [w, i, j, k]. */
export function yawOf(q) {
  const [w, x, y, z] = q;
  return Math.atan2(2 * (w * y + x * z), 1 - 2 * (y * y + x * x));
}

/**
 * An object's predicted `{position, rotation, scale}` at `nowMs` (epoch ms), each absent
 * when the type has none. `maxAheadMs` caps the extrapolation (a sender that stopped
 * should not drift away forever); the relay applies no cap.
 */
export function predict(o, nowMs = Date.now(), { maxAheadMs = Infinity } = {}) {
  const at = (time) => Math.min(timeDeltaMs(time, time1(nowMs)), maxAheadMs) / 1000;
  const moving = (l, r, dt) => ({ position: extrapolate(l, dt), rotation: rot2At(r, dt) });
  switch (o.type) {
    case "Head1": case "Hand1": case "Hand2": case "SixDOF1":
      return moving(o.location, o.rotation, at(o.time));
    case "Object2":
      return { ...moving(o.location, o.rotation, at(o.time)), scale: extrapolate(o.scale, at(o.time)) };
    case "Mesh2":
      return { ...moving(o.location, o.rotation, 0), scale: extrapolate(o.scale, 0) };
    case "ThreeDOF1":
      return { rotation: rot2At(o.rotation, at(o.time)) };
    case "Object1": {
      const s = o.scale;
      return {
        position: [num(o.position.x), num(o.position.y), num(o.position.z)],
        rotation: quatFromVector(o.rotation.i, o.rotation.j, o.rotation.k),
        scale: typeof s === "object" ? [num(s.x), num(s.y), num(s.z)] : [num(s), num(s), num(s)],
      };
    }
    default:
      return {};
  }
}

// ---------------------------------------------------------------------------------------
// Room state

/**
 * The key of an object within its stream: its objectID (an unknown object's is the VarUInt
 * its body starts with, as the relay reads it), else its type (a top-level HeadIPD1).
 */
export function objectKey(o) {
  if (o.id !== undefined) return String(o.id);
  if (o.type === "Unknown") {
    try {
      return String(new Reader(bytesOf(o.data)).varuint());
    } catch {
      return `unknown:${o.tag}`;
    }
  }
  return o.type;
}

const RATE_WINDOW_MS = 2000;

/** True when 16-bit sequence number `a` is `b` or comes after it (RFC 3550 wrap-around). */
function seqAtLeast(a, b) {
  return ((a - b) & 0xffff) < 0x8000;
}

/**
 * What a subscriber knows of a room: per stream (sender SSRC) the latest state of each
 * object, update rates, and removal on BYE. Feed it with `ingest(packet)` (RTP or RTCP, as
 * a RoQ datagram or stream carries them); `onchange` is called after each change.
 * Datagrams may arrive out of order: an object is replaced only by one from a packet of
 * the same RTP stream with a later sequence number (the relay numbers each subscriber's
 * packets in sending order, snapshots and repairs included), else counted `stale`.
 */
export class RoomState {
  constructor({ dialect = "draft01", now = () => performance.now() } = {}) {
    this.dialect = checkDialect(dialect);
    this.now = now;
    this.streams = new Map();
    this.dropped = { rtp: 0, rtcp: 0, payload: 0, stale: 0 };
    this.onchange = null;
  }

  /** Applies one RTP or RTCP packet; returns what it was ("rtp", "rtcp", or "dropped:<why>"). */
  ingest(packet) {
    if (isRtcp(packet)) {
      const r = parseRtcp(packet);
      if (!r.ok) { this.dropped.rtcp++; return "dropped:rtcp"; }
      for (const item of r.items) if (item.type === "bye") item.ssrcs.forEach((s) => this.remove(s));
      return "rtcp";
    }
    const p = parseRtp(packet);
    if (!p.ok) { this.dropped.rtp++; return "dropped:rtp"; }
    const d = decode(p.packet.payload, this.dialect);
    if (!d.ok) { this.dropped.payload++; return "dropped:payload"; }
    const from = { stream: p.packet.ssrc, seq: p.packet.sequenceNumber, at: this.now() };
    for (const o of d.objects) {
      if (o.type === "Container") o.objects.forEach((inner) => this.apply(o.ssrc, inner, from));
      else this.apply(p.packet.ssrc, o, from);
    }
    this.changed();
    return "rtp";
  }

  /** Stores `o` as sender `ssrc`'s latest state, unless a later packet already updated it. */
  apply(ssrc, o, { stream, seq, at }) {
    let s = this.streams.get(ssrc);
    if (!s) {
      s = { ssrc, objects: new Map(), updates: 0, arrivals: [], firstSeenMs: at };
      this.streams.set(ssrc, s);
    }
    const key = objectKey(o);
    const prev = s.objects.get(key);
    if (prev && prev.stream === stream && !seqAtLeast(seq, prev.seq)) {
      this.dropped.stale++;
      return;
    }
    s.objects.set(key, { object: o, receivedMs: at, stream, seq });
    s.updates++;
    s.arrivals.push(at);
    while (s.arrivals.length && s.arrivals[0] < at - RATE_WINDOW_MS) s.arrivals.shift();
  }

  /** Drops a stream and its objects (a BYE, or the sender left). */
  remove(ssrc) {
    if (this.streams.delete(ssrc)) this.changed();
  }

  /**
   * Drops every stream: a session that rejoined holds what the new relay sends, and the
   * relay numbers a new session's packets afresh, so older state would block newer.
   */
  clear() {
    if (this.streams.size === 0) return;
    this.streams.clear();
    this.changed();
  }

  changed() {
    if (typeof this.onchange === "function") this.onchange(this);
  }

  /** Object updates per second of a stream over the last two seconds. */
  rate(ssrc) {
    const s = this.streams.get(ssrc);
    if (!s) return 0;
    const from = this.now() - RATE_WINDOW_MS;
    return s.arrivals.filter((t) => t >= from).length / (RATE_WINDOW_MS / 1000);
  }

  /** Every object: `{ssrc, key, object, receivedMs}`. */
  *objects() {
    for (const s of this.streams.values()) {
      for (const [key, e] of s.objects) yield { ssrc: s.ssrc, key, ...e };
    }
  }

  /** Total objects held. */
  get objectCount() {
    let n = 0;
    for (const s of this.streams.values()) n += s.objects.size;
    return n;
  }
}

// ---------------------------------------------------------------------------------------
// HTTP control plane (docs/api.md)

async function api(baseUrl, method, path, token, body, signal) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(new URL(path, baseUrl), {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal,
  });
  const text = await resp.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON: reported below */ }
  if (!resp.ok) {
    const e = json && json.error;
    throw new ApiError(resp.status, e?.code ?? "http_error", e?.message ?? (text || resp.statusText));
  }
  return json;
}

/**
 * Joins `room`: POST /v1/rooms/{room}/sessions with the bearer token. `request` is the
 * join body (default `{"transport":"webtransport"}`). Resolves to the answer; rejects
 * with ApiError on a refusal.
 */
export function join({ baseUrl = location.origin, room, token, request = {} }) {
  const body = { transport: "webtransport", ...request };
  return api(baseUrl, "POST", `/v1/rooms/${encodeURIComponent(room)}/sessions`, token, body);
}

/** Leaves: DELETE /v1/sessions/{id}. */
export function leave({ baseUrl = location.origin, sessionId, token }) {
  return leaveWith({ baseUrl, sessionId, token });
}

function leaveWith({ baseUrl, sessionId, token, signal }) {
  return api(baseUrl, "DELETE", `/v1/sessions/${encodeURIComponent(sessionId)}`, token, undefined, signal);
}

/**
 * Leaves a rejoin's old session without anyone waiting for it: each try is given up
 * after LEAVE_TIMEOUT_MS (a relay that died may never answer). Resolves, after the first
 * try, to whether the relay took it; a try that failed is made again in the background,
 * LEAVE_RETRY_MS apart at first, then every second, for up to LEAVE_PERSIST_MS (the relay's
 * session_timeout), until a relay takes it or says the session is gone (404) or the token
 * may not (401, 403): a cluster node that was frozen or cut off still holds the session,
 * and its room's members would see the old stream refuse the new one's updates under the
 * same SSRC until the node timed it out.
 */
function leaveInBackground({ baseUrl, sessionId, token }) {
  const deadline = Date.now() + LEAVE_PERSIST_MS;
  const once = () =>
    leaveWith({ baseUrl, sessionId, token, signal: AbortSignal.timeout(LEAVE_TIMEOUT_MS) }).then(
      () => "left",
      (e) => (e instanceof ApiError && [401, 403, 404, 410].includes(e.status) ? "over" : "failed"),
    );
  const again = (wait) => {
    if (Date.now() + wait >= deadline) return;
    setTimeout(() => {
      once().then((outcome) => {
        if (outcome === "failed") again(Math.min(wait * 2, 1000));
      });
    }, wait);
  };
  return once().then((outcome) => {
    if (outcome === "failed") again(LEAVE_RETRY_MS);
    return outcome === "left";
  });
}

/** Replaces the session's interest: PUT /v1/sessions/{id}/interest. */
export function setInterest({ baseUrl = location.origin, sessionId, token, interest }) {
  return api(baseUrl, "PUT", `/v1/sessions/${encodeURIComponent(sessionId)}/interest`, token, interest);
}

/** Inspects a room (admin token): GET /v1/rooms/{room}. */
export function roomInfo({ baseUrl = location.origin, room, token }) {
  return api(baseUrl, "GET", `/v1/rooms/${encodeURIComponent(room)}`, token);
}

/** The claims of a token (unverified; for display only): `{room, sub, exp, ...}`. */
export function tokenClaims(token) {
  try {
    const part = String(token).split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part.padEnd(part.length + ((4 - (part.length % 4)) % 4), "=")));
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------
// Recordings, replays and broadcast-delayed mirrors (docs/api.md, "Recordings",
// "Replays", "Mirrors"; docs/recording.md)

/** The replay speeds the relay takes, from slowest to fastest (any value between works too). */
export const REPLAY_SPEEDS = Object.freeze([0.25, 0.5, 1, 2, 4, 8]);

/**
 * Checks a caller's argument before anything goes to the relay: a wrong type or a missing
 * field is a `TypeError` naming it, so that a mistake is not sent as a request and
 * reported back as the relay's less specific 4xx. Ranges (a speed of 9, a seek past the
 * end) are the relay's to refuse, with its own code.
 */
function check(ok, what) {
  if (!ok) throw new TypeError(what);
}

function checkName(value, what) {
  check(typeof value === "string" && value.length > 0, `${what}: a non-empty string is needed, got ${shown(value)}`);
}

function checkMs(value, what) {
  check(Number.isSafeInteger(value) && value >= 0, `${what}: a whole number of milliseconds ≥ 0 is needed, got ${shown(value)}`);
}

function checkSpeed(value) {
  check(typeof value === "number" && Number.isFinite(value), `speed: a finite number is needed, got ${shown(value)}`);
}

function checkBool(value, what) {
  check(typeof value === "boolean", `${what}: true or false is needed, got ${shown(value)}`);
}

function shown(v) {
  if (typeof v === "string") return JSON.stringify(v);
  if (v === null || v === undefined || typeof v !== "object") return String(v);
  return Array.isArray(v) ? "an array" : "an object";
}

const seg = (s) => encodeURIComponent(s);

/** `api` with the token checked first (an absent one would go out as `Bearer undefined`). */
function authed(baseUrl, method, path, token, body) {
  checkName(token, "token");
  return api(baseUrl, method, path, token, body);
}

/** Starts recording a room (admin token of the room): `POST /v1/rooms/{room}/recording`. */
export async function startRecording({ baseUrl = location.origin, room, token } = {}) {
  checkName(room, "room");
  return authed(baseUrl, "POST", `/v1/rooms/${seg(room)}/recording`, token);
}

/** The room's running recording: `GET /v1/rooms/{room}/recording` (404 `not_recording`). */
export async function recording({ baseUrl = location.origin, room, token } = {}) {
  checkName(room, "room");
  return authed(baseUrl, "GET", `/v1/rooms/${seg(room)}/recording`, token);
}

/** Stops the room's recording once its files are closed: `DELETE /v1/rooms/{room}/recording`. */
export async function stopRecording({ baseUrl = location.origin, room, token } = {}) {
  checkName(room, "room");
  return authed(baseUrl, "DELETE", `/v1/rooms/${seg(room)}/recording`, token);
}

/** Every recording of this relay, oldest first (relay-wide admin token): `GET /v1/recordings`. */
export async function listRecordings({ baseUrl = location.origin, token } = {}) {
  return (await authed(baseUrl, "GET", "/v1/recordings", token)).recordings;
}

/** One recording (admin token of its room): `GET /v1/recordings/{id}`. */
export async function getRecording({ baseUrl = location.origin, id, token } = {}) {
  checkName(id, "id");
  return authed(baseUrl, "GET", `/v1/recordings/${seg(id)}`, token);
}

/** Deletes a stopped recording: `DELETE /v1/recordings/{id}`. */
export async function deleteRecording({ baseUrl = location.origin, id, token } = {}) {
  checkName(id, "id");
  await authed(baseUrl, "DELETE", `/v1/recordings/${seg(id)}`, token);
}

/**
 * The address of a recording's pcapng export. A link to it does not download by itself:
 * the route wants the bearer token, which a link cannot send (`downloadRecording` does).
 */
export function recordingDownloadUrl({ baseUrl = location.origin, id } = {}) {
  checkName(id, "id");
  return new URL(`/v1/recordings/${seg(id)}/pcapng`, baseUrl).href;
}

/**
 * A recording as one pcapng file (`GET /v1/recordings/{id}/pcapng`), read whole into a
 * `Uint8Array`; rejects with `ApiError` when refused. The relay streams it without a
 * length, so a download cut short is a shorter file: check it with a pcapng reader
 * before trusting its end.
 */
export async function downloadRecording({ baseUrl = location.origin, id, token } = {}) {
  const url = recordingDownloadUrl({ baseUrl, id });
  checkName(token, "token");
  const resp = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
  if (!resp.ok) {
    const text = await resp.text();
    let e = null;
    try { e = JSON.parse(text).error; } catch { /* not JSON: the status text below */ }
    throw new ApiError(resp.status, e?.code ?? "http_error", e?.message ?? (text || resp.statusText));
  }
  return new Uint8Array(await resp.arrayBuffer());
}

/**
 * Plays a recording into a room of its own: `POST /v1/replays`. `fromMs` (default 0),
 * `speed` (1) and `paused` (false) are optional. Resolves to the replay's status.
 */
export async function startReplay({ baseUrl = location.origin, token, recording: id, room, fromMs, speed, paused } = {}) {
  checkName(id, "recording");
  checkName(room, "room");
  const body = { recording: id, room };
  if (fromMs !== undefined) { checkMs(fromMs, "fromMs"); body.from_ms = fromMs; }
  if (speed !== undefined) { checkSpeed(speed); body.speed = speed; }
  if (paused !== undefined) { checkBool(paused, "paused"); body.paused = paused; }
  return authed(baseUrl, "POST", "/v1/replays", token, body);
}

/** The replay playing into `room`: `GET /v1/replays/{room}` (404 `replay_not_found`). */
export async function replayStatus({ baseUrl = location.origin, room, token } = {}) {
  checkName(room, "room");
  return authed(baseUrl, "GET", `/v1/replays/${seg(room)}`, token);
}

/** Every replay of this relay (relay-wide admin token): `GET /v1/replays`. */
export async function listReplays({ baseUrl = location.origin, token } = {}) {
  return (await authed(baseUrl, "GET", "/v1/replays", token)).replays;
}

/**
 * Seeks, changes speed, pauses or resumes a replay, at least one of them, applied in that
 * order by the relay: `PATCH /v1/replays/{room}`. Resolves to its status after them.
 */
export async function controlReplay({ baseUrl = location.origin, room, token, seekMs, speed, paused } = {}) {
  checkName(room, "room");
  const body = {};
  if (seekMs !== undefined) { checkMs(seekMs, "seekMs"); body.seek_ms = seekMs; }
  if (speed !== undefined) { checkSpeed(speed); body.speed = speed; }
  if (paused !== undefined) { checkBool(paused, "paused"); body.paused = paused; }
  check(Object.keys(body).length > 0, "controlReplay: name seekMs, speed or paused");
  return authed(baseUrl, "PATCH", `/v1/replays/${seg(room)}`, token, body);
}

/** Moves a replay to `positionMs` (the room gets the whole state there). */
export function seekReplay({ positionMs, ...target } = {}) {
  return controlReplay({ ...target, seekMs: positionMs });
}

/** Sets a replay's speed (0.25 to 8). */
export function setReplaySpeed({ speed, ...target } = {}) {
  return controlReplay({ ...target, speed });
}

/** Pauses a replay. */
export function pauseReplay(target = {}) {
  return controlReplay({ ...target, paused: true });
}

/** Resumes a paused replay. */
export function resumeReplay(target = {}) {
  return controlReplay({ ...target, paused: false });
}

/** Stops a replay; its room ends with it, or its viewers see its streams end: `DELETE /v1/replays/{room}`. */
export async function stopReplay({ baseUrl = location.origin, room, token } = {}) {
  checkName(room, "room");
  await authed(baseUrl, "DELETE", `/v1/replays/${seg(room)}`, token);
}

/**
 * Where a replay is `elapsedMs` after `replay` (a status, or a join answer's or room
 * info's `replay`) was read, assuming nobody changed it since: its position moved on at
 * its speed unless paused or ended, and never past its duration. What a viewer without
 * the admin right, which cannot ask the relay again, shows.
 */
export function replayPosition(replay, elapsedMs) {
  check(replay !== null && typeof replay === "object" && Number.isFinite(replay.position_ms)
    && Number.isFinite(replay.speed), `replayPosition: a replay status is needed, got ${shown(replay)}`);
  check(Number.isFinite(elapsedMs), `elapsedMs: a finite number is needed, got ${shown(elapsedMs)}`);
  const moving = !replay.paused && !replay.ended;
  const at = replay.position_ms + (moving ? Math.max(0, elapsedMs) * replay.speed : 0);
  return Number.isFinite(replay.duration_ms) ? Math.min(at, replay.duration_ms) : at;
}

/**
 * Mirrors `room` into the room `mirror`, `delayMs` (1000 to 600000) late, for spectators:
 * `PUT /v1/rooms/{room}/mirror`. Resolves to `{room, mirror, delay_ms, started_at}`.
 */
export async function startMirror({ baseUrl = location.origin, room, token, mirror: into, delayMs } = {}) {
  checkName(room, "room");
  checkName(into, "mirror");
  checkMs(delayMs, "delayMs");
  return authed(baseUrl, "PUT", `/v1/rooms/${seg(room)}/mirror`, token, { room: into, delay_ms: delayMs });
}

/** The room's mirror: `GET /v1/rooms/{room}/mirror` (404 `no_mirror`). */
export async function mirror({ baseUrl = location.origin, room, token } = {}) {
  checkName(room, "room");
  return authed(baseUrl, "GET", `/v1/rooms/${seg(room)}/mirror`, token);
}

/** Stops the room's mirror; its spectators see its streams end: `DELETE /v1/rooms/{room}/mirror`. */
export async function stopMirror({ baseUrl = location.origin, room, token } = {}) {
  checkName(room, "room");
  await authed(baseUrl, "DELETE", `/v1/rooms/${seg(room)}/mirror`, token);
}

// ---------------------------------------------------------------------------------------
// Transports

/** Whether this browser has WebTransport. */
export function hasWebTransport() {
  return typeof globalThis.WebTransport === "function";
}

/**
 * A live session over WebTransport, from a join answer's `webtransport` field
 * `{url, cert_sha256, flow_id, session_token}`. The handshake is the QUIC transport's:
 * a bidirectional stream carrying the session token and a newline, answered by one status
 * line (`ok ...`, else the reason). Datagrams, both ways, are RoQ: flow id + one RTP or
 * RTCP packet; unidirectional streams from the relay (snapshots) are flow id then
 * (length, packet)*. Every packet goes to `onpacket(packet)`.
 */
export class WebTransportConnection {
  static async open(answer, { onpacket, WebTransportImpl = globalThis.WebTransport } = {}) {
    const info = answer && answer.webtransport;
    if (!info || !info.url || !info.session_token || info.flow_id === undefined) {
      throw new TypeError("the join answer has no webtransport {url, flow_id, session_token}");
    }
    const options = {};
    if (info.cert_sha256) {
      options.serverCertificateHashes = [{ algorithm: "sha-256", value: fromHex(info.cert_sha256) }];
    }
    const wt = new WebTransportImpl(info.url, options);
    await wt.ready;
    const c = new WebTransportConnection(wt, info.flow_id, onpacket);
    try {
      c.status = await handshake(wt, info.session_token);
    } catch (e) {
      wt.close();
      throw e;
    }
    c.readDatagrams();
    c.readStreams();
    return c;
  }

  constructor(wt, flowId, onpacket) {
    this.wt = wt;
    this.flowId = flowId;
    this.onpacket = onpacket ?? (() => {});
    this.writer = wt.datagrams.writable.getWriter();
    this.dropped = { flow: 0, framing: 0, oversize: 0 };
    this.closed = wt.closed;
  }

  /** The largest RTP/RTCP packet a datagram can carry on this path. */
  get maxPacketSize() {
    return (this.wt.datagrams.maxDatagramSize ?? 1200) - encodeQuicVarint(this.flowId).length;
  }

  /** Sends one RTP or RTCP packet as a datagram; false (and counted) if it cannot fit. */
  async send(packet) {
    if (packet.length > this.maxPacketSize) { this.dropped.oversize++; return false; }
    await this.writer.write(frameDatagram(this.flowId, packet));
    return true;
  }

  async readDatagrams() {
    const reader = this.wt.datagrams.readable.getReader();
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ done: true }));
      if (done) return;
      const d = parseDatagram(value);
      if (!d.ok) { this.dropped.framing++; continue; }
      if (d.flowId !== this.flowId) { this.dropped.flow++; continue; }
      this.onpacket(d.packet);
    }
  }

  async readStreams() {
    const streams = this.wt.incomingUnidirectionalStreams.getReader();
    for (;;) {
      const { value, done } = await streams.read().catch(() => ({ done: true }));
      if (done) return;
      this.readStream(value);
    }
  }

  async readStream(stream) {
    const reader = stream.getReader();
    const roq = new RoqStreamReader();
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ done: true }));
      if (done) return;
      for (const p of roq.push(value)) if (roq.flowId === this.flowId) this.onpacket(p);
      if (roq.error || (roq.flowId !== undefined && roq.flowId !== this.flowId)) {
        this.dropped[roq.error ? "framing" : "flow"]++;
        reader.cancel().catch(() => {});
        return;
      }
    }
  }

  close() {
    this.wt.close();
  }
}

async function handshake(wt, token) {
  const bidi = await wt.createBidirectionalStream();
  const w = bidi.writable.getWriter();
  await w.write(utf8enc.encode(`${token}\n`));
  await w.close();
  const reader = bidi.readable.getReader();
  let line = "";
  const dec = new TextDecoder();
  while (!line.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    line += dec.decode(value, { stream: true });
    if (line.length > 1024) break;
  }
  reader.cancel().catch(() => {});
  const status = line.split("\n")[0].trim();
  if (!/^ok\b/i.test(status)) throw new Error(`session refused: ${status || "no status line"}`);
  return status;
}

/** The label of the data channel the relay expects (docs/transports.md, "WebRTC data channels"). */
export const WEBRTC_CHANNEL = "gsrelay";

/**
 * A live session over a WebRTC data channel. The signalling is the join itself, in the
 * style of WHIP: `open(joinWith)` makes the offer (one data channel, unordered,
 * `maxRetransmits: 0`), calls `joinWith(sdpOffer)`, which must join with
 * `{"transport":"webrtc","sdp_offer":...}` and resolve to the join answer, applies the
 * answer's `webrtc.sdp_answer` and waits for the channel to open. The relay is ICE-lite
 * with one host candidate: the browser's candidates need not be gathered first. Each
 * message, both ways, is one RTP or RTCP packet (DTLS protects it). The join answer is
 * `answer` on the connection, set as soon as the join returns (so a caller can leave the
 * session when opening then fails).
 */
export class WebRtcConnection {
  static async open(joinWith, { onpacket, RTCPeerConnectionImpl = globalThis.RTCPeerConnection,
    timeoutMs = 10000, onanswer } = {}) {
    if (typeof RTCPeerConnectionImpl !== "function") throw new TypeError("this browser has no RTCPeerConnection");
    const pc = new RTCPeerConnectionImpl();
    const dc = pc.createDataChannel(WEBRTC_CHANNEL, { ordered: false, maxRetransmits: 0 });
    const c = new WebRtcConnection(pc, dc, onpacket);
    try {
      await pc.setLocalDescription(await pc.createOffer());
      c.answer = await joinWith(pc.localDescription.sdp);
      onanswer?.(c.answer);
      const info = c.answer && c.answer.webrtc;
      if (!info || !info.sdp_answer) throw new TypeError("the join answer has no webrtc {sdp_answer}");
      c.maxPacketSize = info.max_message_size ?? c.maxPacketSize;
      await pc.setRemoteDescription({ type: "answer", sdp: info.sdp_answer });
      await c.opened(timeoutMs);
    } catch (e) {
      c.close();
      throw e;
    }
    return c;
  }

  constructor(pc, dc, onpacket) {
    this.pc = pc;
    this.dc = dc;
    this.answer = null;
    this.onpacket = onpacket ?? (() => {});
    /** Largest packet the relay accepts (its answer says; 1200 until then). */
    this.maxPacketSize = 1200;
    /** Bytes waiting in the channel beyond which `send` drops rather than queues. */
    this.maxBuffered = 256 * 1024;
    this.dropped = { oversize: 0, closed: 0, buffered: 0 };
    dc.binaryType = "arraybuffer";
    dc.onmessage = (e) => {
      if (e.data instanceof ArrayBuffer) this.onpacket(new Uint8Array(e.data));
    };
    this.closed = new Promise((resolve) => {
      dc.addEventListener("close", () => resolve());
      pc.addEventListener("connectionstatechange", () => {
        if (pc.connectionState === "failed" || pc.connectionState === "closed") resolve();
      });
    });
  }

  /** Resolves once the channel is open; rejects if the connection fails or `ms` pass. */
  opened(ms) {
    if (this.dc.readyState === "open") return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`WebRTC channel not open after ${ms} ms`)), ms);
      this.dc.addEventListener("open", () => { clearTimeout(timer); resolve(); });
      this.closed.then(() => { clearTimeout(timer); reject(new Error("WebRTC connection closed while opening")); });
    });
  }

  /** Sends one RTP or RTCP packet as one message; false (and counted) if it cannot go. */
  async send(packet) {
    if (this.dc.readyState !== "open") { this.dropped.closed++; return false; }
    if (packet.length > this.maxPacketSize) { this.dropped.oversize++; return false; }
    if (this.dc.bufferedAmount > this.maxBuffered) { this.dropped.buffered++; return false; }
    this.dc.send(packet);
    return true;
  }

  close() {
    this.dc.close();
    this.pc.close();
  }
}

/**
 * How often a session sends a receiver report (RFC 3550's minimum interval): it is how the
 * relay knows a session that publishes nothing is still there (`session_timeout`).
 */
export const REPORT_INTERVAL_MS = 5000;

/**
 * Silence from the relay after which a session takes it for gone (its node died, or it
 * restarted and forgot the session) and rejoins, unless the app sets its own or the
 * relay's reports come further apart (`SILENCE_REPORT_GAPS`). A live relay is never quiet
 * for long: besides the room's RTP it sends every session an RTCP report at least every
 * 6.2 s (`rtcp_min_interval`, 5 s, randomised over [0.5, 1.5] and divided by e − 3/2), so
 * 15 s is more than two of the longest gaps: one lost report is no reason to rejoin.
 */
export const SILENCE_MS = 15000;

/**
 * Without a silence set by the app, it must also last this many of the longer of the last
 * two gaps between the relay's reports: RFC 3550 spaces the reports of a quiet room with
 * many streams further apart, and a gap can be three times the one before it.
 */
export const SILENCE_REPORT_GAPS = 3;

/** Report packets closer together than this are one report split over several packets. */
const REPORT_BURST_MS = 50;

/** How often a session looks at its liveness. */
const WATCHDOG_TICK_MS = 250;

/** First wait before trying a failed rejoin again; it doubles with each failure, to the next. */
const REJOIN_RETRY_MS = 250;
const REJOIN_RETRY_MAX_MS = 8000;

/**
 * How long the old session's leave, which a rejoin sends without waiting for it, may take
 * before it is given up (its relay may have died with the connection open).
 */
const LEAVE_TIMEOUT_MS = 2000;
/** How long a rejoin's old session's leave is tried again (the relay's session_timeout). */
const LEAVE_PERSIST_MS = 60000;
/** The first wait before a failed leave of a rejoin's old session is tried again. */
const LEAVE_RETRY_MS = 500;

/**
 * How long a resume's join request may go unanswered before another is sent beside it,
 * through the same base URL (the Rust client's `RESUME_HEDGE`). A relay answers a join in
 * milliseconds, and in a cluster within its link's idle timeout (0.6 s) when the
 * session's old node died; a request that takes longer most likely reached a node that
 * accepts connections and answers nothing (a frozen process), and behind a Service the
 * next one reaches another node.
 */
export const RESUME_HEDGE_MS = 400;

/** The most resume requests in flight at once (`RESUME_HEDGE_MS`). */
export const RESUME_ATTEMPTS = 4;

/** How long one resume request may take before it is given up (the Rust client's `HTTP_TIMEOUT`). */
const RESUME_REQUEST_TIMEOUT_MS = 10000;

/**
 * Joins with a resume credential (`request.resume`), hedged: another request goes beside
 * those under way each time none has been answered for RESUME_HEDGE_MS, and at once when
 * one could not reach a relay, up to RESUME_ATTEMPTS in all, each given up after
 * RESUME_REQUEST_TIMEOUT_MS. Resolves to the first answer. A relay's refusal (ApiError)
 * is the answer: it rejects with it and aborts the others. It rejects with the last error
 * when every attempt failed. The requests still under way once one answered go on (to
 * their timeout): a session one of them opened after all, other than the answer's, is
 * left in the background, since it would hold the SSRC. Only the request is hedged, never
 * the transport set-up.
 */
function joinHedged({ baseUrl, room, token, request }) {
  const body = { transport: "webtransport", ...request };
  const path = `/v1/rooms/${encodeURIComponent(room)}/sessions`;
  return new Promise((resolve, reject) => {
    const pending = new Set();
    let started = 0;
    /** The answer that won, once one did. */
    let won = null;
    let over = false;
    let hedge = null;
    let lastError = null;
    let refusal = null;
    const fail = (e) => {
      over = true;
      clearTimeout(hedge);
      for (const c of pending) c.abort(e);
      reject(e);
    };
    // A refusal with requests still under way: one of them may yet succeed (the refusal
    // may be of the SSRC it just took back), for a hedge's length; then the refusal is the
    // answer, and a request that succeeds after all is left in the background.
    const giveUp = () => {
      if (over) return;
      over = true;
      reject(refusal);
    };
    const start = () => {
      clearTimeout(hedge);
      if (over || started >= RESUME_ATTEMPTS) return;
      started++;
      const controller = new AbortController();
      pending.add(controller);
      const timeout = setTimeout(() => controller.abort(new DOMException("resume request timed out", "TimeoutError")),
        RESUME_REQUEST_TIMEOUT_MS);
      api(baseUrl, "POST", path, token, body, controller.signal).then((a) => {
        if (!over) {
          over = true;
          won = a;
          clearTimeout(hedge);
          resolve(a);
        } else if (a?.session_id && a.session_id !== won?.session_id) {
          // Another node took the same resume: its session would hold the SSRC.
          leaveInBackground({ baseUrl, sessionId: a.session_id, token });
        }
      }, (e) => {
        if (over) return;
        if (e instanceof ApiError) {
          refusal = e;
          started = RESUME_ATTEMPTS;
          clearTimeout(hedge);
          if (pending.size <= 1) fail(e);
          else setTimeout(giveUp, RESUME_HEDGE_MS);
        } else {
          // It reached no relay (refused, reset, timed out): another at once.
          lastError = e;
          start();
        }
      }).finally(() => {
        clearTimeout(timeout);
        pending.delete(controller);
        if (!over && pending.size === 0) fail(refusal ?? lastError);
      });
      if (started < RESUME_ATTEMPTS) hedge = setTimeout(start, RESUME_HEDGE_MS);
    };
    start();
  });
}

/** Whether a packet is one of the relay's periodic reports (a compound starting with SR or RR). */
/** Whether an RTCP packet holds a BYE naming `ssrc`. */
function byeFrom(packet, ssrc) {
  const r = parseRtcp(packet);
  return r.ok && r.items.some((i) => i.type === "bye" && i.ssrcs.includes(ssrc >>> 0));
}

function isReport(packet) {
  return isRtcp(packet) && (packet[1] === RTCP.SR || packet[1] === RTCP.RR);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * What a session heard of the relay, to tell when it is gone: silent for `thresholdMs`,
 * or its transport closed. `silenceMs` is the app's threshold, used
 * as it is (null: `SILENCE_MS`, or `SILENCE_REPORT_GAPS` times the longer of the last two
 * report gaps when that is longer). `now` is the clock (ms).
 */
export class Liveness {
  constructor({ silenceMs = null, now = () => performance.now() } = {}) {
    this.silenceMs = silenceMs;
    this.now = now;
    /** The latest packet from the relay, or the join. */
    this.heardMs = now();
    this.reportMs = null;
    this.gaps = [0, 0];
    /** The transport closed. */
    this.failed = false;
  }

  /** A packet came from the relay; `report` if it was one of its periodic reports. */
  heard(report = false) {
    const t = this.now();
    this.heardMs = t;
    if (!report) return;
    if (this.reportMs !== null && t - this.reportMs < REPORT_BURST_MS) return;
    if (this.reportMs !== null) this.gaps = [this.gaps[1], t - this.reportMs];
    this.reportMs = t;
  }

  /**
   * The transport closed: the relay is gone whatever the silence, for good (a packet read
   * after the close was sent before it).
   */
  fail() {
    this.failed = true;
  }

  /** The silence after which the relay counts as gone (ms). */
  get thresholdMs() {
    if (this.silenceMs !== null && this.silenceMs !== undefined) return this.silenceMs;
    return Math.max(SILENCE_MS, SILENCE_REPORT_GAPS * Math.max(...this.gaps));
  }

  /** Milliseconds since the relay was last heard. */
  silentMs() {
    return this.now() - this.heardMs;
  }

  /** Whether the relay counts as gone now. */
  isSilent() {
    return this.failed || this.silentMs() >= this.thresholdMs;
  }
}

/** The wait before rejoin attempt `n + 1` after `n` failed: doubling, bounded, randomised. */
export function rejoinDelayMs(failures, random = Math.random) {
  const base = Math.min(REJOIN_RETRY_MAX_MS, REJOIN_RETRY_MS * 2 ** Math.min(failures - 1, 5));
  return base * (0.5 + random());
}

/**
 * A session: join, connect, room state, publish, snapshot request, leave; and a watchdog
 * that rejoins when the relay goes silent. `roomState` lets the caller supply the
 * RoomState to fill (it must speak `dialect`). `silenceMs` sets the silence after which
 * the relay counts as gone (default: automatic, see `SILENCE_MS`); with `autoRejoin:
 * false` the app watches `isSilent()` and calls `rejoin()` itself.
 *
 *   const s = await Session.connect({baseUrl, room, token});
 *   s.room.onchange = (room) => render(room);
 *   s.onrejoin = ({reason, silentMs}) => console.log("back", reason, silentMs);
 *   await s.publish([{type: "Head1", id: 1, time: time1(), location, rotation}]);
 *   await s.close();
 */
export class Session {
  static async connect({ baseUrl = location.origin, room, token, dialect = "draft01", interest,
    roomState, transport = hasWebTransport() ? "webtransport" : "webrtc", silenceMs = null,
    autoRejoin = true, roomStream = false } = {}) {
    const request = { transport, dialect };
    if (interest) request.interest = interest;
    if (roomStream) request.room_stream = true;
    const startedMs = performance.now();
    const s = new Session({ baseUrl, token, answer: null, dialect, startedMs, roomState, roomName: room,
      request, silenceMs });
    await s.open(request, (a) => { s.answer = a; });
    await s.requestSnapshot();
    s.reports = setInterval(() => s.conn.send(buildRr(s.answer.ssrc)).catch(() => {}), REPORT_INTERVAL_MS);
    if (autoRejoin) s.watchdog = setInterval(() => s.check(), WATCHDOG_TICK_MS);
    return s;
  }

  constructor({ baseUrl, token, answer, dialect, startedMs, roomState, roomName, request, silenceMs = null }) {
    this.baseUrl = baseUrl;
    this.token = token;
    this.answer = answer;
    this.room = roomState ?? new RoomState({ dialect });
    this.roomName = roomName;
    this.request = request ?? { transport: "webtransport", dialect };
    this.startedMs = startedMs;
    this.firstStateMs = null;
    /** When the latest join answer came (`performance.now()` ms), else null. */
    this.answeredMs = null;
    this.seq = Math.floor(Math.random() * 65536);
    this.roomSeq = Math.floor(Math.random() * 65536);
    this.firSeq = 0;
    /** Objects it holds (`"ssrc:objectId"`), as the relay's notices said. */
    this.held = new Set();
    /** Called with each ownership notice: `{kind: "granted"|"lost"|"refused", ssrc, object, reason}`. */
    this.onownership = null;
    this.conn = null;
    this.reports = null;
    this.watchdog = null;
    this.liveness = new Liveness({ silenceMs });
    /** Rejoins done. */
    this.rejoins = 0;
    /** Called after each rejoin with `{reason, previousSessionId, sessionId, ssrc, silentMs, attempts}`. */
    this.onrejoin = null;
    /** Called with the error of each failed rejoin attempt (it is tried again). */
    this.onrejoinerror = null;
    /**
     * Whether the relay ended the session (an RTCP BYE from its own SSRC: the room was
     * closed, or this identity removed, by the backend); such a session is not rejoined.
     */
    this.endedByRelay = false;
    /** Called once when the relay ends the session. */
    this.onended = null;
    this.generation = 0;
    this.rejoining = null;
    this.closing = false;
  }

  /**
   * Joins with `request` and connects; resolves once the transport is up, with `answer`
   * and `conn` set. `onanswer(answer)` is called as soon as the join answers. On failure
   * the session it joined is left.
   */
  async open(request, onanswer = () => {}) {
    const { baseUrl, token } = this;
    const room = this.roomName;
    const gen = ++this.generation;
    // Packets and closings of an older connection say nothing about this one.
    const onpacket = (p) => { if (gen === this.generation) this.onPacket(p); };
    let answer = null;
    let conn;
    // Stamped as the answer comes, not once the transport is up: what the answer says
    // (a replay's position) was true then.
    const answered = (a) => { this.answeredMs = performance.now(); onanswer(a); };
    try {
      // A resume's request is hedged (a frozen node may hold it unanswered); the transport
      // set-up that follows is not.
      const post = request.resume === undefined ? join : joinHedged;
      if (request.transport === "webrtc") {
        const joinWith = (sdp) => post({ baseUrl, room, token, request: { ...request, sdp_offer: sdp } });
        conn = await WebRtcConnection.open(joinWith, { onpacket, onanswer: (a) => { answer = a; answered(a); } });
      } else {
        answer = await post({ baseUrl, room, token, request });
        answered(answer);
        conn = await WebTransportConnection.open(answer, { onpacket });
      }
    } catch (e) {
      if (answer) await leave({ baseUrl, sessionId: answer.session_id, token }).catch(() => {});
      throw e;
    }
    this.answer = answer;
    this.conn = conn;
    this.liveness = new Liveness({ silenceMs: this.liveness.silenceMs });
    const lost = () => { if (gen === this.generation) this.liveness.fail(); };
    Promise.resolve(conn.closed).then(lost, lost);
  }

  onPacket(p) {
    this.liveness.heard(isReport(p));
    if (!this.endedByRelay && isRtcp(p) && this.answer && byeFrom(p, this.answer.relay_ssrc)) {
      this.endedByRelay = true;
      this.onended?.({ reason: "ended_by_relay" });
    }
    if (isRtcp(p)) this.noteOwnership(p);
    if (this.room.ingest(p) === "rtp" && this.firstStateMs === null) {
      this.firstStateMs = performance.now() - this.startedMs;
    }
  }

  /** When the relay was last heard (`performance.now()` time, ms): its latest packet, or the join. */
  get lastHeardMs() {
    return this.liveness.heardMs;
  }

  /** Whether the relay seems gone: silent for `liveness.thresholdMs`, or the transport closed. */
  isSilent() {
    return this.liveness.isSilent();
  }

  /** The watchdog's tick: rejoins when the relay is silent. */
  check() {
    if (this.closing || this.rejoining || this.endedByRelay || !this.liveness.isSilent()) return;
    this.rejoin(this.liveness.failed ? "closed" : "silence").catch(() => {});
  }

  /**
   * Rejoins through the same base URL, with the same room, token, request and SSRC:
   * first by resuming the session with the last answer's `resume` credential (the same
   * session where the relay still holds it, its SSRC where it restarted; docs/api.md,
   * "Resume"; its request hedged, another beside it each RESUME_HEDGE_MS it goes
   * unanswered, as a frozen node would leave it); when the relay refuses that (`resume_*`), by joining again at once while
   * the old session is left in the background (never waited for, given up after 2 s; a
   * relay that still holds it may give another SSRC, which the session takes). Connects (trying again after 0.25 s, doubling
   * to 8 s, until it succeeds or the session is closed), starts the room state afresh,
   * asks for the whole room (FIR) and calls `onrejoin` (`resumed` says which way it came
   * back). Resolves to true once rejoined (false if closed meanwhile); a rejoin under way
   * is shared.
   */
  rejoin(reason = "asked") {
    this.rejoining ??= this.rejoinNow(reason).finally(() => { this.rejoining = null; });
    return this.rejoining;
  }

  async rejoinNow(reason) {
    const previous = this.answer;
    const silentMs = this.liveness.silentMs();
    const { baseUrl, token } = this;
    this.generation++;
    try { this.conn?.close(); } catch { /* already closed */ }
    const plain = { ...this.request, ssrc: previous.ssrc };
    let resume = previous.resume ?? null;
    let attempts = 0;
    for (;;) {
      if (this.closing) return false;
      if (resume === null && attempts === 0) {
        // No session to take back: leave it, so that a relay that still holds it frees its
        // SSRC, but never wait for that (a relay that died does not answer; a restarted one
        // answers 404 or 403). The join goes at once, asking for the old SSRC: a relay that
        // has not had the leave yet gives another, which the session takes.
        leaveInBackground({ baseUrl, sessionId: previous.session_id, token });
      }
      attempts++;
      try {
        await this.open(resume === null ? plain : { ...plain, resume });
        break;
      } catch (e) {
        this.onrejoinerror?.(e);
        if (resume !== null && typeof e.code === "string" && e.code.startsWith("resume_")) {
          // The relay will not resume it: join afresh, at once.
          resume = null;
          attempts = 0;
          continue;
        }
        await sleep(rejoinDelayMs(attempts));
      }
    }
    if (this.closing) {
      await this.close();
      return false;
    }
    this.rejoins++;
    this.room.clear();
    await this.requestSnapshot().catch(() => {});
    this.onrejoin?.({ reason, previousSessionId: previous.session_id, sessionId: this.answer.session_id,
      ssrc: this.answer.ssrc, silentMs, attempts, resumed: resume !== null });
    return true;
  }

  /** Asks the relay for the full state of `media` (default: every stream, via relay_ssrc). */
  requestSnapshot(media = this.answer.relay_ssrc) {
    this.firSeq = (this.firSeq + 1) & 0xff;
    return this.conn.send(buildFir(this.answer.ssrc, media, this.firSeq));
  }

  /** Publishes objects as one RTP packet of this session's stream. */
  publish(objects, { payloadType = 96 } = {}) {
    this.seq = (this.seq + 1) & 0xffff;
    const payload = encode(objects, this.room.dialect);
    const timestamp = Math.floor(performance.now() * 90) >>> 0;
    return this.conn.send(buildRtp({ payloadType, sequenceNumber: this.seq, timestamp,
      ssrc: this.answer.ssrc, payload }));
  }

  /** Its room stream's SSRC (connected with `roomStream: true`), else null. */
  get roomSsrc() {
    return this.answer?.room_ssrc ?? null;
  }

  /**
   * The replay the room plays, as the latest join answer told it (`{recording,
   * position_ms, duration_ms, speed, paused, ended}`), else null: a snapshot taken when
   * the session joined (or rejoined), which `replayPosition` moves on.
   */
  get replay() {
    return this.answer?.replay ?? null;
  }

  /** The room this one mirrors and how late (`{source, delay_ms}`), else null. */
  get delayed() {
    return this.answer?.delayed ?? null;
  }

  /**
   * Publishes objects as one RTP packet of its room stream: they belong to the room and
   * stay after the session ends (docs/relay.md, "Room objects and ownership").
   */
  publishRoom(objects, { payloadType = 96 } = {}) {
    const ssrc = this.roomSsrc;
    if (ssrc === null) throw new Error("no room stream: connect with roomStream: true");
    this.roomSeq = (this.roomSeq + 1) & 0xffff;
    const payload = encode(objects, this.room.dialect);
    const timestamp = Math.floor(performance.now() * 90) >>> 0;
    return this.conn.send(buildRtp({ payloadType, sequenceNumber: this.roomSeq, timestamp, ssrc, payload }));
  }

  /**
   * Asks the relay for objects, each `[ssrc, objectId]`; the answers come to `onownership`.
   * Once granted, the session updates an object by publishing its objectId as usual.
   */
  requestObjects(objects) {
    return this.sendOwnership("request", objects);
  }

  /** Gives objects it holds back to their streams' publishers. */
  releaseObjects(objects) {
    for (const [ssrc, object] of objects) this.held.delete(`${ssrc}:${object}`);
    return this.sendOwnership("release", objects);
  }

  async sendOwnership(kind, objects) {
    for (let i = 0; i < objects.length; i += OWNERSHIP.maxEntries) {
      await this.conn.send(buildOwnership(kind, this.answer.ssrc, objects.slice(i, i + OWNERSHIP.maxEntries)));
    }
  }

  /** Whether it holds object `objectId` of stream `ssrc`, as the relay's last notice said. */
  holds(ssrc, objectId) {
    return this.held.has(`${ssrc}:${objectId}`);
  }

  noteOwnership(p) {
    const r = parseRtcp(p);
    if (!r.ok) return;
    for (const item of r.items) {
      if (item.type !== "ownership" || item.sender !== this.answer?.relay_ssrc) continue;
      for (const e of item.entries) {
        const key = `${e.ssrc}:${e.object}`;
        if (item.kind === "granted") this.held.add(key);
        if (item.kind === "lost") this.held.delete(key);
        this.onownership?.({ kind: item.kind, ssrc: e.ssrc, object: e.object, reason: e.reason });
      }
    }
  }

  /** Closes the transport and leaves the room; a rejoin under way stops. */
  async close() {
    this.closing = true;
    this.generation++;
    clearInterval(this.reports);
    clearInterval(this.watchdog);
    try { this.conn?.close(); } finally {
      await leave({ baseUrl: this.baseUrl, sessionId: this.answer.session_id, token: this.token })
        .catch(() => {});
    }
  }
}

// ---------------------------------------------------------------------------------------
// Presence (docs/api.md, "Presence")

/**
 * Reads server-sent events from text as it arrives: `push(text)` returns the events it
 * completed, `{event, data}` (`event` defaults to "message"; data lines joined by "\n");
 * comments (keep-alives) are skipped.
 */
class SseReader {
  constructor() {
    this.buf = "";
    this.event = "";
    this.data = [];
  }

  push(text) {
    this.buf += text;
    const out = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      // A "\r" at the end may be the first half of "\r\n": wait for the next chunk.
      if (!m || (m[0] === "\r" && m.index === this.buf.length - 1)) return out;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      if (line === "") {
        if (this.data.length) out.push({ event: this.event || "message", data: this.data.join("\n") });
        this.event = "";
        this.data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.event = value;
      else if (field === "data") this.data.push(value);
    }
  }
}

/** Why a presence watch ended for good: these, or "closed" (by `close()`) or "refused". */
const PRESENCE_ENDINGS = new Set(["room_closed", "relay_stopping"]);

/**
 * Who is in a room, kept up to date from `GET /v1/rooms/{room}/presence` (a server-sent
 * event stream, read with `fetch` since EventSource cannot send the bearer token; a
 * subscribe or admin token of the room). Made by `watchPresence`. `participants` maps
 * each identity to `{identity, metadata, ssrcs, muted}`; `metadata` is the room's.
 *
 * The stream opens with the whole room (`onsnapshot`), then each change: `onjoin`,
 * `onupdate` (metadata, mute, a second session), `onleave`, `onroom` (the room's
 * metadata); `onchange` after any of them. A stream that drops is opened again after
 * 0.25 s, doubling to 8 s (`onerror` is told each failure), and its snapshot replaces
 * the state. It ends for good, told to `onend({reason, error})`, when the room closes
 * (`room_closed`), the relay stops (`relay_stopping`), the token is refused (`refused`,
 * with the ApiError) or `close()` is called (`closed`).
 */
export class Presence {
  constructor({ baseUrl, room, token, fetchImpl }) {
    this.baseUrl = baseUrl;
    this.roomName = room;
    this.token = token;
    this.fetchImpl = fetchImpl;
    /** Participants by identity. */
    this.participants = new Map();
    /** The room's metadata (null when none was set). */
    this.metadata = null;
    /** Whether a stream is open and its snapshot read. */
    this.connected = false;
    /** Streams opened again after one dropped. */
    this.reconnects = 0;
    /** Why watching ended (`room_closed`, `relay_stopping`, `refused`, `closed`), or null. */
    this.ended = null;
    this.onsnapshot = null;
    this.onjoin = null;
    this.onupdate = null;
    this.onleave = null;
    this.onroom = null;
    this.onchange = null;
    this.onerror = null;
    this.onend = null;
    this.bySsrc = new Map();
    this.abort = null;
    this.reader = null;
    this.wake = null;
    /** Resolves to `{reason, error}` once watching has ended. */
    this.done = new Promise((resolve) => { this.resolveDone = resolve; });
  }

  /** The identity whose session owns `ssrc` (its stream), or null. */
  identityOf(ssrc) {
    return this.bySsrc.get(ssrc >>> 0) ?? null;
  }

  /** Stops watching; `onend` is told `closed` (unless it had ended already). */
  close() {
    this.finish("closed");
  }

  finish(reason, error = null) {
    if (this.ended) return;
    this.ended = reason;
    this.connected = false;
    this.abort?.abort();
    this.reader?.cancel().catch(() => {});
    this.wake?.();
    this.emit("onend", { reason, error });
    this.resolveDone({ reason, error });
  }

  /**
   * Calls handler `name` with `arg`. A handler that throws is reported as an uncaught
   * error (as an event listener's is) and stops neither the event's other effects nor
   * the watch.
   */
  emit(name, arg) {
    const f = this[name];
    if (typeof f !== "function") return;
    try {
      f.call(this, arg);
    } catch (e) {
      queueMicrotask(() => { throw e; });
    }
  }

  async run() {
    let failures = 0;
    while (!this.ended) {
      let error = null;
      try {
        await this.stream(() => { failures = 0; });
      } catch (e) {
        error = e;
      }
      if (this.ended) return;
      this.connected = false;
      if (error instanceof ApiError && [400, 401, 403].includes(error.status)) {
        this.finish("refused", error);
        return;
      }
      failures++;
      this.emit("onerror", error ?? new Error("the presence stream ended"));
      await new Promise((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, rejoinDelayMs(failures));
      });
      this.wake = null;
      if (!this.ended) this.reconnects++;
    }
  }

  /** One stream, to its end; `opened()` once its snapshot is applied. */
  async stream(opened) {
    this.abort = new AbortController();
    const url = new URL(`/v1/rooms/${encodeURIComponent(this.roomName)}/presence`, this.baseUrl).href;
    const fetchImpl = this.fetchImpl;
    const resp = await fetchImpl(url, {
      headers: { Authorization: `Bearer ${this.token}`, Accept: "text/event-stream" },
      cache: "no-store",
      signal: this.abort.signal,
    });
    if (!resp.ok) {
      const text = await resp.text().catch(() => "");
      let e = null;
      try { e = JSON.parse(text).error; } catch { /* not the relay's JSON */ }
      throw new ApiError(resp.status, e?.code ?? "http_error", e?.message ?? (text || resp.statusText));
    }
    if (!resp.body) throw new Error("the presence answer has no body to read");
    const reader = (this.reader = resp.body.getReader());
    const sse = new SseReader();
    const text = new TextDecoder();
    try {
      while (!this.ended) {
        const { value, done } = await reader.read();
        if (done || this.ended) return;
        for (const { event, data } of sse.push(text.decode(value, { stream: true }))) {
          let parsed;
          try { parsed = JSON.parse(data); } catch { continue; }
          const first = event === "snapshot" && !this.connected;
          this.apply(event, parsed);
          if (first) opened();
          if (this.ended) return;
        }
      }
    } finally {
      this.reader = null;
      reader.cancel().catch(() => {});
    }
  }

  /** Applies one event of the stream. */
  apply(event, data) {
    switch (event) {
      case "snapshot":
        this.participants = new Map((data.participants ?? []).map((p) => [p.identity, p]));
        this.metadata = data.metadata ?? null;
        this.connected = true;
        this.index();
        this.emit("onsnapshot", this);
        break;
      case "participant_joined":
        this.participants.set(data.identity, data);
        this.index();
        this.emit("onjoin", data);
        break;
      case "participant_updated":
        this.participants.set(data.identity, data);
        this.index();
        this.emit("onupdate", data);
        break;
      case "participant_left": {
        const gone = this.participants.get(data.identity) ?? data;
        this.participants.delete(data.identity);
        this.index();
        this.emit("onleave", gone);
        break;
      }
      case "room_updated":
        this.metadata = data.metadata ?? null;
        this.emit("onroom", this.metadata);
        break;
      default:
        if (PRESENCE_ENDINGS.has(event)) {
          if (event === "room_closed") {
            this.participants = new Map();
            this.index();
          }
          this.emit("onchange", this);
          this.finish(event);
        }
        return;
    }
    this.emit("onchange", this);
  }

  index() {
    this.bySsrc = new Map();
    for (const p of this.participants.values()) for (const s of p.ssrcs ?? []) this.bySsrc.set(s >>> 0, p.identity);
  }
}

/**
 * Watches who is in `room` (`Presence`); handlers may be given here or set on the result.
 *
 *   const who = watchPresence({ room, token, onjoin: (p) => console.log(p.identity, "joined") });
 *   who.identityOf(ssrc);  // whose stream this is
 *   who.close();
 */
export function watchPresence({ baseUrl = globalThis.location?.origin, room, token,
  fetchImpl = (...args) => globalThis.fetch(...args), ...handlers }) {
  new URL("/", baseUrl); // a missing or malformed base throws here, not on every retry
  const p = new Presence({ baseUrl, room, token, fetchImpl });
  for (const name of ["onsnapshot", "onjoin", "onupdate", "onleave", "onroom", "onchange", "onerror", "onend"]) {
    if (typeof handlers[name] === "function") p[name] = handlers[name];
  }
  p.run();
  return p;
}

// ---------------------------------------------------------------------------------------
// The server API (docs/api.md, "Server API"): for a game's backend, or a trusted page

/**
 * A room's administration with an admin token (of one room, or relay-wide: `room: "*"`,
 * needed by `listRooms`). Every method rejects with `ApiError` (`status`, `code`) when
 * the relay refuses.
 *
 *   const admin = new RoomAdmin("https://relay.example", adminToken);
 *   for (const r of await admin.listRooms()) console.log(r.room, r.participants);
 *   await admin.updateParticipant("arena", "mallory", { publish: false });
 */
export class RoomAdmin {
  constructor(baseUrl, token) {
    this.baseUrl = baseUrl;
    this.token = token;
  }

  call(method, segments, body) {
    const path = `/v1/rooms${segments.map((s) => `/${encodeURIComponent(s)}`).join("")}`;
    return api(this.baseUrl, method, path, this.token, body);
  }

  /** Every room with its counts (relay-wide token): `GET /v1/rooms`. */
  async listRooms() {
    return (await this.call("GET", [])).rooms;
  }

  /** A room's sessions, streams and metadata: `GET /v1/rooms/{room}`. */
  getRoom(room) {
    return this.call("GET", [room]);
  }

  /** Closes a room (its sessions end, joins are refused for a while): `DELETE /v1/rooms/{room}`. */
  async closeRoom(room) {
    await this.call("DELETE", [room]);
  }

  /** A room's participants (`room_not_found` when it has none). */
  async listParticipants(room) {
    return (await this.call("GET", [room, "participants"])).participants;
  }

  /** One participant (`participant_not_found` when it is not there). */
  getParticipant(room, identity) {
    return this.call("GET", [room, "participants", identity]);
  }

  /**
   * Changes a participant: `publish: false` mutes it, `true` unmutes; `metadata` replaces
   * its metadata (`null` clears it). Resolves to the participant as it is now.
   */
  updateParticipant(room, identity, { publish, metadata } = {}) {
    const body = {};
    if (publish !== undefined) body.publish = publish;
    if (metadata !== undefined) body.metadata = metadata;
    return this.call("PATCH", [room, "participants", identity], body);
  }

  /** Removes a participant: its sessions end and its tokens issued until now are refused. */
  async removeParticipant(room, identity) {
    await this.call("DELETE", [room, "participants", identity]);
  }

  /** Sets the room's metadata (any JSON up to 4096 bytes): `PUT /v1/rooms/{room}/metadata`. */
  async setRoomMetadata(room, metadata) {
    await this.call("PUT", [room, "metadata"], metadata);
  }
}
