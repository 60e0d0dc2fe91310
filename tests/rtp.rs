//! RTP header view/writer, RTCP parse/build and per-subscriber rewriting.

use gsrelay::rtp::packet::append_padding;
use gsrelay::rtp::rtcp::{
    FirEntry, ReceptionReport, SdesChunk, SenderInfo, TmmbEntry, write_app, write_bye, write_fir,
    write_nack, write_pli, write_rr, write_sdes_cname, write_sr, write_tmmbn, write_tmmbr,
};
use gsrelay::rtp::*;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// RTP

fn elem<'a>(id: u8, data: &'a [u8]) -> ExtensionElement<'a> {
    ExtensionElement { id, data }
}

fn packet(header: &RtpHeader<'_>, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    header.append_to(&mut out).expect("valid header");
    out.extend_from_slice(payload);
    out
}

#[test]
fn rtp_round_trip_with_csrcs_and_one_byte_extension() {
    let elements = [
        elem(1, &[0xaa]),
        elem(14, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]),
    ];
    let header = RtpHeader {
        marker: true,
        payload_type: 111,
        sequence_number: 0xfffe,
        timestamp: 0xdead_beef,
        ssrc: 0x0102_0304,
        csrcs: &[7, 8, 9],
        extension: Some(WriteExtension::Elements {
            form: ExtensionForm::OneByte,
            app_bits: 0,
            elements: &elements,
        }),
    };
    let bytes = packet(&header, b"payload");
    let p = RtpPacket::parse(&bytes).expect("parses");

    assert_eq!(p.version(), 2);
    assert!(p.marker());
    assert_eq!(p.payload_type(), 111);
    assert_eq!(p.sequence_number(), 0xfffe);
    assert_eq!(p.timestamp(), 0xdead_beef);
    assert_eq!(p.ssrc(), 0x0102_0304);
    assert_eq!(p.csrcs().collect::<Vec<_>>(), [7, 8, 9]);
    assert!(!p.has_padding());
    let ext = p.extension().expect("extension");
    assert_eq!(ext.profile(), 0xBEDE);
    assert_eq!(ext.form(), Some(ExtensionForm::OneByte));
    // 2 + 17 element octets, padded to 20.
    assert_eq!(ext.data().len(), 20);
    assert_eq!(ext.elements().collect::<Vec<_>>(), elements);
    assert_eq!(p.header_len(), 12 + 12 + 4 + 20);
    assert_eq!(p.payload(), b"payload");
}

#[test]
fn rtp_round_trip_with_two_byte_extension() {
    let long = [0x5a; 255];
    let elements = [elem(1, &[]), elem(200, &long), elem(255, &[9, 9])];
    let header = RtpHeader {
        payload_type: 96,
        sequence_number: 1,
        timestamp: 2,
        ssrc: 3,
        extension: Some(WriteExtension::Elements {
            form: ExtensionForm::TwoByte,
            app_bits: 0x5,
            elements: &elements,
        }),
        ..RtpHeader::default()
    };
    let bytes = packet(&header, &[1, 2, 3]);
    let p = RtpPacket::parse(&bytes).expect("parses");
    let ext = p.extension().expect("extension");
    assert_eq!(ext.profile(), 0x1005);
    assert_eq!(ext.form(), Some(ExtensionForm::TwoByte));
    assert_eq!(ext.elements().collect::<Vec<_>>(), elements);
    assert_eq!(p.payload(), [1, 2, 3]);
    assert!(!p.marker());
    assert_eq!(p.csrcs().len(), 0);
}

#[test]
fn rtp_raw_extension_is_forwarded_unchanged() {
    let src = packet(
        &RtpHeader {
            extension: Some(WriteExtension::Elements {
                form: ExtensionForm::OneByte,
                app_bits: 0,
                elements: &[elem(3, &[1, 2])],
            }),
            ..RtpHeader::default()
        },
        b"x",
    );
    let parsed = RtpPacket::parse(&src).expect("parses");
    let copy = packet(
        &RtpHeader {
            extension: parsed.extension().map(WriteExtension::from),
            ..RtpHeader::default()
        },
        b"x",
    );
    assert_eq!(copy, src);
}

#[test]
fn rtp_padding_is_stripped() {
    let mut bytes = packet(
        &RtpHeader {
            payload_type: 96,
            ..RtpHeader::default()
        },
        b"abc",
    );
    append_padding(&mut bytes, 5).expect("pads");
    assert_eq!(bytes.len(), 12 + 3 + 5);
    assert_eq!(bytes.last(), Some(&5));

    let p = RtpPacket::parse(&bytes).expect("parses");
    assert!(p.has_padding());
    assert_eq!(p.padding_len(), 5);
    assert_eq!(p.payload(), b"abc");
}

#[test]
fn rtp_hand_written_packet_with_padding_between_extension_elements() {
    #[rustfmt::skip]
    let bytes = [
        0xb1, 0xe0, 0x12, 0x34,  // V=2 P=1 X=1 CC=1, M=1 PT=96, seq 0x1234
        0x00, 0x00, 0x10, 0x00,  // timestamp 4096
        0xca, 0xfe, 0xba, 0xbe,  // SSRC
        0x00, 0x00, 0x00, 0x2a,  // CSRC 42
        0xbe, 0xde, 0x00, 0x02,  // one-byte extension, 2 words
        0x10, 0x77, 0x00, 0x00,  // id 1 len 1 [0x77], two padding octets
        0x21, 0x01, 0x02, 0x00,  // id 2 len 2 [1, 2], one padding octet
        0xff,                    // payload
        0x00, 0x00, 0x03,        // padding: 3 octets
    ];
    let p = RtpPacket::parse(&bytes).expect("parses");
    assert!(p.marker());
    assert_eq!(p.payload_type(), 96);
    assert_eq!(p.sequence_number(), 0x1234);
    assert_eq!(p.timestamp(), 4096);
    assert_eq!(p.ssrc(), 0xcafe_babe);
    assert_eq!(p.csrcs().collect::<Vec<_>>(), [42]);
    let ext = p.extension().expect("extension");
    assert_eq!(
        ext.elements().collect::<Vec<_>>(),
        [elem(1, &[0x77]), elem(2, &[1, 2])]
    );
    assert_eq!(p.payload(), [0xff]);
    assert_eq!(p.padding_len(), 3);
}

#[test]
fn rtp_malformed_inputs_give_typed_errors() {
    let good = packet(&RtpHeader::default(), b"");
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        RtpPacket::parse(&b).map(|_| ()).map_err(|e| e.reason())
    };

    assert_eq!(
        RtpPacket::parse(&[]).map(|_| ()).map_err(|e| e.reason()),
        Err("rtp_too_short")
    );
    assert_eq!(with(&|b| b.truncate(11)), Err("rtp_too_short"));
    assert_eq!(with(&|b| b[0] = 0x40), Err("rtp_bad_version"));
    assert_eq!(with(&|b| b[0] |= 0x01), Err("rtp_truncated_csrcs"));
    // Padding count 0, and a count reaching into the header.
    assert_eq!(
        with(&|b| {
            b[0] |= 0x20;
            b.push(0)
        }),
        Err("rtp_bad_padding")
    );
    assert_eq!(
        with(&|b| {
            b[0] |= 0x20;
            b.push(2)
        }),
        Err("rtp_bad_padding")
    );
    // Extension bit with no extension header, and an extension longer than the packet.
    assert_eq!(with(&|b| b[0] |= 0x10), Err("rtp_truncated_extension"));
    assert_eq!(
        with(&|b| {
            b[0] |= 0x10;
            b.extend_from_slice(&[0xbe, 0xde, 0, 2, 0, 0, 0, 0])
        }),
        Err("rtp_truncated_extension")
    );
    // One-byte element claiming 3 octets with 2 left; two-byte element missing its length octet.
    assert_eq!(
        with(&|b| {
            b[0] |= 0x10;
            b.extend_from_slice(&[0xbe, 0xde, 0, 1, 0, 0, 0x12, 0])
        }),
        Err("rtp_bad_extension_element")
    );
    assert_eq!(
        with(&|b| {
            b[0] |= 0x10;
            b.extend_from_slice(&[0x10, 0x00, 0, 1, 0, 0, 0, 7])
        }),
        Err("rtp_bad_extension_element")
    );
}

#[test]
fn rtp_writer_checks_fields_and_buffer() {
    let header = RtpHeader {
        csrcs: &[1, 2],
        ..RtpHeader::default()
    };
    let mut small = [0u8; 19];
    assert_eq!(
        header.write_to(&mut small),
        Err(RtpWriteError::BufferTooSmall { needed: 20 })
    );
    let mut exact = [0u8; 20];
    assert_eq!(header.write_to(&mut exact), Ok(20));

    let csrcs = [0u32; 16];
    let too_many = RtpHeader {
        csrcs: &csrcs,
        ..RtpHeader::default()
    };
    assert_eq!(too_many.header_len(), Err(RtpWriteError::TooManyCsrcs));
    let bad_pt = RtpHeader {
        payload_type: 128,
        ..RtpHeader::default()
    };
    assert_eq!(bad_pt.header_len(), Err(RtpWriteError::BadPayloadType));

    let one_byte = |e: &[ExtensionElement<'_>]| {
        RtpHeader {
            extension: Some(WriteExtension::Elements {
                form: ExtensionForm::OneByte,
                app_bits: 0,
                elements: e,
            }),
            ..RtpHeader::default()
        }
        .header_len()
    };
    assert_eq!(
        one_byte(&[elem(15, &[1])]),
        Err(RtpWriteError::BadExtensionElement)
    );
    assert_eq!(
        one_byte(&[elem(1, &[])]),
        Err(RtpWriteError::BadExtensionElement)
    );
    assert_eq!(
        one_byte(&[elem(1, &[0; 17])]),
        Err(RtpWriteError::BadExtensionElement)
    );
    let raw = RtpHeader {
        extension: Some(WriteExtension::Raw {
            profile: 1,
            data: &[0; 3],
        }),
        ..RtpHeader::default()
    };
    assert_eq!(raw.header_len(), Err(RtpWriteError::BadExtensionLength));

    let mut v = Vec::new();
    assert_eq!(
        append_padding(&mut v, 1),
        Err(RtpWriteError::BufferTooSmall { needed: 12 })
    );
}

#[test]
fn rtp_append_reuses_capacity() {
    let mut out = Vec::with_capacity(64);
    let before = out.as_ptr();
    let header = RtpHeader {
        csrcs: &[1],
        ..RtpHeader::default()
    };
    assert_eq!(header.append_to(&mut out), Ok(16));
    out.clear();
    assert_eq!(header.append_to(&mut out), Ok(16));
    assert_eq!(out.as_ptr(), before);
    assert_eq!(out.capacity(), 64);
}

#[test]
fn classify_tells_rtp_from_rtcp() {
    assert_eq!(classify(&[0x80, 96]), PacketClass::Rtp);
    // Marker set on PT 96 is 0xe0 = 224, just outside the RTCP range.
    assert_eq!(classify(&[0x80, 0xe0]), PacketClass::Rtp);
    assert_eq!(classify(&[0x81, 200]), PacketClass::Rtcp);
    assert_eq!(classify(&[0x81, 192]), PacketClass::Rtcp);
    assert_eq!(classify(&[0x81, 223]), PacketClass::Rtcp);
    assert_eq!(classify(&[0x00, 200]), PacketClass::Other);
    assert_eq!(classify(&[0x80]), PacketClass::Other);
}

proptest! {
    #[test]
    fn rtp_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(p) = RtpPacket::parse(&bytes) {
            prop_assert_eq!(p.header_len() + p.payload().len() + usize::from(p.padding_len()), bytes.len());
            if let Some(ext) = p.extension() {
                let _ = ext.elements().count();
            }
        }
    }

    #[test]
    fn rtp_parse_of_mostly_valid_headers_never_panics(
        mut bytes in proptest::collection::vec(any::<u8>(), 12..120),
        flags in 0u8..64,
    ) {
        // Force version 2 so the random bytes reach the CSRC, extension and padding paths.
        bytes[0] = 0x80 | flags;
        let _ = RtpPacket::parse(&bytes);
    }

    #[test]
    fn rtp_write_parse_round_trip(
        marker: bool,
        payload_type in 0u8..128,
        sequence_number: u16,
        timestamp: u32,
        ssrc: u32,
        csrcs in proptest::collection::vec(any::<u32>(), 0..16),
        ids in proptest::collection::vec(1u8..15, 0..5),
        payload in proptest::collection::vec(any::<u8>(), 0..50),
        pad in 0u8..8,
    ) {
        let data = [0x42u8; 16];
        let elements: Vec<_> = ids.iter().map(|&id| elem(id, &data[..usize::from(id)])).collect();
        let header = RtpHeader {
            marker, payload_type, sequence_number, timestamp, ssrc, csrcs: &csrcs,
            extension: (!elements.is_empty()).then_some(WriteExtension::Elements {
                form: ExtensionForm::OneByte, app_bits: 0, elements: &elements,
            }),
        };
        let mut bytes = packet(&header, &payload);
        if pad > 0 {
            append_padding(&mut bytes, pad).expect("pads");
        }
        let p = RtpPacket::parse(&bytes).expect("parses");
        prop_assert_eq!(p.marker(), marker);
        prop_assert_eq!(p.payload_type(), payload_type);
        prop_assert_eq!(p.sequence_number(), sequence_number);
        prop_assert_eq!(p.timestamp(), timestamp);
        prop_assert_eq!(p.ssrc(), ssrc);
        prop_assert_eq!(p.csrcs().collect::<Vec<_>>(), csrcs);
        prop_assert_eq!(p.extension().map(|e| e.elements().collect::<Vec<_>>()).unwrap_or_default(), elements);
        prop_assert_eq!(p.payload(), &payload[..]);
        prop_assert_eq!(p.padding_len(), pad);
    }
}

// ---------------------------------------------------------------------------------------------
// RTCP

/// FIR, RFC 5104 §4.3.1: PSFB (206) FMT 4, media SSRC 0, FCI = SSRC, seq nr, 3 reserved octets.
#[rustfmt::skip]
const FIR: [u8; 28] = [
    0x84, 0xce, 0x00, 0x06,  // V=2 FMT=4, PT=206, length 2+2*2
    0x11, 0x22, 0x33, 0x44,  // sender SSRC
    0x00, 0x00, 0x00, 0x00,  // media SSRC (unused)
    0xaa, 0xbb, 0xcc, 0xdd,  // FCI 1: SSRC
    0x07, 0x00, 0x00, 0x00,  //        seq nr 7, reserved
    0x01, 0x02, 0x03, 0x04,  // FCI 2: SSRC
    0xff, 0x00, 0x00, 0x00,  //        seq nr 255, reserved
];

/// Generic NACK, RFC 4585 §6.2.1: RTPFB (205) FMT 1, PID 100, BLP bits 0, 2 and 15.
#[rustfmt::skip]
const NACK: [u8; 16] = [
    0x81, 0xcd, 0x00, 0x03,  // V=2 FMT=1, PT=205, length 3
    0x11, 0x22, 0x33, 0x44,  // sender SSRC
    0xaa, 0xbb, 0xcc, 0xdd,  // media SSRC
    0x00, 0x64, 0x80, 0x05,  // PID 100, BLP 1000_0000_0000_0101: 101, 103, 116
];

/// TMMBR, RFC 5104 §4.2.1.1: RTPFB (205) FMT 3; 1 Mbit/s = 125000 << 3, overhead 40.
#[rustfmt::skip]
const TMMBR: [u8; 20] = [
    0x83, 0xcd, 0x00, 0x04,  // V=2 FMT=3, PT=205, length 4
    0x11, 0x22, 0x33, 0x44,  // sender SSRC
    0x00, 0x00, 0x00, 0x00,  // media SSRC (unused)
    0xaa, 0xbb, 0xcc, 0xdd,  // FCI: SSRC
    0x0f, 0xd0, 0x90, 0x28,  // exp 000011, mantissa 1_1110_1000_0100_1000, overhead 0_0010_1000
];

/// RR with one report block followed by SDES with a CNAME (RFC 3550 §6.4.2, §6.5).
#[rustfmt::skip]
const RR_SDES: [u8; 48] = [
    0x81, 0xc9, 0x00, 0x07,  // RR, RC=1, length 7
    0x90, 0x2f, 0x9e, 0x2e,  // reporter SSRC
    0xbc, 0x5e, 0x9a, 0x40,  // block: SSRC
    0x10, 0x00, 0x00, 0x05,  //        fraction lost 16, cumulative lost 5
    0x00, 0x01, 0x46, 0xe1,  //        extended highest seq 0x146e1
    0x00, 0x00, 0x01, 0x11,  //        jitter 273
    0x09, 0xf3, 0x64, 0x32,  //        LSR
    0x00, 0x02, 0x4a, 0x79,  //        DLSR
    0x81, 0xca, 0x00, 0x03,  // SDES, SC=1, length 3
    0x90, 0x2f, 0x9e, 0x2e,  // chunk SSRC
    0x01, 0x04, b'u', b's',  // CNAME, length 4
    b'e', b'r', 0x00, 0x00,  // END, pad to 32 bits
];

/// BYE for two sources, RFC 3550 §6.6.
#[rustfmt::skip]
const BYE: [u8; 12] = [
    0x82, 0xcb, 0x00, 0x02,  // SC=2, PT=203, length 2
    0x90, 0x2f, 0x9e, 0x2e,
    0x01, 0x02, 0x03, 0x04,
];

fn report() -> ReceptionReport {
    ReceptionReport {
        ssrc: 0xbc5e_9a40,
        fraction_lost: 16,
        total_lost: 5,
        last_sequence_number: 0x146e1,
        jitter: 273,
        last_sender_report: 0x09f3_6432,
        delay: 0x0002_4a79,
    }
}

fn tmmb_entry() -> TmmbEntry {
    TmmbEntry {
        ssrc: 0xaabb_ccdd,
        bitrate_bps: 1_000_000,
        overhead: 40,
    }
}

fn fir_entries() -> [FirEntry; 2] {
    [
        FirEntry {
            ssrc: 0xaabb_ccdd,
            sequence_number: 7,
        },
        FirEntry {
            ssrc: 0x0102_0304,
            sequence_number: 255,
        },
    ]
}

#[test]
fn rtcp_fir_parses_and_builds() {
    let items = parse_compound(&FIR).expect("parses");
    assert_eq!(
        items,
        [RtcpItem::Fir {
            sender_ssrc: 0x1122_3344,
            entries: fir_entries().to_vec()
        }]
    );
    let mut out = Vec::new();
    assert_eq!(
        write_fir(&mut out, 0x1122_3344, &fir_entries()),
        Ok(FIR.len())
    );
    assert_eq!(out, FIR);
}

#[test]
fn rtcp_nack_expands_blp_and_builds() {
    let items = parse_compound(&NACK).expect("parses");
    assert_eq!(
        items,
        [RtcpItem::Nack {
            sender_ssrc: 0x1122_3344,
            media_ssrc: 0xaabb_ccdd,
            lost: vec![100, 101, 103, 116]
        }]
    );
    let mut out = Vec::new();
    assert_eq!(
        write_nack(&mut out, 0x1122_3344, 0xaabb_ccdd, &[100, 101, 103, 116]),
        Ok(16)
    );
    assert_eq!(out, NACK);
}

#[test]
fn rtcp_nack_blp_wraps_around() {
    #[rustfmt::skip]
    let bytes = [0x81, 0xcd, 0x00, 0x03, 0, 0, 0, 1, 0, 0, 0, 2, 0xff, 0xfe, 0x00, 0x03];
    let items = parse_compound(&bytes).expect("parses");
    assert_eq!(
        items,
        [RtcpItem::Nack {
            sender_ssrc: 1,
            media_ssrc: 2,
            lost: vec![65534, 65535, 0]
        }]
    );
}

#[test]
fn rtcp_tmmbr_and_tmmbn_parse_and_build() {
    let items = parse_compound(&TMMBR).expect("parses");
    assert_eq!(
        items,
        [RtcpItem::Tmmbr {
            sender_ssrc: 0x1122_3344,
            entries: vec![tmmb_entry()]
        }]
    );
    let mut out = Vec::new();
    assert_eq!(write_tmmbr(&mut out, 0x1122_3344, &[tmmb_entry()]), Ok(20));
    assert_eq!(out, TMMBR);

    // TMMBN is the same layout with FMT 4, and may be empty.
    let mut tmmbn = TMMBR;
    tmmbn[0] = 0x84;
    assert_eq!(
        parse_compound(&tmmbn).expect("parses"),
        [RtcpItem::Tmmbn {
            sender_ssrc: 0x1122_3344,
            entries: vec![tmmb_entry()]
        }]
    );
    let mut out = Vec::new();
    assert_eq!(write_tmmbn(&mut out, 0x1122_3344, &[]), Ok(12));
    assert_eq!(
        out,
        [0x84, 0xcd, 0x00, 0x02, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0]
    );
    assert_eq!(
        parse_compound(&out).expect("parses"),
        [RtcpItem::Tmmbn {
            sender_ssrc: 0x1122_3344,
            entries: vec![]
        }]
    );
}

#[test]
fn rtcp_tmmbr_bitrate_encoding_limits() {
    let mut out = Vec::new();
    // 17 significant bits fit with exponent 0; 0x1_ffff + 1 needs exponent 1.
    for bitrate_bps in [0, 1, 0x1_ffff, 0x2_0000, 0x1_ffff << 47] {
        out.clear();
        let e = TmmbEntry {
            bitrate_bps,
            ..tmmb_entry()
        };
        write_tmmbr(&mut out, 1, &[e]).expect("builds");
        assert_eq!(
            parse_compound(&out).expect("parses"),
            [RtcpItem::Tmmbr {
                sender_ssrc: 1,
                entries: vec![e]
            }]
        );
    }
    // Precision beyond 17 bits is rounded down.
    out.clear();
    write_tmmbr(
        &mut out,
        1,
        &[TmmbEntry {
            bitrate_bps: 0x2_0001,
            ..tmmb_entry()
        }],
    )
    .expect("builds");
    let [RtcpItem::Tmmbr { entries, .. }] = &parse_compound(&out).expect("parses")[..] else {
        panic!("one TMMBR expected");
    };
    assert_eq!(entries[0].bitrate_bps, 0x2_0000);
    // Exponent 63 with a full mantissa exceeds u64: saturates.
    let mut huge = TMMBR;
    huge[16..20].copy_from_slice(&0xffff_fe00u32.to_be_bytes());
    let [RtcpItem::Tmmbr { entries, .. }] = &parse_compound(&huge).expect("parses")[..] else {
        panic!("one TMMBR expected");
    };
    assert_eq!(entries[0].bitrate_bps, u64::MAX);

    assert_eq!(
        write_tmmbr(
            &mut out,
            1,
            &[TmmbEntry {
                overhead: 512,
                ..tmmb_entry()
            }]
        ),
        Err(RtcpWriteError::OverheadTooLarge(512))
    );
    assert_eq!(
        write_tmmbr(&mut out, 1, &[]),
        Err(RtcpWriteError::NoEntries)
    );
}

#[test]
fn rtcp_compound_rr_sdes_parses_and_builds() {
    let items = parse_compound(&RR_SDES).expect("parses");
    assert_eq!(
        items,
        [
            RtcpItem::ReceiverReport {
                ssrc: 0x902f_9e2e,
                reports: vec![report()]
            },
            RtcpItem::Sdes {
                chunks: vec![SdesChunk {
                    ssrc: 0x902f_9e2e,
                    cname: Some("user".into())
                }]
            },
        ]
    );
    let mut out = Vec::new();
    write_rr(&mut out, 0x902f_9e2e, &[report()]).expect("builds");
    write_sdes_cname(&mut out, 0x902f_9e2e, b"user").expect("builds");
    assert_eq!(out, RR_SDES);
}

#[test]
fn rtcp_bye_parses_and_builds() {
    assert_eq!(
        parse_compound(&BYE).expect("parses"),
        [RtcpItem::Bye {
            ssrcs: vec![0x902f_9e2e, 0x0102_0304]
        }]
    );
    let mut out = Vec::new();
    assert_eq!(write_bye(&mut out, &[0x902f_9e2e, 0x0102_0304]), Ok(12));
    assert_eq!(out, BYE);
}

#[test]
fn rtcp_bye_with_reason_aligned_by_p_bit_parses() {
    // rtc-rtcp-style BYE: reason "ab" aligned with a 1-octet P-bit padding.
    #[rustfmt::skip]
    let bytes = [0xa1, 0xcb, 0x00, 0x02, 0, 0, 0, 9, 0x02, b'a', b'b', 0x01];
    assert_eq!(
        parse_compound(&bytes).expect("parses"),
        [RtcpItem::Bye { ssrcs: vec![9] }]
    );
}

#[test]
fn rtcp_sr_and_pli_round_trip() {
    let info = SenderInfo {
        ntp_time: 0x0102_0304_0506_0708,
        rtp_time: 90_000,
        packet_count: 10,
        octet_count: 1000,
    };
    let mut out = Vec::new();
    write_sr(&mut out, 5, info, &[report()]).expect("builds");
    let sr_len = out.len();
    assert_eq!(write_pli(&mut out, 5, 6), Ok(12));
    assert_eq!(
        out[sr_len..],
        [0x81, 0xce, 0x00, 0x02, 0, 0, 0, 5, 0, 0, 0, 6]
    );
    assert_eq!(
        parse_compound(&out).expect("parses"),
        [
            RtcpItem::SenderReport {
                ssrc: 5,
                info,
                reports: vec![report()]
            },
            RtcpItem::Pli {
                sender_ssrc: 5,
                media_ssrc: 6
            },
        ]
    );
}

#[test]
fn rtcp_padding_is_not_read_as_fci() {
    // The FIR of FIR with its first entry only, plus 8 octets of P-bit padding: without
    // stripping, the padding would read as a second FCI entry.
    let mut padded = FIR[..20].to_vec();
    padded[0] |= 0x20;
    padded[3] = 6;
    padded.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 8]);
    let entries = vec![fir_entries()[0].clone()];
    assert_eq!(
        parse_compound(&padded).expect("parses"),
        [RtcpItem::Fir {
            sender_ssrc: 0x1122_3344,
            entries
        }]
    );
}

#[test]
fn rtcp_unknown_types_are_reported_not_decoded() {
    // XR (207) and a transport-wide CC (205, FMT 15) with a body that is garbage for it.
    #[rustfmt::skip]
    let bytes = [0x80, 0xcf, 0x00, 0x00, 0x8f, 0xcd, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef];
    assert_eq!(
        parse_compound(&bytes).expect("parses"),
        [
            RtcpItem::Other {
                packet_type: 207,
                count: 0
            },
            RtcpItem::Other {
                packet_type: 205,
                count: 15
            }
        ]
    );
}

#[test]
fn rtcp_malformed_inputs_give_typed_errors() {
    let reason = |b: &[u8]| parse_compound(b).map(|_| ()).map_err(|e| e.reason());
    assert_eq!(reason(&[]), Err("rtcp_empty"));
    assert_eq!(reason(&vec![0x80; 65536]), Err("rtcp_too_long"));
    assert_eq!(reason(&[0x81, 0xcb, 0x00]), Err("rtcp_truncated"));
    assert_eq!(
        reason(&[0x81, 0xcb, 0x00, 0x02, 0, 0, 0, 1]),
        Err("rtcp_truncated")
    );
    assert_eq!(
        reason(&[0x41, 0xcb, 0x00, 0x01, 0, 0, 0, 1]),
        Err("rtcp_bad_version")
    );
    assert_eq!(
        reason(&[0xa1, 0xcb, 0x00, 0x01, 0, 0, 0, 0]),
        Err("rtcp_bad_padding")
    );
    assert_eq!(
        reason(&[0xa1, 0xcb, 0x00, 0x01, 0, 0, 0, 5]),
        Err("rtcp_bad_padding")
    );
    // A FIR with half an FCI entry; a TMMBR with no entry; a BYE claiming 2 sources in 1 word.
    assert_eq!(
        reason(&[0x84, 0xce, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]),
        Err("rtcp_malformed")
    );
    assert_eq!(
        reason(&[0x83, 0xcd, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0]),
        Err("rtcp_malformed")
    );
    assert_eq!(
        reason(&[0x82, 0xcb, 0, 1, 0, 0, 0, 1]),
        Err("rtcp_malformed")
    );
    // An APP packet without its name.
    assert_eq!(
        reason(&[0x80, 0xcc, 0, 1, 0, 0, 0, 1]),
        Err("rtcp_malformed")
    );
}

#[test]
fn rtcp_app_packets_round_trip_and_the_writer_refuses_what_rfc_3550_cannot_carry() {
    let mut out = Vec::new();
    let len = write_app(
        &mut out,
        3,
        0xdead_beef,
        *b"GSIU",
        &[1, 2, 3, 4, 5, 6, 7, 8],
    )
    .unwrap();
    assert_eq!(len, out.len());
    assert_eq!(
        parse_compound(&out).unwrap(),
        [RtcpItem::App {
            subtype: 3,
            ssrc: 0xdead_beef,
            name: *b"GSIU",
            data: vec![1, 2, 3, 4, 5, 6, 7, 8],
        }]
    );
    assert_eq!(
        write_app(&mut out, 32, 1, *b"GSIU", &[]),
        Err(RtcpWriteError::Unaligned)
    );
    assert_eq!(
        write_app(&mut out, 0, 1, *b"GSIU", &[1, 2]),
        Err(RtcpWriteError::Unaligned)
    );
}

#[test]
fn rtcp_builders_reject_what_cannot_be_encoded() {
    let mut out = vec![1, 2, 3];
    assert_eq!(write_fir(&mut out, 1, &[]), Err(RtcpWriteError::NoEntries));
    assert_eq!(
        write_nack(&mut out, 1, 2, &[]),
        Err(RtcpWriteError::NoEntries)
    );
    let too_many: Vec<u32> = (0..32).collect();
    assert_eq!(
        write_bye(&mut out, &too_many),
        Err(RtcpWriteError::TooManySources)
    );
    assert_eq!(
        write_sdes_cname(&mut out, 1, &[b'x'; 256]),
        Err(RtcpWriteError::TextTooLong)
    );
    let reports = vec![report(); 32];
    assert_eq!(
        write_rr(&mut out, 1, &reports),
        Err(RtcpWriteError::TooManySources)
    );
    assert_eq!(
        write_sr(&mut out, 1, SenderInfo::default(), &reports),
        Err(RtcpWriteError::TooManySources)
    );
    // A failed build leaves the buffer as it was.
    assert_eq!(out, [1, 2, 3]);
}

/// Every valid packet above, as one compound, with the offsets where its packets end.
fn valid_compound() -> (Vec<u8>, Vec<usize>) {
    let mut all = Vec::new();
    let mut ends = Vec::new();
    for p in [&RR_SDES[..32], &RR_SDES[32..], &FIR, &NACK, &TMMBR, &BYE] {
        all.extend_from_slice(p);
        ends.push(all.len());
    }
    (all, ends)
}

#[test]
fn rtcp_every_truncation_errors_unless_at_a_packet_boundary() {
    let (all, ends) = valid_compound();
    let full = parse_compound(&all).expect("parses");
    assert_eq!(full.len(), ends.len());
    for cut in 0..all.len() {
        let got = parse_compound(&all[..cut]);
        match ends.iter().position(|&e| e == cut) {
            Some(i) => assert_eq!(got.as_deref(), Ok(&full[..=i]), "cut at {cut}"),
            None => assert!(got.is_err(), "cut at {cut} parsed: {got:?}"),
        }
    }
}

proptest! {
    #[test]
    fn rtcp_random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_compound(&bytes);
    }

    #[test]
    fn rtcp_random_bodies_behind_valid_headers_never_panic(
        pt in prop_oneof![Just(200u8), Just(201), Just(202), Just(203), Just(205), Just(206), 192u8..224],
        count in 0u8..32,
        padding: bool,
        body in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        // A consistent header over a random body reaches every body decoder.
        let words = body.len().div_ceil(4);
        let mut bytes = vec![0x80 | u8::from(padding) << 5 | count, pt, 0, words as u8];
        bytes.extend_from_slice(&body);
        bytes.resize(4 + 4 * words, 0);
        let _ = parse_compound(&bytes);
    }

    #[test]
    fn rtcp_corrupted_valid_compound_never_panics(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
        let (mut all, _) = valid_compound();
        let len = all.len();
        for (at, v) in flips {
            all[at % len] = v;
        }
        let _ = parse_compound(&all);
    }
}

// ---------------------------------------------------------------------------------------------
// Rewriting

fn seq(r: Option<Rewritten>) -> u16 {
    r.expect("forwarded").sequence_number
}

#[test]
fn rewrite_filtered_packets_leave_no_gap() {
    let mut r = SeqRewriter::new(500, 0);
    assert_eq!(seq(r.forward(10, 0)), 500);
    r.filter(11);
    r.filter(12);
    assert_eq!(seq(r.forward(13, 0)), 501);
    r.filter(14);
    assert_eq!(seq(r.forward(15, 0)), 502);
}

#[test]
fn rewrite_upstream_loss_stays_a_gap() {
    let mut r = SeqRewriter::new(500, 0);
    assert_eq!(seq(r.forward(10, 0)), 500);
    // 11 and 12 are lost upstream, 13 filtered: the subscriber should see two missing.
    r.filter(13);
    assert_eq!(seq(r.forward(14, 0)), 503);
}

#[test]
fn rewrite_injected_packets_consume_numbers() {
    let mut r = SeqRewriter::new(0, 0);
    assert_eq!(
        r.inject(1000),
        Rewritten {
            sequence_number: 0,
            timestamp: 1000
        }
    );
    assert_eq!(seq(r.forward(77, 3000)), 1);
    assert_eq!(r.inject(3000).sequence_number, 2);
    assert_eq!(r.inject(3000).sequence_number, 3);
    assert_eq!(seq(r.forward(78, 6000)), 4);
}

#[test]
fn rewrite_wraps_sequence_numbers() {
    let mut r = SeqRewriter::new(65534, 0);
    let out: Vec<u16> = [65533u16, 65534, 65535, 0, 1]
        .iter()
        .map(|&s| seq(r.forward(s, 0)))
        .collect();
    assert_eq!(out, [65534, 65535, 0, 1, 2]);
    r.filter(2);
    assert_eq!(r.inject(0).sequence_number, 3);
    assert_eq!(seq(r.forward(3, 0)), 4);
}

#[test]
fn rewrite_timestamps_use_a_fixed_offset_and_wrap() {
    let mut r = SeqRewriter::new(0, 100);
    assert_eq!(r.forward(1, u32::MAX - 50).map(|w| w.timestamp), Some(49));
    assert_eq!(r.forward(2, 10).map(|w| w.timestamp), Some(110));
}

#[test]
fn rewrite_injected_timestamps_never_go_backwards() {
    let mut r = SeqRewriter::new(0, 0);
    r.forward(1, u32::MAX - 10);
    r.forward(2, 20); // wrapped: newer than u32::MAX - 10
    // A snapshot built from older state is stamped with the latest timestamp sent.
    assert_eq!(r.inject(u32::MAX - 100).timestamp, 20);
    assert_eq!(r.inject(25).timestamp, 25);
    assert_eq!(r.inject(21).timestamp, 25);
}

#[test]
fn rewrite_late_packets_fill_their_gap_until_numbering_shifts() {
    let mut r = SeqRewriter::new(0, 0);
    assert_eq!(seq(r.forward(10, 0)), 0);
    assert_eq!(seq(r.forward(12, 0)), 2);
    assert_eq!(seq(r.forward(11, 0)), 1);
    assert_eq!(r.forward(12, 0), None, "duplicate of the newest");
    assert_eq!(seq(r.forward(14, 0)), 4);
    r.inject(0);
    assert_eq!(
        r.forward(13, 0),
        None,
        "its slot is before an injected packet"
    );
    r.filter(16);
    assert_eq!(
        r.forward(15, 0),
        None,
        "its slot is before a filtered packet"
    );
}

#[test]
fn rewrite_source_restart_continues_without_gap() {
    let mut r = SeqRewriter::new(0, 0);
    assert_eq!(seq(r.forward(10, 0)), 0);
    assert_eq!(seq(r.forward(40_000, 0)), 1);
    assert_eq!(seq(r.forward(40_001, 0)), 2);
    r.filter(5_000);
    assert_eq!(seq(r.forward(5_001, 0)), 3);
}

#[derive(Debug, Clone)]
enum Op {
    Forward(u32),
    Filter,
    Inject(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..5000).prop_map(Op::Forward),
        Just(Op::Filter),
        (0u32..5000).prop_map(Op::Inject),
    ]
}

proptest! {
    #[test]
    fn rewrite_sent_packets_are_continuous_and_timestamps_monotonic(
        first_seq: u16,
        first_src: u16,
        start_ts: u32,
        ts_offset: u32,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        // A lossless, in-order source whose timestamps advance; the relay filters and injects.
        let mut r = SeqRewriter::new(first_seq, ts_offset);
        let mut src_seq = first_src;
        let mut src_ts = start_ts;
        let mut sent: Vec<Rewritten> = Vec::new();
        for op in ops {
            match op {
                Op::Forward(dt) => {
                    src_ts = src_ts.wrapping_add(dt);
                    let w = r.forward(src_seq, src_ts).expect("in-order packets are forwarded");
                    prop_assert_eq!(w.timestamp, src_ts.wrapping_add(ts_offset));
                    sent.push(w);
                    src_seq = src_seq.wrapping_add(1);
                }
                Op::Filter => {
                    r.filter(src_seq);
                    src_seq = src_seq.wrapping_add(1);
                }
                Op::Inject(back) => sent.push(r.inject(src_ts.wrapping_sub(back))),
            }
        }
        for (i, w) in sent.iter().enumerate() {
            prop_assert_eq!(w.sequence_number, first_seq.wrapping_add(i as u16));
        }
        for pair in sent.windows(2) {
            prop_assert!((pair[1].timestamp.wrapping_sub(pair[0].timestamp) as i32) >= 0);
        }
    }
}
