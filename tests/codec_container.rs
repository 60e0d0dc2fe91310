//! The container object of aggregated delivery: exact bytes, JSON form, both dialects,
//! scanner/decoder agreement, and malformed containers.

use gsrelay::wire::container::{CONTAINER_TAG, container_len, split};
use gsrelay::wire::json::Hex;
use gsrelay::wire::layout::read_tlv;
use gsrelay::wire::reader::Reader;
use gsrelay::wire::writer::WriteExt;
use gsrelay::wire::{
    Container, Dialect, Head1, Loc2, Object, Object1, ObjectKind, Scale1, Unknown, Vec3, decode,
    encode, objects, validate,
};
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::json;
use std::process::Command;

/// The draft's test vector C.1 (a Head1, objectID 0).
const C1: &str = "01210005003f8ccccd3e4ccccd41f00000000000000000000000000000000000000000";

fn c1() -> Object {
    decode(&hex::decode(C1).unwrap(), Dialect::Draft01)
        .unwrap()
        .remove(0)
}

#[test]
fn a_container_is_tag_18259_length_ssrc_then_the_objects() {
    let c = Object::Container(Container {
        ssrc: 0x0102_0304,
        objects: vec![c1(), c1()],
    });
    // Length = 5 (the SSRC as VarUInt) + 2 × 35.
    let want = format!("c047534be101020304{C1}{C1}");
    for d in [Dialect::Draft01, Dialect::Gse] {
        let bytes = encode(std::slice::from_ref(&c), d).unwrap();
        assert_eq!(hex::encode(&bytes), want, "{d}");
        assert_eq!(bytes.len(), container_len(0x0102_0304, 70));
        assert_eq!(decode(&bytes, d).unwrap(), vec![c.clone()]);
    }
    assert_eq!(CONTAINER_TAG, 18259);
    assert_eq!(Dialect::Draft01.kind_of(18259), ObjectKind::Container);
    assert_eq!(Dialect::Gse.kind_of(18259), ObjectKind::Container);
    // 16384, the reference implementation's example of an unknown tag, stays unknown.
    assert_eq!(Dialect::Gse.kind_of(16384), ObjectKind::Unknown);
}

#[test]
fn json_form_names_the_sender_and_lists_its_objects() {
    let c = Object::Container(Container {
        ssrc: 7,
        objects: vec![Object::Unknown(Unknown {
            tag: 20000,
            data: Hex(vec![1, 0xaa]),
        })],
    });
    let j = serde_json::to_value(&c).unwrap();
    assert_eq!(
        j,
        json!({"type": "Container", "ssrc": 7,
               "objects": [{"type": "Unknown", "tag": 20000, "data": "01aa"}]})
    );
    let back: Object = serde_json::from_value(j).unwrap();
    assert_eq!(back, c);
}

#[test]
fn objects_inside_are_read_in_the_sessions_dialect() {
    let gse_object1 = Object::Object1(Object1 {
        id: 12,
        time: 1280,
        position: Vec3 {
            x: 1.0,
            y: 2.0,
            z: 3.0,
        },
        scale: Scale1::Axes(Vec3 {
            x: 7.0,
            y: 8.0,
            z: 9.0,
        }),
        active: true,
        parent: Some(7),
        ..Object1::default()
    });
    let c = Object::Container(Container {
        ssrc: 99,
        objects: vec![gse_object1],
    });
    let bytes = encode(std::slice::from_ref(&c), Dialect::Gse).unwrap();
    assert_eq!(decode(&bytes, Dialect::Gse).unwrap(), vec![c.clone()]);
    assert!(
        encode(&[c], Dialect::Draft01).is_err(),
        "a gse Object1 has no draft01 form"
    );
}

#[test]
fn the_scanner_sees_the_container_and_split_opens_it() {
    let inner = [c1(), c1()];
    let c = Object::Container(Container {
        ssrc: 0xdead_beef,
        objects: inner.to_vec(),
    });
    let payload = encode(&[c, c1()], Dialect::Draft01).unwrap();
    let refs: Vec<_> = objects(&payload, Dialect::Draft01)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(refs.len(), 2);
    assert_eq!(refs[0].kind, ObjectKind::Container);
    assert_eq!(refs[0].id, Some(0xdead_beef));
    assert_eq!(refs[1].kind, ObjectKind::Head1);
    let (ssrc, body) = split(refs[0].bytes(&payload)).unwrap();
    assert_eq!(ssrc, 0xdead_beef);
    assert_eq!(decode(body, Dialect::Draft01).unwrap(), inner.to_vec());
    assert_eq!(split(refs[1].bytes(&payload)), None, "not a container");
}

#[test]
fn a_reader_that_does_not_know_the_tag_skips_it_by_its_length() {
    let c = Object::Container(Container {
        ssrc: 5,
        objects: vec![c1()],
    });
    let payload = encode(&[c, c1()], Dialect::Draft01).unwrap();
    // Tag, Length, skip: exactly what any reader does with an unknown object.
    let mut r = Reader::new(&payload);
    let first = read_tlv(&mut r).unwrap();
    assert_eq!(first.tag, CONTAINER_TAG);
    let second = read_tlv(&mut r).unwrap();
    assert_eq!(second.tag, 1);
    assert!(r.is_empty());
}

/// A container header around `body` (bytes after the ObjectID), with ObjectID `id`.
fn raw_container(id: u64, body: &[u8]) -> Vec<u8> {
    let mut inner = Vec::new();
    inner.put_varuint(id);
    inner.extend_from_slice(body);
    let mut v = Vec::new();
    v.put_varuint(CONTAINER_TAG);
    v.put_blob(&inner);
    v
}

#[test]
fn malformed_containers_are_rejected_by_scanner_and_decoder_alike() {
    let head = hex::decode(C1).unwrap();
    let nested = raw_container(1, &raw_container(2, &head));
    let mut truncated_inner = head.clone();
    truncated_inner[1] = 0x30; // Length past the container's end
    let cases: [(&str, Vec<u8>, &str, usize); 5] = [
        ("nested", nested, "bad_container", 5),
        (
            "objectID beyond 32 bits",
            raw_container(1 << 32, &head),
            "bad_container",
            4,
        ),
        (
            "inner Length past the end",
            raw_container(1, &truncated_inner),
            "truncated",
            7,
        ),
        ("tag 0 inside", raw_container(1, &[0, 0]), "tag_zero", 5),
        (
            "container Length past the payload",
            raw_container(1, &head)[..20].to_vec(),
            "truncated",
            4,
        ),
    ];
    for (what, bytes, reason, offset) in cases {
        for d in [Dialect::Draft01, Dialect::Gse] {
            let e = decode(&bytes, d).unwrap_err();
            assert_eq!(
                (e.reason(), e.offset),
                (reason, offset),
                "{what} ({d}): {e}"
            );
            let s = validate(&bytes, d).unwrap_err();
            assert_eq!(s, e, "{what}: the scanner agrees");
        }
    }
    let empty = raw_container(3, &[]);
    assert_eq!(
        decode(&empty, Dialect::Draft01).unwrap(),
        vec![Object::Container(Container {
            ssrc: 3,
            objects: vec![]
        })],
        "a container may be empty"
    );
}

#[test]
fn encode_refuses_a_container_in_a_container() {
    let inner = Object::Container(Container::default());
    let outer = Object::Container(Container {
        ssrc: 1,
        objects: vec![inner],
    });
    let e = encode(&[outer], Dialect::Draft01).unwrap_err();
    assert!(e.to_string().contains("cannot hold a container"), "{e}");
}

#[test]
fn cli_decode_prints_a_container_and_encode_reproduces_it() {
    let hex = format!("c0475328e101020304{C1}");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gsrelay"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let printed = run(&["decode", "--hex", &hex]);
    let value: serde_json::Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(value[0]["type"], "Container");
    assert_eq!(value[0]["ssrc"], 0x0102_0304);
    assert_eq!(value[0]["objects"][0]["type"], "Head1");
    assert_eq!(run(&["encode", "--json", &printed]).trim(), hex);
}

fn head(id: u64, x: f32) -> Object {
    Object::Head1(Head1 {
        id,
        location: Loc2 {
            x,
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

fn inner_object() -> impl Strategy<Value = Object> {
    prop_oneof![
        (any::<u64>(), any::<u32>()).prop_map(|(id, x)| head(id, f32::from_bits(x))),
        ((1u64..30000), vec(any::<u8>(), 0..20))
            .prop_map(|(tag, data)| Object::Unknown(Unknown {
                tag,
                data: Hex(data)
            }))
            .prop_filter("unknown in both dialects", |o| matches!(
                o,
                Object::Unknown(u) if Dialect::Draft01.kind_of(u.tag) == ObjectKind::Unknown
                    && Dialect::Gse.kind_of(u.tag) == ObjectKind::Unknown
            )),
    ]
}

fn container() -> impl Strategy<Value = Object> {
    (any::<u32>(), vec(inner_object(), 0..6))
        .prop_map(|(ssrc, objects)| Object::Container(Container { ssrc, objects }))
}

proptest! {
    #[test]
    fn containers_round_trip_in_both_dialects(
        payload in vec(container(), 1..4),
        gse in any::<bool>(),
    ) {
        let d = if gse { Dialect::Gse } else { Dialect::Draft01 };
        let bytes = encode(&payload, d).unwrap();
        let back = decode(&bytes, d).unwrap();
        prop_assert_eq!(encode(&back, d).unwrap(), bytes.clone());
        prop_assert_eq!(validate(&bytes, d).unwrap(), payload.len());
    }

    #[test]
    fn garbage_inside_a_container_never_panics_and_both_readers_agree(
        id in any::<u64>(),
        body in vec(any::<u8>(), 0..64),
        gse in any::<bool>(),
    ) {
        let d = if gse { Dialect::Gse } else { Dialect::Draft01 };
        let bytes = raw_container(id, &body);
        let decoded = decode(&bytes, d);
        let scanned = validate(&bytes, d);
        prop_assert_eq!(decoded.is_ok(), scanned.is_ok());
        if let (Err(a), Err(b)) = (decoded, scanned) {
            prop_assert_eq!(a, b);
        }
    }
}
