// The JS codec against the Rust one, both directions (driven by tests/web_client.rs).
// stdin: {"cases":[{"dialect","hex","json","predict"}]}, payloads the Rust codec encoded,
// the JSON form it printed and the Time1 values to predict the first object at. stdout:
// one JSON line {"decoded":[{"json","hex","from_json_hex","predict"}],
// "produced":[{"dialect","hex","json","decoded_json"}]}: what JS made of each case, and payloads JS
// encoded from objects it built itself, for Rust to decode.
import { readFileSync } from "node:fs";
import * as gs from "../client/gsrelay.js";
import { parseJson } from "./support.mjs";

const stringifyJson = gs.stringify;

const input = parseJson(readFileSync(0, "utf8"));

const decoded = input.cases.map(({ dialect, hex, json, predict }) => {
  const d = gs.decode(gs.fromHex(hex), dialect);
  if (!d.ok) return { error: d.error.message };
  const fromJson = parseJson(json).map(gs.objectFromJson);
  // `now` is a Time1 value: as epoch ms it is its own low 16 bits.
  const nullable = (v) => v ?? null;
  const predicted = predict.map(({ now }) => {
    const p = gs.predict(d.objects[0], now);
    return { position: nullable(p.position), rotation: nullable(p.rotation), scale: nullable(p.scale) };
  });
  return {
    json: stringifyJson(d.objects.map(gs.objectToJson)),
    hex: gs.toHex(gs.encode(d.objects, dialect)),
    from_json_hex: gs.toHex(gs.encode(fromJson, dialect)),
    predict: predicted,
  };
});

const loc2 = (x, y, z, vx = 0.5, vy = -0.25, vz = 2) => ({ x, y, z, vx, vy, vz });
const rot2 = (si = 0.1, sj = 0.2, sk = 0.3, ei = 0.15, ej = 0.25, ek = -0.35) => ({ si, sj, sk, ei, ej, ek });
const tf = (n) => ({ tx: n / 100, ty: -n / 50, tz: n / 25 });
const finger = (n) => ({ tip: tf(n), dip: tf(n + 1), pip: tf(n + 2), mcp: tf(n + 3), cmc: tf(n + 4) });
const hand2 = {
  type: "Hand2", id: 7, time: 65535, left: true, location: loc2(0.1, 1.2, -0.3), rotation: rot2(),
  wrist: tf(1), thumb: { tip: tf(2), ip: tf(3), mcp: tf(4), cmc: tf(5) },
  index: finger(6), middle: finger(11), ring: finger(16), pinky: finger(21),
};
const common = [
  { type: "Head1", id: 1, time: 1280, location: loc2(1.1, 1.7, -3.25), rotation: rot2() },
  { type: "Head1", id: 2n ** 64n - 1n, time: 0, location: loc2(-0, 1e-40, 3e38), rotation: rot2(), ipd: 0.0625 },
  { type: "Hand1", id: 300, time: 9, left: false, location: loc2(0.4, 1.0, -0.2), rotation: rot2() },
  hand2,
  { type: "HeadIPD1", ipd: 0.064 },
  { type: "Unknown", tag: 16384, data: gs.fromHex("05aabbcc") },
  { type: "Unknown", tag: 2n ** 40n, data: new Uint8Array(0) },
  { type: "Head1", id: 3, time: 1, location: loc2("NaN:0x7fc02000", Infinity, -Infinity, "-NaN"), rotation: rot2() },
];
const draft01 = [
  { type: "Object1", id: 12, time: 1280, position: { x: 1, y: 2, z: 3 }, rotation: { i: 0, j: 0.5, k: 0 }, scale: 2, active: true },
  { type: "Object1", id: 13, time: 1, position: { x: 1, y: 2, z: 3 }, rotation: { i: 0, j: 0, k: 0 }, scale: 1, active: false, parent: 12 },
  { type: "Object2", id: 14, time: 2, location: loc2(5, 0, 5), rotation: rot2(), scale: loc2(1, 1, 1, 0, 0, 0), active: true, parent: 2n ** 60n },
  { type: "Mesh1", id: 15, texture: { url: "https://example.com/t.png" }, vertices: [{ x: 0, y: 0, z: 0 }, { x: 1, y: 0, z: 0 }, { x: 0, y: 1, z: 0 }],
    normals: [{ x: 0, y: 0, z: 1 }], textures: [{ u: 0.5, v: 0.25 }], triangles: [0, 1, 2] },
  { type: "Mesh1", id: 16, texture: { rtpPT: 97 }, vertices: [], normals: [], textures: [], triangles: [] },
  { type: "Mesh2", id: 17, location: loc2(1, 2, 3), rotation: rot2(), scale: loc2(1, 1, 1), meshUrl: "https://example.com/m.glb" },
  { type: "Mesh2", id: 18, location: loc2(1, 2, 3), rotation: rot2(), scale: loc2(1, 1, 1), meshUrl: "m.glb", texture: { url: "t.png" }, parent: 17 },
  { type: "Mesh2", id: 19, location: loc2(1, 2, 3), rotation: rot2(), scale: loc2(1, 1, 1), meshUrl: "m.glb", texture: { rtpPT: 96 } },
  { type: "GameControl1", id: 20, time: 3, buttons: -5, buttonsTime: 2, left: { x: -1, y: 1 }, right: { x: 0.5, y: -0.5 } },
  { type: "GameControl1", id: 21, time: 3, buttons: -(2n ** 40n), buttonsTime: 2, left: { x: 0, y: 0 }, right: { x: 0, y: 0 } },
  { type: "ThreeDOF1", id: 22, time: 4, left: true, rotation: rot2() },
  { type: "SixDOF1", id: 23, time: 5, left: false, location: loc2(0, 1, 0), rotation: rot2(), pointer: { x: 1, y: 2, z: 3 } },
  { type: "SixDOF1", id: 24, time: 5, left: true, location: loc2(0, 1, 0), rotation: rot2(), pointer: { x: 1, y: 2, z: 3, bare: true } },
  { type: "Hand1", id: 25, time: 9, left: true, location: loc2(0, 0, 0), rotation: rot2(), extra: gs.fromHex("7f0101") },
  { type: "Unknown", tag: 136, data: gs.fromHex("01") },
];
const gse = [
  { type: "Object1", id: 12, time: 1280, position: { x: 1, y: 2, z: 3 }, rotation: { i: 0, j: 0.5, k: 0 }, scale: { x: 1, y: 2, z: 3 }, active: true },
  { type: "Object1", id: 13, time: 1, position: { x: 1, y: 2, z: 3 }, rotation: { i: 0, j: 0, k: 0 }, scale: { x: 1, y: 1, z: 1 }, active: false, parent: 99 },
  { type: "Mesh1", id: 15, vertices: [{ x: 0, y: 0, z: 0 }], normals: [{ x: 0, y: 0, z: 1 }], textures: [{ u: 3, v: 4 }], triangles: [0, 0, 0] },
  { type: "Hand1", id: 25, time: 9, left: true, location: loc2(0, 0, 0), rotation: rot2(), extra: gs.fromHex("0102") },
  { type: "Unknown", tag: 131, data: gs.fromHex("0102") },
];
const sets = { draft01: [...common, ...draft01], gse: [...common, ...gse] };
const produced = [];
for (const [dialect, objects] of Object.entries(sets)) {
  for (const o of objects) produced.push(payload(dialect, [o]));
  produced.push(payload(dialect, objects));
  produced.push(payload(dialect, [{ type: "Container", ssrc: 0xfeedbeef, objects }, { type: "Container", ssrc: 1, objects: [] }]));
}

/** A payload JS encoded: the objects as built, and as JS reads them back (Float16 rounded). */
function payload(dialect, objects) {
  const bytes = gs.encode(objects, dialect);
  const back = gs.decode(bytes, dialect);
  return { dialect, hex: gs.toHex(bytes), json: stringifyJson(objects.map(gs.objectToJson)),
    decoded_json: back.ok ? stringifyJson(back.objects.map(gs.objectToJson)) : back.error.message };
}

// What the codec must refuse to write, for Rust to see the JS side agrees.
const refusals = [
  [{ type: "Object1", id: 1, time: 0, position: { x: 0, y: 0, z: 0 }, rotation: { i: 0, j: 0, k: 0 }, scale: { x: 1, y: 1, z: 1 }, active: true }, "draft01"],
  [{ type: "Mesh1", id: 1, vertices: [], normals: [], textures: [], triangles: [] }, "draft01"],
  [{ type: "Object2", id: 1 }, "gse"],
  [{ type: "Unknown", tag: 1, data: new Uint8Array(0) }, "draft01"],
  [{ type: "Unknown", tag: 0, data: new Uint8Array(0) }, "draft01"],
  [{ type: "Container", ssrc: 1, objects: [{ type: "Container", ssrc: 2, objects: [] }] }, "draft01"],
  [{ type: "Hand1", id: 1, time: 0, left: true, location: loc2(0, 0, 0), rotation: rot2(), extra: gs.fromHex("ff") }, "draft01"],
].map(([o, dialect]) => {
  let js;
  try {
    gs.encode([o], dialect);
    js = "accepted";
  } catch (e) {
    js = e instanceof gs.EncodeError ? "refused" : `threw ${e}`;
  }
  return { dialect, json: stringifyJson([gs.objectToJson(o)]), js };
});

console.log(stringifyJson({ decoded, produced, refusals }));
