//! Every vector produced by the reference implementation (cisco/gse), read from
//! `$GSRELAY_GSE_VECTORS` (default `../shared/interop/gse`).

use gsrelay::wire::float16;
use gsrelay::wire::reader::Reader;
use gsrelay::wire::writer::WriteExt;
use gsrelay::wire::{self, DecodeError, Dialect, Object, ObjectKind};
use half::f16;
use serde_json::{Map, Value};
use std::path::PathBuf;

fn vectors_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("GSRELAY_GSE_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/interop/gse"));
    if dir.join("objects.json").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "\n*** SKIPPED: gse interop vectors not found at {} (set GSRELAY_GSE_VECTORS) ***\n",
            dir.display()
        );
        None
    }
}

/// The `vectors` array of one file, or `None` (loudly) when the directory is absent.
fn vectors(file: &str) -> Option<Vec<Value>> {
    let path = vectors_dir()?.join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("vector file is JSON");
    Some(v["vectors"].as_array().expect("vectors array").clone())
}

fn bytes(v: &Value) -> Vec<u8> {
    hex::decode(v["hex"].as_str().expect("hex")).expect("valid hex")
}

fn name(v: &Value) -> &str {
    v["name"].as_str().unwrap_or("?")
}

fn bits32(v: &Value) -> u32 {
    u32::from_str_radix(v.as_str().expect("bits").trim_start_matches("0x"), 16).expect("hex bits")
}

fn bits16(v: &Value) -> u16 {
    u16::from_str_radix(v.as_str().expect("bits").trim_start_matches("0x"), 16).expect("hex bits")
}

/// Every vector of `file` (a variable-length integer) reads with `read` to its `value` and
/// `encoded_length`, and `write` writes the value back as `gse_reencodes_as` (default: the
/// vector's own bytes).
fn check_var_vectors<T: PartialEq + std::fmt::Debug + Copy>(
    file: &str,
    read: impl Fn(&mut Reader) -> Result<T, DecodeError>,
    value: impl Fn(&Value) -> Option<T>,
    write: impl Fn(&mut Vec<u8>, T),
) {
    let Some(vs) = vectors(file) else {
        return;
    };
    for v in &vs {
        let b = bytes(v);
        let mut r = Reader::new(&b);
        let got = read(&mut r).unwrap_or_else(|e| panic!("{}: {e}", name(v)));
        assert_eq!(got, value(&v["fields"]["value"]).unwrap(), "{}", name(v));
        assert_eq!(
            b.len() - r.remaining(),
            v["fields"]["encoded_length"].as_u64().unwrap() as usize
        );
        let mut out = Vec::new();
        write(&mut out, got);
        let expect = v
            .get("gse_reencodes_as")
            .and_then(Value::as_str)
            .unwrap_or(v["hex"].as_str().unwrap());
        assert_eq!(hex::encode(out), expect, "{}", name(v));
    }
}

#[test]
fn varuint_vectors_decode_and_reencode_minimally() {
    check_var_vectors(
        "varuint.json",
        |r| r.varuint(),
        Value::as_u64,
        Vec::put_varuint,
    );
}

#[test]
fn varint_vectors_decode_and_reencode_minimally() {
    check_var_vectors(
        "varint.json",
        |r| r.varint(),
        Value::as_i64,
        Vec::put_varint,
    );
}

#[test]
fn primitive_vectors_decode() {
    let Some(vs) = vectors("primitives.json") else {
        return;
    };
    for v in &vs {
        let b = bytes(v);
        let mut r = Reader::new(&b);
        let want = &v["fields"]["value"];
        let ty = v["type"].as_str().unwrap().split(' ').next().unwrap();
        let got: Value = match ty {
            "UInt8" => r.u8().unwrap().into(),
            "UInt16" => r.u16().unwrap().into(),
            "UInt32" => r.u32().unwrap().into(),
            "UInt64" => r.u64().unwrap().into(),
            "Int8" => r.i8().unwrap().into(),
            "Int16" => r.i16().unwrap().into(),
            "Int32" => r.i32().unwrap().into(),
            "Int64" => r.i64().unwrap().into(),
            "Float16" => f64::from(r.f16().unwrap()).into(),
            "Float32" => f64::from(r.f32().unwrap()).into(),
            "Float64" => r.f64().unwrap().into(),
            "Boolean" => r.boolean(true).unwrap().into(),
            "String" => r.string().unwrap().into(),
            "Blob" => hex::encode(r.blob().unwrap()).into(),
            other => panic!("unhandled primitive type {other}"),
        };
        assert!(r.is_empty(), "{} not fully consumed", name(v));
        match (want.as_f64(), got.as_f64()) {
            (Some(w), Some(g)) if ty.starts_with("Float") => {
                assert_eq!(w.to_bits(), g.to_bits(), "{}", name(v))
            }
            _ => assert_eq!(&got, want, "{}", name(v)),
        }
    }
}

/// Float16 encoding is IEEE round-to-nearest-even in both dialects; gse rounds ties away
/// from zero and truncates subnormals, so where the vector says gse differs, we check the
/// IEEE reference instead and count the differences.
#[test]
fn float16_vectors_follow_ieee() {
    let Some(vs) = vectors("float16.json") else {
        return;
    };
    let mut gse_differs = 0;
    for v in &vs {
        let f = &v["fields"];
        match v["kind"].as_str().unwrap() {
            "encode" => {
                let input = f32::from_bits(bits32(&f["input_f32_bits"]));
                let ours = float16::from_f32(input);
                assert_eq!(ours, bits16(&v["ieee_rne_half_bits"]), "{}", name(v));
                if v["gse_matches_ieee_rne"] == false {
                    gse_differs += 1;
                }
            }
            "decode" => {
                let ours = f16::from_bits(bits16(&f["half_bits"])).to_f32();
                let want = v
                    .get("ieee_f32_bits")
                    .map(bits32)
                    .unwrap_or_else(|| bits32(&f["decoded_f32_bits"]));
                assert_eq!(ours.to_bits(), want, "{}", name(v));
            }
            k => panic!("unknown kind {k}"),
        }
    }
    eprintln!(
        "float16.json: {gse_differs} encodes where gse's rounding differs from IEEE (checked against IEEE)"
    );
}

#[test]
fn float16_decode_table_matches_gse_except_nan_payloads() {
    let Some(dir) = vectors_dir() else { return };
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("float16_decode_all.json")).unwrap(),
    )
    .unwrap();
    let table = v["table"].as_array().unwrap();
    assert_eq!(table.len(), 65536);
    for (h, want) in table.iter().enumerate() {
        let ours = f16::from_bits(h as u16).to_f32();
        let gse = f32::from_bits(bits32(want));
        if gse.is_nan() {
            // gse drops NaN payloads; IEEE keeps them. Both are NaN of the same sign.
            assert!(
                ours.is_nan() && ours.is_sign_negative() == gse.is_sign_negative(),
                "half {h:#06x}"
            );
        } else {
            assert_eq!(ours.to_bits(), gse.to_bits(), "half {h:#06x}");
        }
    }
}

#[test]
fn float16_encode_sweep_matches_ieee_reference() {
    let Some(dir) = vectors_dir() else { return };
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("float16_encode_sweep.json")).unwrap(),
    )
    .unwrap();
    let rows = v["rows"].as_array().unwrap();
    let mut gse_differs = 0;
    for row in rows {
        let input = f32::from_bits(bits32(&row[0]));
        let ours = float16::from_f32(input);
        if input.is_nan() {
            assert!(
                ours & 0x7c00 == 0x7c00 && ours & 0x3ff != 0,
                "f32 {} stays NaN",
                row[0]
            );
        } else {
            assert_eq!(ours, bits16(&row[2]), "f32 {}", row[0]);
        }
        gse_differs += usize::from(bits16(&row[1]) != bits16(&row[2]));
    }
    eprintln!(
        "float16_encode_sweep: {} rows, gse differs from IEEE in {gse_differs}",
        rows.len()
    );
}

/// Maps the vectors' field names onto ours.
fn our_key(k: &str) -> &str {
    match k {
        "data_hex" => "data",
        "loc" => "location",
        "rot" => "rotation",
        "scale1" | "scale2" => "scale",
        "isLeft" => "left",
        "textureCoord" => "textures",
        other => other,
    }
}

/// Floats match if equal as f32, or equal once both are rounded to Float16 (the draft01
/// file records some Float16 fields at their pre-rounding encoder input).
fn floats_match(want: f64, got: f64) -> bool {
    let (w, g) = (want as f32, got as f32);
    w.to_bits() == g.to_bits() || f16::from_f32(w).to_bits() == f16::from_f32(g).to_bits()
}

/// `"(0,0,0),(1,0,0) Float32"` → `[[0,0,0],[1,0,0]]`.
fn tuples(s: &str) -> Vec<Vec<f64>> {
    let s = s.rsplit_once(')').map_or(s, |(list, _)| list);
    s.split("),(")
        .map(|t| {
            t.trim_matches(|c| c == '(' || c == ')')
                .split(',')
                .map(|n| n.trim().parse().unwrap())
                .collect()
        })
        .collect()
}

fn assert_fields(want: &Value, got: &Value, path: &str) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => assert_object(w, g, path),
        (Value::Array(w), Value::Array(g)) => {
            assert_eq!(w.len(), g.len(), "{path}: length");
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                assert_fields(w, g, &format!("{path}[{i}]"));
            }
        }
        (Value::String(s), Value::Array(g)) if s.starts_with('(') => {
            let w = tuples(s);
            assert_eq!(w.len(), g.len(), "{path}: length");
            for (w, g) in w.iter().zip(g) {
                let g: Vec<f64> = g
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|v| v.as_f64().unwrap())
                    .collect();
                assert_eq!(w, &g, "{path}");
            }
        }
        (Value::Number(w), Value::Number(g)) if w.is_f64() || g.is_f64() => {
            assert!(
                floats_match(w.as_f64().unwrap(), g.as_f64().unwrap()),
                "{path}: want {w}, got {g}"
            );
        }
        (Value::Null, g) => assert!(g.is_null(), "{path}: want null, got {g}"),
        (w, g) => assert_eq!(w, g, "{path}"),
    }
}

fn assert_object(w: &Map<String, Value>, g: &Map<String, Value>, path: &str) {
    for (k, wv) in w {
        match k.as_str() {
            "type" | "data_length" | "left_raw_byte" => continue,
            "textureUrl" => {
                let got = g
                    .get("texture")
                    .and_then(|t| t.get("url"))
                    .cloned()
                    .unwrap_or(Value::Null);
                assert_eq!(wv, &got, "{path}.textureUrl");
                continue;
            }
            _ => {}
        }
        // Object1 calls its Loc1 "position" (as gse does); the draft01 file says "loc".
        let key = if k == "loc" && g.contains_key("position") {
            "position"
        } else {
            our_key(k)
        };
        let gv = g.get(key).cloned().unwrap_or(Value::Null);
        assert_fields(wv, &gv, &format!("{path}.{k}"));
    }
}

fn our_type(t: &str) -> &str {
    match t.split(' ').next().unwrap() {
        "UnknownObject" => "Unknown",
        other => other,
    }
}

/// Decodes `b`, checks every object against the vector's fields, and checks that encoding
/// the decoded objects reproduces `b`.
fn check_objects(b: &[u8], want: &[Value], dialect: Dialect, what: &str) {
    let objects = wire::decode(b, dialect).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(objects.len(), want.len(), "{what}: object count");
    for (i, (o, w)) in objects.iter().zip(want).enumerate() {
        let got = serde_json::to_value(o).unwrap();
        assert_eq!(
            got["type"],
            our_type(w["type"].as_str().unwrap()),
            "{what}[{i}] type"
        );
        assert_fields(w, &got, &format!("{what}[{i}]"));
    }
    assert_eq!(
        hex::encode(wire::encode(&objects, dialect).unwrap()),
        hex::encode(b),
        "{what}: re-encode"
    );
    // The JSON form round-trips too (what `gsrelay decode` prints, `encode` reads).
    let json = serde_json::to_string(&objects).unwrap();
    let back: Vec<Object> = serde_json::from_str(&json).unwrap();
    assert_eq!(
        wire::encode(&back, dialect).unwrap(),
        b,
        "{what}: JSON round trip"
    );
}

#[test]
fn object_vectors_decode_to_gse_fields_and_reencode() {
    let Some(vs) = vectors("objects.json") else {
        return;
    };
    for v in &vs {
        check_objects(
            &bytes(v),
            std::slice::from_ref(&v["fields"]),
            Dialect::Gse,
            name(v),
        );
    }
}

#[test]
fn concatenated_vectors_decode_in_order_and_reencode() {
    let Some(vs) = vectors("concatenated.json") else {
        return;
    };
    for v in &vs {
        check_objects(
            &bytes(v),
            v["fields"]["objects"].as_array().unwrap(),
            Dialect::Gse,
            name(v),
        );
    }
}

/// Where gse reports an error we reject the payload; where gse accepts it we accept it too
/// and decode the same objects. Nothing panics.
#[test]
fn malformed_vectors_are_rejected_like_gse() {
    let Some(vs) = vectors("malformed.json") else {
        return;
    };
    for v in &vs {
        let b = bytes(v);
        let f = &v["fields"];
        let ours = wire::decode(&b, Dialect::Gse);
        let scanned = wire::validate(&b, Dialect::Gse);
        assert_eq!(
            ours.is_ok(),
            scanned.is_ok(),
            "{}: scanner and decoder disagree",
            name(v)
        );
        match f["result"].as_str().unwrap() {
            "error" => assert!(
                ours.is_err(),
                "{}: gse rejects it ({}), we accepted {:?}",
                name(v),
                f["error_message"],
                ours
            ),
            "ok" => {
                let want = f["objects"].as_array().unwrap();
                let objects = ours
                    .unwrap_or_else(|e| panic!("{}: gse accepts it, we rejected: {e}", name(v)));
                assert_eq!(objects.len(), want.len(), "{}", name(v));
                for (i, (o, w)) in objects.iter().zip(want).enumerate() {
                    assert_fields(
                        w,
                        &serde_json::to_value(o).unwrap(),
                        &format!("{}[{i}]", name(v)),
                    );
                }
            }
            r => panic!("unknown result {r}"),
        }
        // The draft01 reading never panics either.
        let _ = wire::decode(&b, Dialect::Draft01);
        let _ = wire::validate(&b, Dialect::Draft01);
    }
}

/// The objects gse does not implement decode in the draft01 dialect, and in the gse
/// dialect we do what gse did with them.
#[test]
fn draft01_only_objects_roundtrip_in_draft01() {
    let Some(vs) = vectors("draft01_objects_not_in_gse.json") else {
        return;
    };
    for v in &vs {
        let b = bytes(v);
        if v["fields"]["type"]
            .as_str()
            .unwrap()
            .contains("EBNF literal")
        {
            ebnf_literal_ipd_is_kept_as_an_extension(&b);
        } else {
            check_objects(
                &b,
                std::slice::from_ref(&v["fields"]),
                Dialect::Draft01,
                name(v),
            );
        }
        let gse = &v["gse_decode"];
        match gse["result"].as_str().unwrap() {
            "ok" => check_objects(
                &b,
                gse["objects"].as_array().unwrap(),
                Dialect::Gse,
                name(v),
            ),
            _ => assert!(
                wire::decode(&b, Dialect::Gse).is_err(),
                "{}: gse rejects it",
                name(v)
            ),
        }
    }
}

/// Tags are IANA numbers written as prose VarUInts, so the EBNF literal `80 02` reads as
/// tag 2, which is no optional part of Head1: it is kept verbatim as an extension, and the
/// object re-encodes to the same bytes (docs/wire-format.md, "tag literals").
fn ebnf_literal_ipd_is_kept_as_an_extension(b: &[u8]) {
    let objects = wire::decode(b, Dialect::Draft01).unwrap();
    let [Object::Head1(h)] = &objects[..] else {
        panic!("one Head1, got {objects:?}")
    };
    assert_eq!(h.ipd, None);
    assert_eq!(hex::encode(&h.extra.0), "8002022b2b");
    assert_eq!(wire::encode(&objects, Dialect::Draft01).unwrap(), b);
}

#[test]
fn tag_vectors_classify_like_gse() {
    let Some(vs) = vectors("tags.json") else {
        return;
    };
    for v in &vs {
        let b = bytes(v);
        let tag = Reader::new(&b).varuint().unwrap();
        assert_eq!(
            tag,
            v["fields"]["varuint_value"].as_u64().unwrap(),
            "{}",
            name(v)
        );
        let class = v["fields"]["gse_classification"].as_str().unwrap();
        let kind = Dialect::Gse.kind_of(tag);
        match class {
            c if c.starts_with("error") => assert_eq!(tag, 0, "{}", name(v)),
            "UnknownObject" => assert_eq!(kind, ObjectKind::Unknown, "{}", name(v)),
            c => assert_eq!(
                format!("{kind:?}").to_lowercase(),
                c.to_lowercase(),
                "{}",
                name(v)
            ),
        }
        // The probe (tag + Length 0) is accepted exactly when gse accepted it.
        let probe = hex::decode(v["probe_hex"].as_str().unwrap()).unwrap();
        let gse_ok = v["probe_decode"]["result"] == "ok";
        assert_eq!(
            wire::decode(&probe, Dialect::Gse).is_ok(),
            gse_ok,
            "{} probe",
            name(v)
        );
    }
}

/// The draft's only test vector (Appendix "Head Location"): the table's bytes, which say
/// objectID 0 and time 0x0500 although the prose says objectID 4 and 5 ms.
#[test]
fn draft_c1_bytes_decode_as_the_table_says() {
    let c1 = hex::decode("01210005003f8ccccd3e4ccccd41f00000000000000000000000000000000000000000")
        .unwrap();
    for d in [Dialect::Draft01, Dialect::Gse] {
        let objects = wire::decode(&c1, d).unwrap();
        let [Object::Head1(h)] = &objects[..] else {
            panic!("one Head1, got {objects:?}")
        };
        assert_eq!((h.id, h.time, h.ipd), (0, 0x0500, None));
        assert_eq!(h.location.position(), [1.1, 0.2, 30.0]);
        assert_eq!([h.rotation.si, h.rotation.sj, h.rotation.sk], [0.0; 3]);
        assert_eq!(wire::encode(&objects, d).unwrap(), c1);
    }
}
