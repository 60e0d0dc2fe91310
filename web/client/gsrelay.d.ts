// TypeScript declarations of gsrelay.js, the relay's browser client (docs/js-client.md).
//
// They cover every export of the module and need no DOM library: the transports' browser
// objects appear through the few members the client uses (`WebTransportLike`,
// `PeerConnectionLike`, `DataChannelLike`). Members marked `private` are the module's
// internals, declared so that nothing of the class goes undeclared. The tests check the
// declarations with `tsc --strict` and against what the module exports, member by member
// (tests/js_package.rs).

// ---------------------------------------------------------------------------------------
// Objects

/** The two wire dialects (docs/wire-format.md). */
export type Dialect = "draft01" | "gse";

/**
 * An integer field that may exceed 2^53 − 1 (objectIDs, tags, VarInts, parents): a number,
 * or a BigInt beyond it.
 */
export type Int = number | bigint;

/**
 * A float the number type cannot carry: a NaN other than the default quiet one, as its
 * f32 bits (`"NaN:0x7fc02000"`; `"-NaN"` for the negative quiet one). Decoded objects hold
 * only these; the JSON form (`objectToJson`) also writes `"NaN"`, `"Infinity"` and
 * `"-Infinity"`, which `encode` reads too.
 */
export type FloatString = "NaN" | "-NaN" | "Infinity" | "-Infinity" | `NaN:0x${string}`;

/** A float field: a number, or a NaN payload kept as a string (`FloatString`). */
export type Float = number | FloatString;

/** Loc2 (and Scale2): a position in metres and a velocity in metres per second. */
export interface Loc2 {
  x: Float;
  y: Float;
  z: Float;
  vx: Float;
  vy: Float;
  vz: Float;
}

/** Rot2: a rotation now (`s*`) and one second ahead (`e*`), vector parts of unit quaternions. */
export interface Rot2 {
  si: Float;
  sj: Float;
  sk: Float;
  ei: Float;
  ej: Float;
  ek: Float;
}

/** Loc1, Scale1, Norm1 and the pointer of SixDOF1. */
export interface Vec3 {
  x: Float;
  y: Float;
  z: Float;
}

/** Transform1: one joint of a hand, relative to the wrist. */
export interface Transform1 {
  tx: Float;
  ty: Float;
  tz: Float;
}

/** A finger of Hand2. */
export interface Finger {
  tip: Transform1;
  dip: Transform1;
  pip: Transform1;
  mcp: Transform1;
  cmc: Transform1;
}

/** The thumb of Hand2. */
export interface Thumb {
  tip: Transform1;
  ip: Transform1;
  mcp: Transform1;
  cmc: Transform1;
}

/** A mesh's texture: a URL, or the RTP payload type of a stream carrying it. */
export type Texture = { url: string } | { rtpPT: number };

interface WithExtra {
  /** Extension TLVs after the object's own fields, kept byte for byte. */
  extra?: Uint8Array;
}

export interface Head1 extends WithExtra {
  type: "Head1";
  id: Int;
  /** Time1: the low 16 bits of the sender's epoch in ms (`time1()`). */
  time: number;
  location: Loc2;
  rotation: Rot2;
  ipd?: Float;
}

export interface Hand1 extends WithExtra {
  type: "Hand1";
  id: Int;
  time: number;
  left: boolean;
  location: Loc2;
  rotation: Rot2;
}

export interface Hand2 extends WithExtra {
  type: "Hand2";
  id: Int;
  time: number;
  left: boolean;
  location: Loc2;
  rotation: Rot2;
  wrist: Transform1;
  thumb: Thumb;
  index: Finger;
  middle: Finger;
  ring: Finger;
  pinky: Finger;
}

export interface HeadIPD1 extends WithExtra {
  type: "HeadIPD1";
  ipd: Float;
}

export interface Object1 extends WithExtra {
  type: "Object1";
  id: Int;
  time: number;
  position: Vec3;
  rotation: { i: Float; j: Float; k: Float };
  /** One Float16 in draft01, `{x, y, z}` in gse. */
  scale: Float | Vec3;
  active: boolean;
  parent?: Int;
}

export interface Object2 extends WithExtra {
  type: "Object2";
  id: Int;
  time: number;
  location: Loc2;
  rotation: Rot2;
  scale: Loc2;
  active: boolean;
  parent?: Int;
}

export interface Mesh1 extends WithExtra {
  type: "Mesh1";
  id: Int;
  /** Required in draft01; gse's Mesh1 has none. */
  texture?: Texture;
  vertices: Vec3[];
  normals: Vec3[];
  /** Floats in draft01, VarUInts in gse. */
  textures: { u: Float | bigint; v: Float | bigint }[];
  triangles: Int[];
}

export interface Mesh2 extends WithExtra {
  type: "Mesh2";
  id: Int;
  location: Loc2;
  rotation: Rot2;
  scale: Loc2;
  meshUrl: string;
  texture?: Texture;
  parent?: Int;
}

export interface GameControl1 extends WithExtra {
  type: "GameControl1";
  id: Int;
  time: number;
  buttons: Int;
  buttonsTime: number;
  left: { x: Float; y: Float };
  right: { x: Float; y: Float };
}

export interface ThreeDOF1 extends WithExtra {
  type: "ThreeDOF1";
  id: Int;
  time: number;
  left: boolean;
  rotation: Rot2;
}

export interface SixDOF1 extends WithExtra {
  type: "SixDOF1";
  id: Int;
  time: number;
  left: boolean;
  location: Loc2;
  rotation: Rot2;
  /** `bare`: written without its length, as the draft's EBNF has it. */
  pointer?: Vec3 & { bare?: boolean };
}

/** An object of a tag the dialect does not know, kept byte for byte. */
export interface UnknownObject {
  type: "Unknown";
  tag: Int;
  data: Uint8Array;
}

/** The relay's aggregated container (tag `CONTAINER_TAG`): one sender's objects. */
export interface Container {
  type: "Container";
  ssrc: number;
  objects: GameObject[];
}

/** A game-state object, shaped like the JSON `gsrelay decode` prints. */
export type GameObject =
  | Head1
  | Hand1
  | Hand2
  | HeadIPD1
  | Object1
  | Object2
  | Mesh1
  | Mesh2
  | GameControl1
  | ThreeDOF1
  | SixDOF1
  | UnknownObject;

/** What a payload holds: game-state objects and, from an aggregating relay, containers. */
export type PayloadObject = GameObject | Container;

/** The `type` of an object. */
export type ObjectType = PayloadObject["type"];

/** The JSON form of a value: bytes as hex, non-finite numbers as strings. */
export type JsonForm<T> = T extends Uint8Array
  ? string
  : T extends number
    ? number | FloatString
    : T extends readonly (infer U)[]
      ? JsonForm<U>[]
      : T extends object
        ? { [K in keyof T]: JsonForm<T[K]> }
        : T;

/** The outcome of a parser that never throws. */
export type Result<T> = ({ ok: true } & T) | { ok: false; error: DecodeError };

/** Bytes a parser accepts. */
export type Bytes = ArrayBuffer | ArrayBufferView;

/** Module version, shown by the viewer (the relay's version). */
export declare const VERSION: string;

/** The two wire dialects. */
export declare const DIALECTS: readonly Dialect[];

/** Tag of the relay's container object (0x4753, "GS"). */
export declare const CONTAINER_TAG: number;

/** The object type `tag` names in `dialect` ("Unknown" if none). */
export declare function kindOf(tag: Int, dialect?: Dialect): ObjectType;

/** The tag `dialect` writes for an object type, or undefined. */
export declare function tagOf(type: string, dialect?: Dialect): number | undefined;

// ---------------------------------------------------------------------------------------
// Errors

/** A payload or packet that does not parse: where, and why. */
export declare class DecodeError extends Error {
  constructor(offset: number, kind: string, message: string);
  name: "DecodeError";
  /** Byte offset of the fault. */
  offset: number;
  /** Machine-readable reason: `truncated`, `invalid_var_prefix`, `trailing_bytes`, ... */
  kind: string;
}

/** An object that cannot be written in a dialect. */
export declare class EncodeError extends Error {
  constructor(object: string, message: string);
  name: "EncodeError";
  /** The object type or field at fault (`"Object1.scale"`). */
  object: string;
}

/** An HTTP API refusal: the relay's `{"error": {"code", "message"}}` and the status. */
export declare class ApiError extends Error {
  constructor(status: number, code: string, message: string);
  name: "ApiError";
  /** HTTP status. */
  status: number;
  /** The relay's error code (`unsupported_transport`, `ssrc_taken`, ...; `http_error` if none). */
  code: string;
}

// ---------------------------------------------------------------------------------------
// Codec

/** Float16 bits → the f32 value (a NaN payload as a `FloatString`). */
export declare function f16ToF32(bits: number): Float;

/** A value → Float16 bits, via f32, rounding to nearest even. */
export declare function f32ToF16(value: Float): number;

/** Bytes → lowercase hex. */
export declare function toHex(bytes: Iterable<number>): string;

/** Hex (whitespace and colons allowed) → bytes; throws TypeError on bad input. */
export declare function fromHex(text: string): Uint8Array;

/** Decodes every object of a payload; never throws. */
export declare function decode(payload: Bytes, dialect?: Dialect): Result<{ objects: PayloadObject[] }>;

/** Encodes objects into one payload; throws `EncodeError` for an object the dialect cannot carry. */
export declare function encode(objects: PayloadObject | readonly PayloadObject[], dialect?: Dialect): Uint8Array;

/** An object in the JSON form of `gsrelay decode`. */
export declare function objectToJson<T extends PayloadObject>(object: T): JsonForm<T>;

/** JSON text of a value, as `gsrelay encode` reads it: BigInt as plain integers, −0 kept. */
export declare function stringify(value: unknown): string;

/** An object from the JSON form (hex `extra`/`data` become bytes); the shape is not checked. */
export declare function objectFromJson(json: unknown): PayloadObject;

// ---------------------------------------------------------------------------------------
// RTP and RTCP

/** A parsed RTP packet; `payload` is a view into the packet. */
export interface RtpPacket {
  marker: boolean;
  payloadType: number;
  sequenceNumber: number;
  timestamp: number;
  ssrc: number;
  csrcs: number[];
  extension: { profile: number; data: Uint8Array } | null;
  payload: Uint8Array;
}

/** One item of a compound RTCP packet. */
export type RtcpItem =
  | { type: "sr" | "rr"; ssrc: number }
  | { type: "bye"; ssrcs: number[] }
  | { type: "fir"; sender: number; entries: { ssrc: number; seq: number }[] }
  | { type: "pli"; sender: number; media: number }
  | { type: "ownership"; kind: OwnershipKind; sender: number; entries: OwnershipEntry[] }
  | { type: "other"; pt: number; count: number };

/** What an ownership message says (docs/relay.md, "Room objects and ownership"). */
export type OwnershipKind = "request" | "release" | "granted" | "lost" | "refused";

/** Why an object was lost or a request refused. */
export type OwnershipReason =
  | "none" | "contended" | "no_object" | "gone" | "not_home" | "dialect_mismatch" | "id_in_use"
  | "too_many_held" | "not_publisher";

/** One object an ownership message names. */
export interface OwnershipEntry {
  ssrc: number;
  /** Its objectID: a number, or a BigInt past 2^53. */
  object: number | bigint;
  reason: OwnershipReason;
}

/** The ownership messages' constants: APP name, subtypes, reasons by code, entries per message. */
export declare const OWNERSHIP: {
  readonly name: "GSOW";
  readonly kinds: { readonly [K in OwnershipKind]: number };
  readonly reasons: readonly OwnershipReason[];
  readonly maxEntries: 16;
};

/** An ownership request or release from `sender` about `[ssrc, objectId]` pairs (1 to 16). */
export declare function buildOwnership(
  kind: "request" | "release",
  sender: number,
  objects: readonly (readonly [number, number | bigint])[],
): Uint8Array;

/** An ownership notice the relay sent a session. */
export interface OwnershipNotice {
  kind: "granted" | "lost" | "refused";
  ssrc: number;
  object: number | bigint;
  reason: OwnershipReason;
}

/** True when a packet on an RTP/RTCP-multiplexed flow is RTCP (RFC 5761 §4). */
export declare function isRtcp(packet: ArrayLike<number>): boolean;

/** Parses an RTP packet; never throws. */
export declare function parseRtp(bytes: Bytes): Result<{ packet: RtpPacket }>;

/** Builds an RTP packet (no CSRC, no extension, no padding). */
export declare function buildRtp(packet: {
  payloadType?: number;
  marker?: boolean;
  sequenceNumber: number;
  timestamp: number;
  ssrc: number;
  payload: Uint8Array;
}): Uint8Array;

/** RTCP FIR (RFC 5104): `sender` asks `media` for a full state; `seq` 0–255. */
export declare function buildFir(sender: number, media: number, seq: number): Uint8Array;

/** RTCP PLI (RFC 4585). */
export declare function buildPli(sender: number, media: number): Uint8Array;

/** An empty RTCP RR from `ssrc`. */
export declare function buildRr(ssrc: number): Uint8Array;

/** RTCP BYE for `ssrc`. */
export declare function buildBye(ssrc: number): Uint8Array;

/** Parses a compound RTCP packet into items; never throws. */
export declare function parseRtcp(bytes: Bytes): Result<{ items: RtcpItem[] }>;

// ---------------------------------------------------------------------------------------
// RoQ framing (draft-ietf-avtcore-rtp-over-quic)

/** Writes a QUIC varint (1, 2, 4 or 8 bytes); RangeError outside 0..2^62. */
export declare function encodeQuicVarint(value: Int): Uint8Array;

/** Reads a QUIC varint at `offset`, or null if the bytes end first. */
export declare function decodeQuicVarint(
  bytes: ArrayLike<number>,
  offset?: number,
): { value: Int; length: number } | null;

/** One RoQ datagram: the flow id, then one RTP or RTCP packet. */
export declare function frameDatagram(flowId: Int, packet: Uint8Array): Uint8Array;

/** Splits a RoQ datagram; never throws. */
export declare function parseDatagram(bytes: Bytes): Result<{ flowId: Int; packet: Uint8Array }>;

/** The opening of a RoQ unidirectional stream: the flow id. */
export declare function frameStreamHeader(flowId: Int): Uint8Array;

/** One packet on a RoQ stream: its QUIC-varint length, then the packet. */
export declare function frameStreamPacket(packet: Uint8Array): Uint8Array;

/**
 * Incremental reader of a RoQ unidirectional stream. A packet length over `maxPacket`
 * (or zero) sets `error`, after which input is ignored.
 */
export declare class RoqStreamReader {
  constructor(options?: { maxPacket?: number });
  maxPacket: number;
  /** The stream's flow id, once read. */
  flowId: Int | undefined;
  error: DecodeError | null;
  private buf;
  /** Takes the next chunk; returns the packets it completed. */
  push(chunk: Uint8Array): Uint8Array[];
}

// ---------------------------------------------------------------------------------------
// Prediction (the same model as the relay's crates/core/src/wire/predict.rs)

/** `[x, y, z]`. */
export type Vector3 = [number, number, number];

/** A unit quaternion `[w, i, j, k]`. */
export type Quaternion = [number, number, number, number];

/** An object's predicted pose; each part absent when the type has none. */
export interface Prediction {
  position?: Vector3;
  rotation?: Quaternion;
  scale?: Vector3;
}

/** Signed ms from Time1 `from` to `to`, within ±32.767 s. */
export declare function timeDeltaMs(from: number, to: number): number;

/** Time1 now: the low 16 bits of the epoch in ms. */
export declare function time1(nowMs?: number): number;

/** A Loc2 (or Scale2) `dt` seconds later. */
export declare function extrapolate(location: Loc2, dt: number): Vector3;

/** The unit quaternion from its vector part (non-negative real part). */
export declare function quatFromVector(i: Float, j: Float, k: Float): Quaternion;

/** Spherical linear interpolation along the shorter arc; `t` outside 0..1 extrapolates. */
export declare function slerp(a: Quaternion, b: Quaternion, t: number): Quaternion;

/** Rot2's rotation `dt` seconds after its start. */
export declare function rot2At(rotation: Rot2, dt: number): Quaternion;

/** Heading (radians about +y, 0 facing −z) of a quaternion. */
export declare function yawOf(q: Quaternion): number;

/**
 * An object's predicted pose at `nowMs` (epoch ms); `maxAheadMs` caps the extrapolation.
 */
export declare function predict(
  object: PayloadObject,
  nowMs?: number,
  options?: { maxAheadMs?: number },
): Prediction;

// ---------------------------------------------------------------------------------------
// Room state

/** An object's key within its stream: its objectID, else its type. */
export declare function objectKey(object: PayloadObject): string;

/** The latest state of one object. */
export interface ObjectEntry {
  object: GameObject;
  /** When it arrived (the room state's clock, ms). */
  receivedMs: number;
  /** The RTP stream and sequence number that brought it. */
  stream: number;
  seq: number;
}

/** One sender's stream. */
export interface StreamState {
  ssrc: number;
  /** By `objectKey`. */
  objects: Map<string, ObjectEntry>;
  updates: number;
  /** Arrival times within the rate window (ms). */
  arrivals: number[];
  firstSeenMs: number;
}

/** An object of the room, as `RoomState.objects()` yields it. */
export interface RoomObject extends ObjectEntry {
  ssrc: number;
  key: string;
}

/** What `RoomState.ingest` made of a packet. */
export type IngestOutcome = "rtp" | "rtcp" | "dropped:rtp" | "dropped:rtcp" | "dropped:payload";

/**
 * A subscriber's view of a room: per sender, the latest state of each object. An object
 * is replaced only by one from a later packet of the same RTP stream (else counted
 * `stale`); containers are unpacked per sender; a BYE removes the sender's stream.
 */
export declare class RoomState {
  constructor(options?: { dialect?: Dialect; now?: () => number });
  dialect: Dialect;
  /** The clock (ms; default `performance.now()`). */
  now: () => number;
  /** By sender SSRC. */
  streams: Map<number, StreamState>;
  dropped: { rtp: number; rtcp: number; payload: number; stale: number };
  /** Called after each change. */
  onchange: ((room: RoomState) => void) | null;
  /** Applies one RTP or RTCP packet. */
  ingest(packet: Uint8Array): IngestOutcome;
  private apply;
  /** Drops a stream and its objects. */
  remove(ssrc: number): void;
  /** Drops every stream, as a rejoin does. */
  clear(): void;
  private changed;
  /** Object updates per second of a stream over the last two seconds. */
  rate(ssrc: number): number;
  /** Every object held. */
  objects(): Generator<RoomObject, void, unknown>;
  /** Total objects held. */
  get objectCount(): number;
}

// ---------------------------------------------------------------------------------------
// HTTP control plane (docs/api.md)

/** The transports a join may ask for; a `Session` uses the browser ones. */
export type Transport = "rtp" | "quic" | "webtransport" | "webrtc";

/** A subscriber's interest (docs/interest.md). */
export interface Interest {
  echo?: boolean;
  streams?: { allow?: number[]; deny?: number[] };
  /** Type names (`"Head1"`, case-insensitive) or tag numbers. */
  types?: { allow?: (string | number)[]; deny?: (string | number)[] };
  area?: {
    center?: [number, number, number];
    avatar?: number;
    radius?: number;
    exit_radius?: number;
    half_extents?: [number, number, number];
    exit_half_extents?: [number, number, number];
  };
  rates?: { within?: number; max_hz?: number }[];
  max_bitrate_bps?: number;
  prediction?: {
    tolerance?: number;
    tolerance_per_meter?: number;
    rotation_tolerance_deg?: number;
    heartbeat_hz?: number;
  };
  delivery?: { mode?: "per_stream" | "aggregated"; max_delay_ms?: number };
}

/** The body of `POST /v1/rooms/{room}/sessions`. */
export interface JoinRequest {
  transport?: Transport;
  ssrc?: number;
  require_ssrc?: boolean;
  dialect?: Dialect;
  interest?: Interest;
  srtp_profile?: "AES_CM_128_HMAC_SHA1_80" | "AEAD_AES_128_GCM" | "none";
  sdp_offer?: string;
  /** An earlier answer's `resume` credential: take that session back (docs/api.md, "Resume"). */
  resume?: string;
  /** Also give the session a room stream, whose objects outlive it. */
  room_stream?: boolean;
}

/** The `webtransport` part of a join answer (docs/transports.md). */
export interface WebTransportAnswer {
  url: string;
  /** Hex SHA-256 of a generated certificate to pin; null for a configured one. */
  cert_sha256: string | null;
  flow_id: number;
  session_token: string;
}

/** The `webrtc` part of a join answer (docs/transports.md). */
export interface WebRtcAnswer {
  sdp_answer: string;
  addr: string;
  channel: string;
  max_message_size: number;
  max_packet: number;
}

/** A join's answer: the session, and how to reach the relay for its transport. */
export interface JoinAnswer {
  session_id: string;
  ssrc: number;
  /** The relay's SSRC: a FIR naming it asks for every stream in the interest. */
  relay_ssrc: number;
  /** The streams already in the room. */
  streams: number[];
  /** The session's room stream, when the join asked for one. */
  room_ssrc?: number;
  /** The credential that resumes this session; each answer gives the next one. */
  resume?: string;
  rtp?: {
    addr: string;
    srtp: { profile: string; client_key: string; relay_key: string } | null;
  };
  quic?: { addr: string; alpn: string; cert_sha256: string; flow_id: number; session_token: string };
  webtransport?: WebTransportAnswer;
  webrtc?: WebRtcAnswer;
  /** Where the replay the room plays is, when it is a replay's room. */
  replay?: ReplayInfo;
  /** The room it mirrors and how late, when it is a broadcast-delayed mirror. */
  delayed?: Delayed;
}

/** `GET /v1/rooms/{room}` (admin). */
export interface RoomInfo {
  room: string;
  sessions: {
    session_id: string;
    identity: string;
    ssrc: number;
    publish: boolean;
    subscribe: boolean;
    dialect: Dialect;
    delivery: "per_stream" | "aggregated";
    rtt_ms: number | null;
    send_budget_bps: number | null;
  }[];
  streams: { ssrc: number; objects: number; bytes: number }[];
  /** The room's metadata (null when none was set). */
  metadata: Json;
  /** Where the replay the room plays is, when it is a replay's room. */
  replay?: ReplayInfo;
  /** The room it mirrors and how late, when it is a broadcast-delayed mirror. */
  delayed?: Delayed;
}

/** A token's claims (docs/api.md, "Authentication"). */
export interface TokenClaims {
  room: string;
  sub: string;
  publish?: boolean;
  subscribe?: boolean;
  admin?: boolean;
  exp: number;
  iat?: number;
  nbf?: number;
}

/** Where the relay's HTTP API is (default: the page's origin) and the bearer token. */
interface ApiTarget {
  baseUrl?: string;
  token: string;
}

/** Joins `room`; rejects with `ApiError` on a refusal. `request.transport` defaults to WebTransport. */
export declare function join(options: ApiTarget & { room: string; request?: JoinRequest }): Promise<JoinAnswer>;

/** Leaves: `DELETE /v1/sessions/{id}`. */
export declare function leave(options: ApiTarget & { sessionId: string }): Promise<null>;

/** Replaces the session's interest: `PUT /v1/sessions/{id}/interest`. */
export declare function setInterest(options: ApiTarget & { sessionId: string; interest: Interest }): Promise<null>;

/** Inspects a room (admin token): `GET /v1/rooms/{room}`. */
export declare function roomInfo(options: ApiTarget & { room: string }): Promise<RoomInfo>;

/** A token's claims, unverified, for display; null if it is not a token. */
export declare function tokenClaims(token: string): TokenClaims | null;

// ---------------------------------------------------------------------------------------
// Recordings, replays and broadcast-delayed mirrors (docs/api.md; docs/recording.md)

/** A recording (`GET /v1/recordings/{id}`). */
export interface Recording {
  id: string;
  /** The room recorded. */
  room: string;
  /** The node that recorded it (each node keeps its own). */
  node: string;
  state: "recording" | "stopped" | "failed" | "interrupted";
  /** Unix milliseconds. */
  started_at: number;
  stopped_at: number | null;
  /** `stopped`, `room_ended`, `shutdown`, `writer_behind`, `disk_error: ...`; null while it runs. */
  stop_reason: string | null;
  bytes: number;
  segments: number;
  /** Seconds between checkpoints: how far before its target a seek lands at worst. */
  checkpoint_secs: number;
}

/** Where a replay is: in a join answer, room info, or (with more) its status. */
export interface ReplayInfo {
  /** The recording it plays. */
  recording: string;
  /** Milliseconds from the recording's start. */
  position_ms: number;
  /** The recording's length, milliseconds. */
  duration_ms: number;
  /** 0.25 to 8. */
  speed: number;
  paused: boolean;
  /** It played to the end; the room holds the last state until it is stopped. */
  ended: boolean;
}

/** A replay's status (`GET /v1/replays/{room}`). */
export interface ReplayStatus extends ReplayInfo {
  /** The room it plays into. */
  room: string;
  /** Each recorded SSRC that plays under another one: `[recorded, played]`. */
  remapped: [number, number][];
}

/** A broadcast-delayed mirror, as a join answer and room info of the mirror room tell it. */
export interface Delayed {
  /** The room it mirrors. */
  source: string;
  /** Nothing in the mirror is newer than now minus this. */
  delay_ms: number;
}

/** A room's mirror (`GET /v1/rooms/{room}/mirror`). */
export interface Mirror {
  /** The source room. */
  room: string;
  /** The mirror room spectators join. */
  mirror: string;
  delay_ms: number;
  /** Unix milliseconds. */
  started_at: number;
}

/** What `controlReplay` changes, at least one of them (applied in this order). */
export interface ReplayControl {
  seekMs?: number;
  speed?: number;
  paused?: boolean;
}

/** The replay speeds the viewer offers: 0.25, 0.5, 1, 2, 4, 8. */
export declare const REPLAY_SPEEDS: readonly number[];

/** Starts recording a room (admin token of the room). */
export declare function startRecording(options: ApiTarget & { room: string }): Promise<Recording>;
/** The room's running recording (404 `not_recording`). */
export declare function recording(options: ApiTarget & { room: string }): Promise<Recording>;
/** Stops the room's recording; resolves once its files are closed. */
export declare function stopRecording(options: ApiTarget & { room: string }): Promise<Recording>;
/** Every recording of this relay, oldest first (relay-wide admin token). */
export declare function listRecordings(options: ApiTarget): Promise<Recording[]>;
/** One recording (admin token of its room). */
export declare function getRecording(options: ApiTarget & { id: string }): Promise<Recording>;
/** Deletes a stopped recording. */
export declare function deleteRecording(options: ApiTarget & { id: string }): Promise<void>;
/** The pcapng export's address (the route wants the bearer token: see `downloadRecording`). */
export declare function recordingDownloadUrl(options: { baseUrl?: string; id: string }): string;
/** The recording as one pcapng file. */
export declare function downloadRecording(
  options: ApiTarget & { id: string },
): Promise<Uint8Array>;
/** Plays a recording into a room of its own. */
export declare function startReplay(
  options: ApiTarget & { recording: string; room: string; fromMs?: number; speed?: number; paused?: boolean },
): Promise<ReplayStatus>;
/** The replay playing into `room` (404 `replay_not_found`). */
export declare function replayStatus(options: ApiTarget & { room: string }): Promise<ReplayStatus>;
/** Every replay of this relay (relay-wide admin token). */
export declare function listReplays(options: ApiTarget): Promise<ReplayStatus[]>;
/** Seeks, changes speed, pauses or resumes; resolves to its status after. */
export declare function controlReplay(options: ApiTarget & { room: string } & ReplayControl): Promise<ReplayStatus>;
/** Moves a replay to `positionMs`. */
export declare function seekReplay(options: ApiTarget & { room: string; positionMs: number }): Promise<ReplayStatus>;
/** Sets a replay's speed. */
export declare function setReplaySpeed(options: ApiTarget & { room: string; speed: number }): Promise<ReplayStatus>;
/** Pauses a replay. */
export declare function pauseReplay(options: ApiTarget & { room: string }): Promise<ReplayStatus>;
/** Resumes a paused replay. */
export declare function resumeReplay(options: ApiTarget & { room: string }): Promise<ReplayStatus>;
/** Stops a replay. */
export declare function stopReplay(options: ApiTarget & { room: string }): Promise<void>;
/** Where a replay is `elapsedMs` after it was read, if nobody changed it since. */
export declare function replayPosition(replay: ReplayInfo, elapsedMs: number): number;
/** Mirrors `room` into `mirror`, `delayMs` (1000 to 600000) late. */
export declare function startMirror(
  options: ApiTarget & { room: string; mirror: string; delayMs: number },
): Promise<Mirror>;
/** The room's mirror (404 `no_mirror`). */
export declare function mirror(options: ApiTarget & { room: string }): Promise<Mirror>;
/** Stops the room's mirror. */
export declare function stopMirror(options: ApiTarget & { room: string }): Promise<void>;

// ---------------------------------------------------------------------------------------
// Transports

/** What the client uses of a WebTransport (the browser's, or a stand-in). */
export interface WebTransportLike {
  readonly ready: Promise<unknown>;
  readonly closed: Promise<unknown>;
  readonly datagrams: { readonly readable: unknown; readonly writable: unknown; readonly maxDatagramSize?: number };
  readonly incomingUnidirectionalStreams: unknown;
  createBidirectionalStream(): Promise<unknown>;
  close(): void;
}

/** What the client uses of an RTCPeerConnection (the browser's, or a stand-in). */
export interface PeerConnectionLike {
  readonly connectionState: string;
  createDataChannel(label: string, options?: { ordered?: boolean; maxRetransmits?: number }): unknown;
  createOffer(): Promise<unknown>;
  setLocalDescription(description?: unknown): Promise<void>;
  setRemoteDescription(description: { type: "answer"; sdp: string }): Promise<void>;
  readonly localDescription: { readonly sdp: string } | null;
  addEventListener(type: "connectionstatechange", listener: () => void): void;
  close(): void;
}

/** What the client uses of an RTCDataChannel. */
export interface DataChannelLike {
  readonly label: string;
  readonly readyState: string;
  readonly bufferedAmount: number;
  close(): void;
}

/** Whether this browser has WebTransport. */
export declare function hasWebTransport(): boolean;

/**
 * A live session over WebTransport, from a join answer's `webtransport`: RoQ datagrams
 * both ways, snapshots on unidirectional streams from the relay.
 */
export declare class WebTransportConnection {
  /** Connects and passes the session token; every packet goes to `onpacket`. */
  static open(
    answer: JoinAnswer,
    options?: {
      onpacket?: (packet: Uint8Array) => void;
      WebTransportImpl?: new (
        url: string,
        options: { serverCertificateHashes?: { algorithm: string; value: ArrayBufferView & { buffer: ArrayBuffer } }[] },
      ) => WebTransportLike;
    },
  ): Promise<WebTransportConnection>;
  private constructor();
  readonly wt: WebTransportLike;
  readonly flowId: number;
  onpacket: (packet: Uint8Array) => void;
  private writer;
  /** Packets dropped: another flow's, badly framed, too large to send. */
  dropped: { flow: number; framing: number; oversize: number };
  /** Settles when the connection ends. */
  readonly closed: Promise<unknown>;
  /** The relay's status line (`ok ...`). */
  status: string;
  /** The largest RTP/RTCP packet a datagram can carry on this path. */
  get maxPacketSize(): number;
  /** Sends one RTP or RTCP packet; false (and counted) if it cannot fit. */
  send(packet: Uint8Array): Promise<boolean>;
  private readDatagrams;
  private readStreams;
  private readStream;
  close(): void;
}

/** The label of the data channel the relay expects. */
export declare const WEBRTC_CHANNEL: string;

/**
 * A live session over a WebRTC data channel, signalled by the join itself: `open` makes
 * the offer, `joinWith(sdpOffer)` joins with it and resolves to the answer.
 */
export declare class WebRtcConnection {
  static open(
    joinWith: (sdpOffer: string) => Promise<JoinAnswer>,
    options?: {
      onpacket?: (packet: Uint8Array) => void;
      RTCPeerConnectionImpl?: new () => PeerConnectionLike;
      /** How long the channel may take to open (default 10 000). */
      timeoutMs?: number;
      /** Called as soon as the join answers. */
      onanswer?: (answer: JoinAnswer) => void;
    },
  ): Promise<WebRtcConnection>;
  private constructor();
  readonly pc: PeerConnectionLike;
  readonly dc: DataChannelLike;
  /** The join answer. */
  answer: JoinAnswer | null;
  onpacket: (packet: Uint8Array) => void;
  /** Largest packet the relay accepts (its answer says; 1200 until then). */
  maxPacketSize: number;
  /** Bytes waiting in the channel beyond which `send` drops rather than queues. */
  maxBuffered: number;
  dropped: { oversize: number; closed: number; buffered: number };
  /** Resolves when the channel or the connection closes. */
  readonly closed: Promise<void>;
  /** Resolves once the channel is open; rejects if the connection fails or `ms` pass. */
  opened(ms: number): Promise<void>;
  /** Sends one packet as one message; false (and counted) if it cannot go. */
  send(packet: Uint8Array): Promise<boolean>;
  close(): void;
}

// ---------------------------------------------------------------------------------------
// Session and its watchdog

/** How often a session sends a receiver report (ms). */
export declare const REPORT_INTERVAL_MS: number;

/** Silence from the relay after which a session takes it for gone (ms), by default. */
export declare const SILENCE_MS: number;

/** Without the app's silence, it must also last this many of the last report gaps. */
export declare const SILENCE_REPORT_GAPS: number;

/**
 * How long a rejoin's resume request may go unanswered before another is sent beside it
 * through the same base URL (ms, 400).
 */
export declare const RESUME_HEDGE_MS: number;

/** The most resume requests in flight at once (4). */
export declare const RESUME_ATTEMPTS: number;

/** What a session heard of the relay, to tell when it is gone. */
export declare class Liveness {
  constructor(options?: { silenceMs?: number | null; now?: () => number });
  /** The app's threshold (ms), used as it is; null: automatic. */
  silenceMs: number | null;
  now: () => number;
  /** The latest packet from the relay, or the join (the clock's ms). */
  heardMs: number;
  private reportMs;
  private gaps;
  /** The transport closed. */
  failed: boolean;
  /** A packet came from the relay; `report` if it was one of its periodic reports. */
  heard(report?: boolean): void;
  /** The transport closed: the relay is gone, for good. */
  fail(): void;
  /** The silence after which the relay counts as gone (ms). */
  get thresholdMs(): number;
  /** Milliseconds since the relay was last heard. */
  silentMs(): number;
  /** Whether the relay counts as gone now. */
  isSilent(): boolean;
}

/** The wait (ms) before rejoin attempt `failures + 1`: doubling from 0.25 s to 8 s, randomised. */
export declare function rejoinDelayMs(failures: number, random?: () => number): number;

/** Why a session rejoined: the relay went silent, its transport closed, or the app asked. */
export type RejoinReason = "silence" | "closed" | "asked";

/** What `onrejoin` is told. */
export interface RejoinInfo {
  reason: RejoinReason;
  previousSessionId: string;
  sessionId: string;
  /** The session's SSRC now (the old one unless someone took it meanwhile). */
  ssrc: number;
  /** How long the relay had been silent (ms). */
  silentMs: number;
  /** Join attempts it took. */
  attempts: number;
  /** Whether it came back by resuming the session (else by joining afresh). */
  resumed: boolean;
}

/** `Session.connect`'s options. */
export interface ConnectOptions {
  /** The relay's HTTP API (default: the page's origin). */
  baseUrl?: string;
  room: string;
  token: string;
  dialect?: Dialect;
  interest?: Interest;
  /** The RoomState to fill (it must speak `dialect`). */
  roomState?: RoomState;
  /** Default: WebTransport where the browser has it, else WebRTC. */
  transport?: "webtransport" | "webrtc";
  /** The silence (ms) after which the relay counts as gone; null or absent: automatic. */
  silenceMs?: number | null;
  /** Whether the watchdog rejoins by itself (default true). */
  autoRejoin?: boolean;
  /** Ask for a room stream (`Session.publishRoom`): its objects outlive the session. */
  roomStream?: boolean;
}

/**
 * A session: join, connect, room state, publish, snapshot request, leave; and a watchdog
 * that rejoins when the relay goes silent or the transport closes.
 */
export declare class Session {
  /** Joins, connects, asks for the room (FIR), then reports every `REPORT_INTERVAL_MS`. */
  static connect(options: ConnectOptions): Promise<Session>;
  private constructor();
  baseUrl: string;
  /** The bearer token; rejoins use the current one, so an app may set a fresh one. */
  token: string;
  /** The current join answer (a rejoin replaces it). */
  answer: JoinAnswer;
  /** What the session holds of the room. */
  room: RoomState;
  roomName: string;
  /** The join body, reused by rejoins. */
  request: JoinRequest;
  /** When connect began (`performance.now()` ms). */
  startedMs: number;
  /** Milliseconds from connect to the first state, once it came. */
  firstStateMs: number | null;
  private seq;
  private roomSeq;
  private firSeq;
  /** Objects it holds (`"ssrc:objectId"`), as the relay's notices said. */
  held: Set<string>;
  /** Called with each ownership notice. */
  onownership: ((notice: OwnershipNotice) => void) | null;
  /** The current transport. */
  conn: WebTransportConnection | WebRtcConnection;
  private reports;
  private watchdog;
  liveness: Liveness;
  /** Rejoins done. */
  rejoins: number;
  /** Called after each rejoin. */
  onrejoin: ((info: RejoinInfo) => void) | null;
  /** Called with the error of each failed rejoin attempt (it is tried again). */
  onrejoinerror: ((error: Error) => void) | null;
  /**
   * Whether the relay ended the session (an RTCP BYE from its own SSRC: the backend closed
   * the room or removed this identity); such a session is not rejoined.
   */
  endedByRelay: boolean;
  /** Called once when the relay ends the session. */
  onended: ((info: { reason: "ended_by_relay" }) => void) | null;
  private generation;
  private rejoining;
  private closing;
  private open;
  private onPacket;
  /** When the relay was last heard (`performance.now()` ms). */
  get lastHeardMs(): number;
  /** Whether the relay seems gone: silent past `liveness.thresholdMs`, or the transport closed. */
  isSilent(): boolean;
  private check;
  /**
   * Rejoins now (a rejoin under way is shared): true once rejoined, false if the session
   * was closed meanwhile.
   */
  rejoin(reason?: RejoinReason): Promise<boolean>;
  private rejoinNow;
  /** Asks the relay for the full state of `media` (default: every stream). */
  requestSnapshot(media?: number): Promise<boolean>;
  /** Publishes objects as one RTP packet of this session's stream. */
  publish(objects: PayloadObject | readonly PayloadObject[], options?: { payloadType?: number }): Promise<boolean>;
  /** Its room stream's SSRC, else null. */
  get roomSsrc(): number | null;
  /** The replay the room plays, as the latest join answer told it; `replayPosition` moves it on. */
  get replay(): ReplayInfo | null;
  /** When the latest join answer came (`performance.now()` ms): when `replay` was true. */
  answeredMs: number | null;
  /** The room this one mirrors and how late, else null. */
  get delayed(): Delayed | null;
  /** Publishes objects on its room stream: they belong to the room and outlive the session. */
  publishRoom(objects: PayloadObject | readonly PayloadObject[], options?: { payloadType?: number }): Promise<boolean>;
  /** Asks the relay for objects, each `[ssrc, objectId]`; answers come to `onownership`. */
  requestObjects(objects: readonly (readonly [number, number | bigint])[]): Promise<void>;
  /** Gives objects it holds back to their streams' publishers. */
  releaseObjects(objects: readonly (readonly [number, number | bigint])[]): Promise<void>;
  private sendOwnership;
  /** Whether it holds object `objectId` of stream `ssrc`, as the relay's last notice said. */
  holds(ssrc: number, objectId: number | bigint): boolean;
  private noteOwnership;
  /** Closes the transport and leaves; stops the watchdog and any rejoin under way. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------
// Presence and the server API

/** Any JSON value: what metadata may be. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A participant as a room's presence shows it (no session ids). */
export interface PresenceParticipant {
  /** Its identity (the tokens' subject). */
  identity: string;
  /** Its metadata (null when none was set). */
  metadata: Json;
  /** The SSRCs its sessions own: what names its streams. */
  ssrcs: number[];
  /** Whether its publishing is suspended. */
  muted: boolean;
}

/** Why a presence watch ended for good. */
export type PresenceEnd = "room_closed" | "relay_stopping" | "refused" | "closed";

/** What `onend` is told, and what `Presence.done` resolves to. */
export interface PresenceEndInfo {
  reason: PresenceEnd;
  /** The refusal (`refused`); null otherwise. */
  error: Error | null;
}

/** The answer the presence watch reads: what it uses of a fetch `Response`. */
export interface FetchResponseLike {
  ok: boolean;
  status: number;
  statusText: string;
  text(): Promise<string>;
  body: {
    getReader(): { read(): Promise<{ done: boolean; value?: Uint8Array }>; cancel(): Promise<void> };
  } | null;
}

/**
 * A fetch as the presence watch calls it (the global one by default; the browser's and
 * Node's fit). `signal` is an AbortSignal.
 */
export type FetchLike = (
  url: string,
  init: { headers: Record<string, string>; cache: "no-store"; signal: any },
) => Promise<FetchResponseLike>;

/** The handlers of a presence watch: given to `watchPresence`, or set on the `Presence`. */
export interface PresenceHandlers {
  /** The whole room, first and after each reconnection (it replaces the state). */
  onsnapshot?: ((presence: Presence) => void) | null;
  onjoin?: ((participant: PresenceParticipant) => void) | null;
  /** Its metadata, mute or sessions changed. */
  onupdate?: ((participant: PresenceParticipant) => void) | null;
  onleave?: ((participant: PresenceParticipant) => void) | null;
  /** The room's metadata changed. */
  onroom?: ((metadata: Json) => void) | null;
  /** After any change of the above. */
  onchange?: ((presence: Presence) => void) | null;
  /** A stream failed or dropped; it is opened again. */
  onerror?: ((error: Error) => void) | null;
  /** Watching ended for good. */
  onend?: ((info: PresenceEndInfo) => void) | null;
}

/**
 * Who is in a room, from `GET /v1/rooms/{room}/presence` (subscribe or admin token),
 * reopened after a drop; made by `watchPresence`.
 */
export declare class Presence {
  private constructor();
  baseUrl: string;
  roomName: string;
  token: string;
  fetchImpl: FetchLike;
  /** Participants by identity. */
  participants: Map<string, PresenceParticipant>;
  /** The room's metadata (null when none was set). */
  metadata: Json;
  /** Whether a stream is open and its snapshot read. */
  connected: boolean;
  /** Streams opened again after one dropped. */
  reconnects: number;
  /** Why watching ended, or null while it goes on. */
  ended: PresenceEnd | null;
  onsnapshot: ((presence: Presence) => void) | null;
  onjoin: ((participant: PresenceParticipant) => void) | null;
  onupdate: ((participant: PresenceParticipant) => void) | null;
  onleave: ((participant: PresenceParticipant) => void) | null;
  onroom: ((metadata: Json) => void) | null;
  onchange: ((presence: Presence) => void) | null;
  onerror: ((error: Error) => void) | null;
  onend: ((info: PresenceEndInfo) => void) | null;
  private bySsrc;
  private abort;
  private reader;
  private wake;
  /** Resolves once watching has ended. */
  done: Promise<PresenceEndInfo>;
  private resolveDone;
  /** The identity whose session owns `ssrc` (its stream), or null. */
  identityOf(ssrc: number): string | null;
  /** Stops watching (`onend` is told `closed`). */
  close(): void;
  private finish;
  private emit;
  private run;
  private stream;
  private apply;
  private index;
}

/** Watches who is in `room`: a subscribe or admin token of it. */
export declare function watchPresence(
  options: ApiTarget & PresenceHandlers & { room: string; fetchImpl?: FetchLike },
): Presence;

/** A room as `GET /v1/rooms` lists it. */
export interface RoomSummary {
  room: string;
  sessions: number;
  participants: number;
  streams: number;
  objects: number;
  metadata: Json;
}

/** A participant as the server API shows it. */
export interface Participant {
  identity: string;
  metadata: Json;
  /** Its sessions' ids. */
  sessions: string[];
  ssrcs: number[];
  /** Whether one of its sessions may publish. */
  publish: boolean;
  /** Whether one of its sessions may subscribe. */
  subscribe: boolean;
  /** Whether its publishing is suspended. */
  muted: boolean;
  /** When its first session joined, Unix milliseconds. */
  joined_at: number;
}

/** What `RoomAdmin.updateParticipant` changes. */
export interface ParticipantUpdate {
  /** false mutes, true unmutes. */
  publish?: boolean;
  /** Its new metadata (null clears it). */
  metadata?: Json;
}

/**
 * The server API with an admin token (of one room, or relay-wide for `listRooms`); every
 * method rejects with `ApiError` when the relay refuses.
 */
export declare class RoomAdmin {
  constructor(baseUrl: string, token: string);
  baseUrl: string;
  token: string;
  private call;
  /** Every room with its counts (relay-wide token). */
  listRooms(): Promise<RoomSummary[]>;
  /** A room's sessions, streams and metadata. */
  getRoom(room: string): Promise<RoomInfo>;
  /** Closes a room: its sessions end, joins are refused for a while. */
  closeRoom(room: string): Promise<void>;
  /** A room's participants (`room_not_found` when it has none). */
  listParticipants(room: string): Promise<Participant[]>;
  /** One participant (`participant_not_found` when it is not there). */
  getParticipant(room: string, identity: string): Promise<Participant>;
  /** Mutes or unmutes it, sets its metadata; resolves to it as it is now. */
  updateParticipant(room: string, identity: string, update?: ParticipantUpdate): Promise<Participant>;
  /** Ends its sessions and refuses its tokens issued until now. */
  removeParticipant(room: string, identity: string): Promise<void>;
  /** Sets the room's metadata (any JSON up to 4096 bytes). */
  setRoomMetadata(room: string, metadata: Json): Promise<void>;
}

// Only what is marked `export` above is exported (a declaration file exports everything
// otherwise).
export {};
