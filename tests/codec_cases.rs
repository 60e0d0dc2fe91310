//! Specific codec cases found in review: NaN payloads, `extra` that would collide with an
//! object's own optional part, and the CLI's error reporting.

use gsrelay::wire::json::Hex;
use gsrelay::wire::{Dialect, Head1, Object, Object1, Pointer, Scale1, SixDof1, decode, encode};
use std::process::Command;

#[test]
fn every_float16_bit_pattern_survives_decode_then_encode() {
    for bits in 0..=u16::MAX {
        let f = gsrelay::wire::float16::to_f32(bits);
        assert_eq!(
            gsrelay::wire::float16::from_f32(f),
            bits,
            "half {bits:#06x}"
        );
    }
}

#[test]
fn signalling_nan_in_a_payload_round_trips() {
    // Head1 (C.1 layout) whose location.vx is the signalling NaN 7c01.
    let hex = "01210005003f8ccccd3e4ccccd41f000007c0100000000000000000000000000000000";
    let bytes = hex::decode(hex).unwrap();
    let objects = decode(&bytes, Dialect::Draft01).unwrap();
    assert_eq!(encode(&objects, Dialect::Draft01).unwrap(), bytes);
}

fn head_with_extra(extra: &str) -> Object {
    Object::Head1(Head1 {
        extra: Hex(hex::decode(extra).unwrap()),
        ..Head1::default()
    })
}

#[test]
fn encode_refuses_extra_that_would_not_decode() {
    // A second IPD-tagged TLV with the wrong Length.
    let err = encode(&[head_with_extra("808203000000")], Dialect::Draft01).unwrap_err();
    assert!(err.to_string().contains("undecodable"), "{err}");
    // A Parent1 TLV with Length 0 after an Object1.
    let o = Object::Object1(Object1 {
        scale: Scale1::Uniform(1.0),
        extra: Hex(vec![4, 0]),
        ..Object1::default()
    });
    assert!(encode(&[o], Dialect::Draft01).is_err());
    // A bare pointer must be last.
    let s = Object::SixDof1(SixDof1 {
        pointer: Some(Pointer {
            bare: true,
            ..Pointer::default()
        }),
        extra: Hex(vec![0x20, 0]),
        ..SixDof1::default()
    });
    assert!(encode(&[s], Dialect::Draft01).is_err());
    // gse allows nothing after a Head1's fixed part but its IPD.
    assert!(encode(&[head_with_extra("2000")], Dialect::Gse).is_err());
    // A well-formed extension TLV is fine in draft01.
    assert!(encode(&[head_with_extra("2000")], Dialect::Draft01).is_ok());
}

#[test]
fn cli_reports_the_offset_of_a_malformed_payload() {
    let out = Command::new(env!("CARGO_BIN_EXE_gsrelay"))
        .args([
            "decode",
            "--dialect",
            "gse",
            "--hex",
            "01200005003f8ccccd3e4ccccd41f00000000000000000000000000000000000000000",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at offset 3") && err.contains("truncated"),
        "{err}"
    );
}

#[test]
fn cli_decode_then_encode_reproduces_the_bytes() {
    let hex = "01270005003f8ccccd3e4ccccd41f00000000000000000000000000000000000000000c08002024248";
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
    let json = run(&["decode", "--dialect", "gse", "--hex", hex]);
    assert!(json.contains("\"type\": \"Head1\""), "{json}");
    let back = run(&["encode", "--dialect", "gse", "--json", &json]);
    assert_eq!(back.trim(), hex);
}
