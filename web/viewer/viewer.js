// The live room viewer (served at /viewer): a top-down x/z map of a room's objects moving
// with prediction between updates, and a table of its streams. Token and room come from
// the form or the address (#token=...&room=...; a query works too, but a fragment never
// reaches server logs). See docs/js-client.md, "The viewer".
import * as gs from "/client/gsrelay.js";

const $ = (id) => document.getElementById(id);
const INFO_EVERY_MS = 1000;
const TABLE_EVERY_MS = 250;
const MAX_AHEAD_MS = 1000;
const REPLAY_EVERY_MS = 100;

/** Everything the page shows, and the hook tests and devtools use (window.gsrelayViewer). */
const viewer = {
  room: new gs.RoomState(),
  session: null,
  /** Who is in the room (`watchPresence`), for tokens with the subscribe or admin right. */
  presence: null,
  info: null,
  /** The replay the room plays, if it does (`resetReplay`). */
  replay: null,
  /** The mirror's `{source, delay_ms}`, if the room is a broadcast-delayed mirror. */
  delayed: null,
  drawn: [],
  renders: 0,
  view: null,
  timers: [],
  /** Applies one RTP or RTCP packet, as a transport delivers it. */
  ingest(packet) {
    return viewer.room.ingest(packet);
  },
};
window.gsrelayViewer = viewer;

function setStatus(text, cls = "") {
  const s = $("status");
  s.textContent = text;
  s.className = cls;
}

function readAddress() {
  const params = new URLSearchParams(location.hash.slice(1) || location.search.slice(1));
  const token = params.get("token");
  const room = params.get("room");
  const transport = params.get("transport");
  if (token || room) history.replaceState(null, "", location.pathname);
  return { token, room, transport };
}

/** The live transport: the address's `transport=`, else WebTransport where the browser has it. */
let transport = null;
const TRANSPORT_NAMES = { webtransport: "WebTransport", webrtc: "WebRTC" };

async function start(token, room) {
  await stop();
  viewer.room = new gs.RoomState();
  viewer.info = null;
  resetReplay();
  setupReplay(token, room);
  $("stop").disabled = false;
  setStatus(`joining ${room}…`);
  pollInfo(token, room);
  viewer.timers.push(setInterval(() => pollInfo(token, room), INFO_EVERY_MS));
  watchWho(token, room);
  const wanted = transport ?? (gs.hasWebTransport() ? "webtransport" : "webrtc");
  // Unless the address chose, a relay that does not offer WebTransport is tried over WebRTC.
  const tries = transport || wanted === "webrtc" ? [wanted] : [wanted, "webrtc"];
  for (const [i, chosen] of tries.entries()) {
    try {
      viewer.session = await gs.Session.connect({ room, token, roomState: viewer.room, transport: chosen });
      const shown = (id) => { $("transport").textContent = `${TRANSPORT_NAMES[chosen] ?? chosen}, session ${id}`; };
      shown(viewer.session.answer.session_id);
      replayRead(viewer.session.replay, viewer.session.answeredMs);
      delayedRead(viewer.session.delayed);
      // The relay went silent and the session came back (on the same relay or another).
      viewer.session.onrejoin = ({ sessionId }) => {
        shown(sessionId);
        replayRead(viewer.session.replay, viewer.session.answeredMs);
        setStatus(`live in ${room} (rejoined)`, "live");
      };
      viewer.session.onrejoinerror = () => setStatus("relay silent: rejoining…", "error");
      setStatus(`live in ${room}`, "live");
      return;
    } catch (e) {
      const pending = e instanceof gs.ApiError && e.code === "unsupported_transport";
      if (pending && i + 1 < tries.length) continue;
      if (e instanceof gs.ApiError && e.code === "room_read_only") {
        $("transport").textContent = "this room is a replay or a mirror: watch it with a token without the publish right";
        setStatus(`watching ${room} (inspection)`);
        return;
      }
      $("transport").textContent = pending
        ? `not offered by this relay yet (${e.code}): showing room inspection only`
        : `failed: ${e.message}`;
      setStatus(pending ? `watching ${room} (inspection)` : "live transport failed", pending ? "" : "error");
    }
  }
}

async function stop() {
  viewer.timers.forEach(clearInterval);
  viewer.timers = [];
  viewer.presence?.close();
  viewer.presence = null;
  const s = viewer.session;
  viewer.session = null;
  if (s) await s.close();
  $("stop").disabled = true;
}

/** Room inspection: 404 is an empty room; 403 (no admin right) stops asking. */
async function pollInfo(token, room) {
  try {
    const askedAt = performance.now();
    viewer.info = await gs.roomInfo({ room, token });
    if (!viewer.replay.dragging) replayRead(viewer.info.replay, askedAt);
    delayedRead(viewer.info.delayed);
  } catch (e) {
    const empty = e instanceof gs.ApiError && e.status === 404;
    viewer.info = empty ? { room, sessions: [], streams: [] } : { error: e };
    if (e instanceof gs.ApiError && e.status === 403) {
      viewer.timers.forEach(clearInterval);
      viewer.timers = [];
    }
  }
}

/** Presence names the streams (SSRC → identity) with a subscribe token, no admin needed. */
function watchWho(token, room) {
  const claims = gs.tokenClaims(token);
  if (claims && !claims.subscribe && !claims.admin) return;
  viewer.presence = gs.watchPresence({
    room,
    token,
    onend: ({ reason }) => {
      if (reason === "room_closed") setStatus(`room ${room} closed`, "error");
    },
  });
}

// ---------------------------------------------------------------------------------------
// Map

/** A colour per stream: the SSRC's bits mixed (murmur3's finaliser) into a hue. */
function colour(ssrc, alpha = 1) {
  let h = ssrc >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  const hue = ((h ^ (h >>> 16)) >>> 0) % 360;
  return `hsla(${hue}, 75%, 62%, ${alpha})`;
}

/** Every object with a position, where prediction puts it now. */
function positions(now) {
  const out = [];
  for (const { ssrc, key, object } of viewer.room.objects()) {
    const p = gs.predict(object, now, { maxAheadMs: MAX_AHEAD_MS });
    if (!p.position || !p.position.every(Number.isFinite)) continue;
    const yaw = p.rotation ? gs.yawOf(p.rotation) : null;
    out.push({ ssrc, key, type: object.type, left: object.left, x: p.position[0], z: p.position[2], yaw });
  }
  return out;
}

function niceStep(span) {
  const raw = span / 8;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
}

/** Eases the view towards the extent of the objects, so the map does not jump. */
function updateView(items, w, h) {
  let [minX, maxX, minZ, maxZ] = [-2, 2, -2, 2];
  for (const it of items) {
    minX = Math.min(minX, it.x); maxX = Math.max(maxX, it.x);
    minZ = Math.min(minZ, it.z); maxZ = Math.max(maxZ, it.z);
  }
  const target = {
    cx: (minX + maxX) / 2,
    cz: (minZ + maxZ) / 2,
    scale: Math.min(w / ((maxX - minX) * 1.3), h / ((maxZ - minZ) * 1.3)),
  };
  const v = viewer.view ?? target;
  const ease = (a, b) => a + (b - a) * 0.1;
  viewer.view = { cx: ease(v.cx, target.cx), cz: ease(v.cz, target.cz), scale: ease(v.scale, target.scale) };
  return viewer.view;
}

function drawGrid(ctx, v, w, h) {
  const step = niceStep(w / v.scale);
  const toX = (x) => w / 2 + (x - v.cx) * v.scale;
  const toY = (z) => h / 2 + (z - v.cz) * v.scale;
  ctx.lineWidth = 1;
  ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
  ctx.fillStyle = "#56627a";
  const x0 = Math.floor((v.cx - w / 2 / v.scale) / step) * step;
  const z0 = Math.floor((v.cz - h / 2 / v.scale) / step) * step;
  for (let x = x0; toX(x) < w; x += step) {
    ctx.strokeStyle = Math.abs(x) < step / 2 ? "#3b4a60" : "#1c2430";
    ctx.beginPath(); ctx.moveTo(toX(x), 0); ctx.lineTo(toX(x), h); ctx.stroke();
    ctx.fillText(`${+x.toFixed(6)} m`, toX(x) + 3, h - 6);
  }
  for (let z = z0; toY(z) < h; z += step) {
    ctx.strokeStyle = Math.abs(z) < step / 2 ? "#3b4a60" : "#1c2430";
    ctx.beginPath(); ctx.moveTo(0, toY(z)); ctx.lineTo(w, toY(z)); ctx.stroke();
    ctx.fillText(`z ${+z.toFixed(6)}`, 4, toY(z) - 3);
  }
  return { toX, toY };
}

function drawObject(ctx, it, X, Y, r) {
  ctx.fillStyle = colour(it.ssrc);
  ctx.strokeStyle = colour(it.ssrc, 0.9);
  ctx.beginPath();
  switch (it.type) {
    case "Head1":
      ctx.arc(X, Y, r, 0, 2 * Math.PI);
      break;
    case "Hand1": case "Hand2":
      ctx.arc(X, Y, r * 0.5, 0, 2 * Math.PI);
      break;
    case "SixDOF1":
      ctx.moveTo(X, Y - r * 0.8); ctx.lineTo(X + r * 0.7, Y + r * 0.6); ctx.lineTo(X - r * 0.7, Y + r * 0.6);
      break;
    case "Mesh2":
      ctx.moveTo(X, Y - r); ctx.lineTo(X + r, Y); ctx.lineTo(X, Y + r); ctx.lineTo(X - r, Y);
      break;
    default:
      ctx.rect(X - r * 0.7, Y - r * 0.7, r * 1.4, r * 1.4);
  }
  ctx.closePath();
  ctx.fill();
  if (it.yaw !== null && it.type !== "Hand1" && it.type !== "Hand2") {
    // Heading: forward is −z, drawn up the map.
    ctx.lineWidth = 2 * devicePixelRatio;
    ctx.beginPath();
    ctx.moveTo(X, Y);
    ctx.lineTo(X - Math.sin(it.yaw) * r * 2, Y - Math.cos(it.yaw) * r * 2);
    ctx.stroke();
  }
  const hand = it.type.startsWith("Hand") ? (it.left ? " L" : " R") : "";
  ctx.fillStyle = "#d8dee9";
  ctx.fillText(`${it.type} ${it.key}${hand}`, X + r + 3, Y + 4);
}

function drawMap() {
  const canvas = $("map");
  const w = (canvas.width = Math.round(canvas.clientWidth * devicePixelRatio));
  const h = (canvas.height = Math.round(canvas.clientHeight * devicePixelRatio));
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, w, h);
  const items = positions(Date.now());
  const v = updateView(items, w, h);
  const { toX, toY } = drawGrid(ctx, v, w, h);
  const r = 7 * devicePixelRatio;
  ctx.font = `${12 * devicePixelRatio}px system-ui, sans-serif`;
  for (const it of items) drawObject(ctx, it, toX(it.x), toY(it.z), r);
  viewer.drawn = items;
  canvas.dataset.drawn = String(items.length);
  $("map-note").textContent = items.length
    ? `${items.length} positioned objects; x to the right, z down; positions predicted from Loc2 rates between updates`
    : "no positioned objects yet";
  requestAnimationFrame(drawMap);
}

// ---------------------------------------------------------------------------------------
// Table and summary

function cell(text, swatch) {
  const td = document.createElement("td");
  if (swatch) {
    const s = document.createElement("span");
    s.className = "swatch";
    s.style.background = swatch;
    td.append(s);
  }
  td.append(String(text));
  return td;
}

function renderTable() {
  viewer.renders++;
  const info = viewer.info && !viewer.info.error ? viewer.info : null;
  const rows = new Map();
  for (const s of info?.streams ?? []) rows.set(s.ssrc, { ssrc: s.ssrc, objects: s.objects, bytes: s.bytes });
  for (const s of viewer.room.streams.values()) {
    const row = rows.get(s.ssrc) ?? { ssrc: s.ssrc, bytes: "—" };
    row.objects = s.objects.size;
    row.rate = viewer.room.rate(s.ssrc).toFixed(1);
    rows.set(s.ssrc, row);
  }
  const identity = new Map((info?.sessions ?? []).map((s) => [s.ssrc, s.identity]));
  const who = viewer.presence;
  const identityOf = (ssrc) => who?.identityOf(ssrc) ?? identity.get(ssrc);
  const body = $("streams").tBodies[0];
  body.replaceChildren(
    ...[...rows.values()].sort((a, b) => a.ssrc - b.ssrc).map((r) => {
      const tr = document.createElement("tr");
      tr.dataset.ssrc = String(r.ssrc);
      tr.append(cell(r.ssrc, colour(r.ssrc)), cell(identityOf(r.ssrc) ?? "—"), cell(r.objects ?? "—"),
        cell(r.rate ?? "—"), cell(r.bytes ?? "—"));
      return tr;
    }),
  );
  const people = who ? [...who.participants.values()] : [];
  $("participants").textContent = people.length
    ? people.map((p) => `${p.identity}${p.muted ? " (muted)" : ""}`).sort().join(", ")
    : who?.connected ? "none" : "—";
  const live = viewer.room.objectCount;
  const relay = (info?.streams ?? []).reduce((n, s) => n + s.objects, 0);
  $("objects-count").textContent = live ? String(live) : info ? `${relay} (relay cache)` : "0";
  const s = viewer.session;
  $("snapshot").textContent = s && s.firstStateMs !== null
    ? `${s.firstStateMs.toFixed(0)} ms to first state` : "—";
  const infoError = viewer.info?.error;
  if (infoError && infoError.status !== 403) setStatus(`room info: ${infoError.message}`, "error");
  const rooms = $("rooms");
  if (info && ![...rooms.options].some((o) => o.value === info.room)) rooms.append(new Option(info.room));
}

// ---------------------------------------------------------------------------------------
// Replays and mirrors: the scrubber under the map, and the delay badge

/**
 * What the page knows of the replay the room plays: its status as last read (`status`:
 * the join answer's `replay`, then room info's or a control's answer) and when
 * (`readAt`, performance.now() ms), from which the position shown is extrapolated
 * between reads; `admin` when the token may control it; `dragging` while the user holds
 * the scrubber or its seek is under way, so that a read does not pull it from under the
 * pointer; `controlledAt`, when a control's answer came, so that a room info asked for
 * before it, and answered after, is not taken for news.
 */
function resetReplay() {
  viewer.replay = { status: null, readAt: 0, controlledAt: 0, admin: false, dragging: false, token: null, room: null };
  viewer.delayed = null;
  $("replay").hidden = true;
  $("delayed").hidden = true;
}

/**
 * A replay's status (from a join answer, room info or a control's answer), as it was at
 * `readAt` (performance.now() ms): when its answer came, or when a room inspection was
 * asked for (the relay answers within a round trip of it).
 */
function replayRead(status, readAt = performance.now()) {
  if (!status || readAt < viewer.replay.controlledAt) return;
  viewer.replay.status = status;
  viewer.replay.readAt = readAt;
  const scrub = $("replay-scrub");
  scrub.max = String(status.duration_ms);
  $("replay-speed").value = String(status.speed);
  $("replay-play").textContent = status.paused || status.ended ? "Play" : "Pause";
  $("replay").hidden = false;
  renderReplay();
}

/** A mirror's delay (from a join answer or room info): the badge. */
function delayedRead(delayed) {
  if (!delayed) return;
  viewer.delayed = delayed;
  const badge = $("delayed");
  badge.textContent = `delayed ${+(delayed.delay_ms / 1000).toFixed(1)}s`;
  badge.title = `a broadcast-delayed mirror of room ${delayed.source}: nothing shown is newer than ${delayed.delay_ms} ms ago`;
  badge.dataset.delayMs = String(delayed.delay_ms);
  badge.hidden = false;
}

function clock(ms) {
  const s = ms / 1000;
  return `${Math.floor(s / 60)}:${(s % 60).toFixed(1).padStart(4, "0")}`;
}

/** The scrubber's position: extrapolated from the last read at the replay's speed. */
function renderReplay() {
  const r = viewer.replay;
  if (!r.status) return;
  const at = gs.replayPosition(r.status, performance.now() - r.readAt);
  const scrub = $("replay-scrub");
  if (!r.dragging) scrub.value = String(Math.round(at));
  const state = r.status.ended ? " (ended)" : r.status.paused ? " (paused)" : "";
  $("replay-time").textContent = `${clock(Number(scrub.value))} / ${clock(r.status.duration_ms)}${state}`;
  viewer.replayShownMs = Number(scrub.value);
}

/** Applies a control to the relay's replay (admin only) and shows its answer. */
async function controlReplay(change) {
  const r = viewer.replay;
  if (!r.admin) return;
  try {
    const status = await gs.controlReplay({ room: r.room, token: r.token, ...change });
    r.controlledAt = performance.now();
    replayRead(status);
    $("replay-note").textContent = "";
  } catch (e) {
    $("replay-note").textContent = `replay: ${e.message}`;
  }
}

/** The controls: enabled for a token with the admin right, else shown read-only. */
function setupReplay(token, room) {
  const r = viewer.replay;
  r.token = token;
  r.room = room;
  r.admin = gs.tokenClaims(token)?.admin === true;
  const box = $("replay");
  box.classList.toggle("read-only", !r.admin);
  for (const id of ["replay-play", "replay-scrub", "replay-speed"]) $(id).disabled = !r.admin;
  $("replay-note").textContent = r.admin ? "" : "read-only: an admin token controls the replay";
}

function initReplayControls() {
  const speed = $("replay-speed");
  for (const s of gs.REPLAY_SPEEDS) speed.append(new Option(`${s}x`, String(s)));
  const scrub = $("replay-scrub");
  // `input` fires while dragging, `change` once on release: only the release seeks.
  scrub.addEventListener("input", () => { viewer.replay.dragging = true; renderReplay(); });
  scrub.addEventListener("change", () => {
    controlReplay({ seekMs: Math.round(Number(scrub.value)) }).finally(() => { viewer.replay.dragging = false; });
  });
  speed.addEventListener("change", () => controlReplay({ speed: Number(speed.value) }));
  $("replay-play").addEventListener("click", () => {
    const s = viewer.replay.status;
    if (s) controlReplay({ paused: !(s.paused || s.ended) });
  });
  setInterval(renderReplay, REPLAY_EVERY_MS);
}

// ---------------------------------------------------------------------------------------
// Start

function init() {
  $("version").textContent = `gsrelay client ${gs.VERSION} · WebTransport ${gs.hasWebTransport() ? "available" : "unavailable"} in this browser`;
  const address = readAddress();
  const { token, room } = address;
  transport = address.transport;
  if (token) $("token").value = token;
  const claims = token ? gs.tokenClaims(token) : null;
  if (room || claims?.room) $("room").value = room ?? claims.room;
  $("token").addEventListener("change", () => {
    const c = gs.tokenClaims($("token").value);
    if (c?.room && !$("room").value) $("room").value = c.room;
  });
  $("join").addEventListener("submit", (e) => {
    e.preventDefault();
    start($("token").value.trim(), $("room").value.trim());
  });
  $("stop").addEventListener("click", () => stop().then(() => setStatus("stopped")));
  resetReplay();
  initReplayControls();
  setInterval(renderTable, TABLE_EVERY_MS);
  requestAnimationFrame(drawMap);
  if ($("token").value && $("room").value) start($("token").value.trim(), $("room").value.trim());
}

init();
