//! The JavaScript client's codec (`web/client/gsrelay.js`), run by Node: against the
//! reference implementation's interop vectors, against garbage, and against the Rust codec
//! in both directions (Rust encodes → JS decodes and re-encodes; JS encodes → Rust and
//! `gsrelay decode` read them alike), and prediction against
//! `crates/core/src/wire/predict.rs`; the room state and transport framing
//! (`web/test/state.mjs`); the session's silence watchdog and rejoin over stand-in
//! transports (`web/test/liveness.mjs`). Needs `node` (scripts/test.sh installs it).

use gsrelay::wire::{self, Dialect, Object, predict};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `node web/test/<script>` with `args`, feeding `stdin`.
fn node(script: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new("node")
        .arg(root().join("web/test").join(script))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run node ({e}): run scripts/test.sh, which installs it")
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The "N passed, M failed" closing line of a script's output.
fn tally(out: &Output) -> (u64, u64) {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.ends_with(" failed"))
        .unwrap_or_else(|| panic!("no closing line in {text}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (n[0], n[1])
}

fn vectors_dir() -> PathBuf {
    std::env::var_os("GSRELAY_GSE_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/interop/gse"))
}

#[test]
fn js_codec_matches_the_gse_vectors_and_survives_garbage() {
    let dir = vectors_dir();
    assert!(
        dir.join("objects.json").is_file(),
        "gse interop vectors not found at {} (set GSRELAY_GSE_VECTORS)",
        dir.display()
    );
    let out = node("vectors.mjs", &[dir.to_str().unwrap()], "");
    let (passed, failed) = tally(&out);
    assert_eq!(failed, 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success());
    // Every vector file is read: the float16 sweep alone holds 14 240 rows.
    assert!(passed > 14_240, "only {passed} checks ran");
}

/// A corpus in the JSON form, every type the Rust codec knows in each dialect, including
/// unknown tags, extension bytes, NaN payloads, 64-bit IDs and containers.
fn rust_corpus(d: Dialect) -> Vec<Vec<Object>> {
    let loc = json!({"x": 1.5, "y": -2.25, "z": 1e-3, "vx": 0.5, "vy": 0, "vz": -1});
    let rot = json!({"si": 0.1, "sj": 0.2, "sk": 0.3, "ei": 0.15, "ej": 0.25, "ek": -0.35});
    let t = json!({"tx": 0.01, "ty": -0.02, "tz": 0.03});
    let finger = json!({"tip": t, "dip": t, "pip": t, "mcp": t, "cmc": t});
    let mut objects = vec![
        json!({"type": "Head1", "id": 1, "time": 1280, "location": loc, "rotation": rot}),
        json!({"type": "Head1", "id": u64::MAX, "time": 65535, "location": loc, "rotation": rot, "ipd": 0.0625}),
        json!({"type": "Head1", "id": 9, "time": 0, "location": {"x": "NaN:0x7fc02000", "y": "Infinity", "z": "-Infinity", "vx": "NaN", "vy": 0, "vz": 0}, "rotation": rot}),
        json!({"type": "Hand1", "id": 300, "time": 2, "left": true, "location": loc, "rotation": rot}),
        json!({"type": "Hand2", "id": 7, "time": 3, "left": false, "location": loc, "rotation": rot, "wrist": t,
               "thumb": {"tip": t, "ip": t, "mcp": t, "cmc": t}, "index": finger, "middle": finger, "ring": finger, "pinky": finger}),
        json!({"type": "HeadIPD1", "ipd": 0.064}),
        json!({"type": "Unknown", "tag": 16384, "data": "05aabbcc"}),
        json!({"type": "Unknown", "tag": 1u64 << 40, "data": ""}),
    ];
    let specific = match d {
        Dialect::Draft01 => vec![
            json!({"type": "Object1", "id": 12, "time": 4, "position": {"x": 1, "y": 2, "z": 3}, "rotation": {"i": 0, "j": 0.5, "k": 0}, "scale": 2, "active": true, "parent": 11}),
            json!({"type": "Object2", "id": 14, "time": 5, "location": loc, "rotation": rot, "scale": loc, "active": false, "parent": 1u64 << 60}),
            json!({"type": "Mesh1", "id": 15, "texture": {"url": "t.png"}, "vertices": [{"x": 0, "y": 0, "z": 0}, {"x": 1, "y": 0, "z": 0}, {"x": 0, "y": 1, "z": 0}],
                   "normals": [{"x": 0, "y": 0, "z": 1}], "textures": [{"u": 0.5, "v": 0.25}], "triangles": [0, 1, 2]}),
            json!({"type": "Mesh1", "id": 16, "texture": {"rtpPT": 97}, "vertices": [], "normals": [], "textures": [], "triangles": []}),
            json!({"type": "Mesh2", "id": 17, "location": loc, "rotation": rot, "scale": loc, "meshUrl": "m.glb", "texture": {"url": "t.png"}, "parent": 3}),
            json!({"type": "Mesh2", "id": 18, "location": loc, "rotation": rot, "scale": loc, "meshUrl": "m.glb", "texture": {"rtpPT": 96}}),
            json!({"type": "GameControl1", "id": 20, "time": 6, "buttons": -5, "buttonsTime": 2, "left": {"x": -1, "y": 1}, "right": {"x": 0.5, "y": -0.5}}),
            json!({"type": "GameControl1", "id": 21, "time": 6, "buttons": i64::MIN, "buttonsTime": 2, "left": {"x": 0, "y": 0}, "right": {"x": 0, "y": 0}}),
            json!({"type": "ThreeDOF1", "id": 22, "time": 7, "left": true, "rotation": rot}),
            json!({"type": "SixDOF1", "id": 23, "time": 8, "left": false, "location": loc, "rotation": rot, "pointer": {"x": 1, "y": 2, "z": 3}}),
            json!({"type": "SixDOF1", "id": 24, "time": 8, "left": true, "location": loc, "rotation": rot, "pointer": {"x": 1, "y": 2, "z": 3, "bare": true}}),
            json!({"type": "Hand1", "id": 25, "time": 9, "left": true, "location": loc, "rotation": rot, "extra": "7f0101"}),
        ],
        Dialect::Gse => vec![
            json!({"type": "Object1", "id": 12, "time": 4, "position": {"x": 1, "y": 2, "z": 3}, "rotation": {"i": 0, "j": 0.5, "k": 0}, "scale": {"x": 1, "y": 2, "z": 3}, "active": true, "parent": 11}),
            json!({"type": "Mesh1", "id": 15, "vertices": [{"x": 0, "y": 0, "z": 0}], "normals": [{"x": 0, "y": 0, "z": 1}], "textures": [{"u": 3, "v": 4}], "triangles": [0, 0, 0]}),
            json!({"type": "Hand1", "id": 25, "time": 9, "left": true, "location": loc, "rotation": rot, "extra": "0102"}),
            json!({"type": "Unknown", "tag": 131, "data": "0102"}),
        ],
    };
    objects.extend(specific);
    let parsed: Vec<Object> = objects
        .iter()
        .map(|o| serde_json::from_value(o.clone()).unwrap_or_else(|e| panic!("{o}: {e}")))
        .collect();
    let mut payloads: Vec<Vec<Object>> = parsed.iter().map(|o| vec![o.clone()]).collect();
    payloads.push(parsed.clone());
    let container = json!({"type": "Container", "ssrc": 0xfeed_beef_u32, "objects": objects});
    payloads.push(vec![serde_json::from_value(container).unwrap()]);
    payloads
}

/// What `crates/core/src/wire/predict.rs` makes of `o` a quarter second, a second and a
/// half, and a tenth of a second before its Time1 (wrapping), for JS to reproduce.
fn predictions(o: &Object) -> Value {
    let time = match o {
        Object::Head1(h) => h.time,
        Object::Hand1(h) => h.time,
        Object::Object2(o) => o.time,
        Object::SixDof1(s) => s.time,
        Object::ThreeDof1(t) => t.time,
        _ => 0,
    };
    [250u16, 1500, 65436]
        .iter()
        .map(|dt| {
            let now = time.wrapping_add(*dt);
            let p = predict::predict(o, now);
            json!({"now": now, "position": p.position, "rotation": p.rotation, "scale": p.scale})
        })
        .collect()
}

/// Asserts that JS's prediction matches Rust's within `tolerance` (Rust computes in f32,
/// JS in f64; slerp extrapolated past Rot2's one second amplifies f32 rounding to ~1e-4).
fn assert_close(rust: &Value, js: &Value, tolerance: f64, what: &str) {
    match (rust, js) {
        (Value::Array(r), Value::Array(j)) => {
            assert_eq!(r.len(), j.len(), "{what}");
            for (r, j) in r.iter().zip(j) {
                assert_close(r, j, tolerance, what);
            }
        }
        (Value::Number(r), Value::Number(j)) => {
            let (r, j) = (r.as_f64().unwrap(), j.as_f64().unwrap());
            let bound = tolerance * r.abs().max(1.0);
            assert!((r - j).abs() <= bound, "{what}: Rust {r}, JS {j}");
        }
        (r, j) => assert_eq!(r, j, "{what}"),
    }
}

fn dialect(name: &str) -> Dialect {
    name.parse().unwrap()
}

/// The JSON form of objects, for comparing Rust's reading of one payload with JS's.
fn json_form(objects: &[Object]) -> Value {
    serde_json::to_value(objects).unwrap()
}

#[test]
fn js_and_rust_codecs_agree_in_both_directions() {
    let mut cases = Vec::new();
    for d in [Dialect::Draft01, Dialect::Gse] {
        for objects in rust_corpus(d) {
            let bytes = wire::encode(&objects, d).unwrap();
            cases.push(json!({"dialect": d.to_string(), "hex": hex::encode(&bytes),
                              "json": serde_json::to_string(&objects).unwrap(),
                              "predict": predictions(&objects[0])}));
        }
    }
    let out = node("cross.mjs", &[], &json!({ "cases": cases }).to_string());
    assert!(out.status.success());
    let answer: Value = serde_json::from_slice(&out.stdout).expect("cross.mjs prints JSON");

    // Rust → JS: JS decodes every payload to the same objects, and writes the same bytes
    // from them and from Rust's JSON form.
    let decoded = answer["decoded"].as_array().unwrap();
    assert_eq!(decoded.len(), cases.len());
    let mut predicted = 0;
    for (case, js) in cases.iter().zip(decoded) {
        let hex = case["hex"].as_str().unwrap();
        assert!(js.get("error").is_none(), "{hex}: JS refused it: {js}");
        let d = dialect(case["dialect"].as_str().unwrap());
        let rust = wire::decode(&hex::decode(hex).unwrap(), d).unwrap();
        let from_js: Vec<Object> = serde_json::from_str(js["json"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{hex}: JS's JSON form does not parse: {e}: {js}"));
        assert_eq!(
            json_form(&from_js),
            json_form(&rust),
            "{hex}: decoded objects"
        );
        assert_eq!(js["hex"], hex, "JS decode → encode");
        predicted += case["predict"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["position"].is_array() || r["rotation"].is_array())
            .count();
        for (r, j) in case["predict"]
            .as_array()
            .unwrap()
            .iter()
            .zip(js["predict"].as_array().unwrap())
        {
            for (part, tolerance) in [("position", 1e-6), ("rotation", 1e-3), ("scale", 1e-6)] {
                let what = format!("{hex}: {part} at {}", r["now"]);
                assert_close(&r[part], &j[part], tolerance, &what);
            }
        }
        assert_eq!(js["from_json_hex"], hex, "JS encode of Rust's JSON form");
    }

    assert!(predicted >= 30, "only {predicted} predictions compared");

    // JS → Rust: Rust writes the same bytes from the objects JS built, and reads JS's
    // bytes to the objects JS reads from them (Float16 fields rounded alike).
    let produced = answer["produced"].as_array().unwrap();
    assert!(produced.len() >= 40, "{} payloads", produced.len());
    for p in produced {
        let hex = p["hex"].as_str().unwrap();
        let d = dialect(p["dialect"].as_str().unwrap());
        let bytes = hex::decode(hex).unwrap();
        let rust = wire::decode(&bytes, d).unwrap_or_else(|e| panic!("{hex}: {e}"));
        let built: Vec<Object> = serde_json::from_str(p["json"].as_str().unwrap()).unwrap();
        assert_eq!(
            wire::encode(&built, d).unwrap(),
            bytes,
            "{hex}: Rust encode"
        );
        let read: Vec<Object> = serde_json::from_str(p["decoded_json"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{hex}: {e}: {}", p["decoded_json"]));
        assert_eq!(json_form(&rust), json_form(&read), "{hex}");
        assert_eq!(
            wire::encode(&rust, d).unwrap(),
            bytes,
            "{hex}: Rust re-encode"
        );
    }
    // What JS refuses to write, Rust refuses too (and JS never throws anything else).
    let refusals = answer["refusals"].as_array().unwrap();
    assert!(refusals.len() >= 7);
    for r in refusals {
        assert_eq!(r["js"], "refused", "{r}");
        let rust = serde_json::from_str::<Vec<Object>>(r["json"].as_str().unwrap())
            .map_err(|e| e.to_string())
            .and_then(|o| {
                wire::encode(&o, dialect(r["dialect"].as_str().unwrap())).map_err(|e| e.to_string())
            });
        assert!(rust.is_err(), "Rust accepts what JS refuses: {r}");
    }

    // And the CLI a user has: `gsrelay decode` prints the objects JS meant.
    for p in produced
        .iter()
        .filter(|p| p["hex"].as_str().unwrap().len() > 400)
    {
        let out = Command::new(env!("CARGO_BIN_EXE_gsrelay"))
            .args([
                "decode",
                "--dialect",
                p["dialect"].as_str().unwrap(),
                "--hex",
            ])
            .arg(p["hex"].as_str().unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
        let printed: Vec<Object> = serde_json::from_value(printed).unwrap();
        let read: Vec<Object> = serde_json::from_str(p["decoded_json"].as_str().unwrap()).unwrap();
        assert_eq!(json_form(&printed), json_form(&read));
    }
}

#[test]
fn js_room_state_and_framing() {
    let out = node("state.mjs", &[], "");
    let (passed, failed) = tally(&out);
    assert_eq!(failed, 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success() && passed >= 37, "{passed} checks");
}

#[test]
fn js_session_rejoins_when_the_relay_goes_silent() {
    let out = node("liveness.mjs", &[], "");
    let (passed, failed) = tally(&out);
    assert_eq!(failed, 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success() && passed >= 53, "{passed} checks");
}

#[test]
fn js_session_speaks_ownership_with_the_relays_codec() {
    use gsrelay::handover::{self, Entry, Kind, Reason};
    use gsrelay::rtp::rtcp::{self, RtcpItem};
    let notice = |kind: Kind, entries: &[Entry]| {
        let mut data = Vec::new();
        handover::encode(entries, &mut data);
        let mut p = Vec::new();
        rtcp::write_app(&mut p, kind.subtype(), 0x9999, handover::NAME, &data).unwrap();
        hex(&p)
    };
    let big = (1u64 << 60) + 3;
    let granted = notice(Kind::Granted, &[Entry::new(0x7777, 9)]);
    let refused = notice(
        Kind::Refused,
        &[Entry {
            reason: Reason::Contended,
            ..Entry::new(0x7777, big)
        }],
    );
    let lost = notice(
        Kind::Lost,
        &[Entry {
            reason: Reason::Gone,
            ..Entry::new(0x7777, 9)
        }],
    );
    let out = node("ownership.mjs", &[&granted, &refused, &lost], "");
    let (passed, failed) = tally(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(failed, 0, "{stdout}");
    assert!(out.status.success() && passed >= 13, "{passed} checks");
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("the request");
    let v: Value = serde_json::from_str(line).unwrap();
    let bytes = unhex(v["request"].as_str().unwrap());
    let items = rtcp::parse_compound(&bytes).unwrap();
    let [
        RtcpItem::App {
            subtype,
            ssrc,
            name,
            data,
        },
    ] = &items[..]
    else {
        panic!("{items:?}");
    };
    assert_eq!(
        (*subtype, *ssrc, *name),
        (Kind::Request.subtype(), 0x1111, handover::NAME)
    );
    let entries: Vec<Entry> = handover::decode(data).unwrap().collect();
    assert_eq!(
        entries,
        vec![Entry::new(0x7777, 9), Entry::new(0x7777, big)]
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}
