//! The RTP view (`RtpPacket::parse`) and every accessor, on arbitrary bytes.
//!
//! Checks: no panic; the demultiplexer's class agrees with a successful parse; the header
//! writer rebuilds the parsed packet byte for byte (padding octets other than the count
//! are written as zeros, so those are not compared); RFC 8285 elements re-written in
//! their form read back the same.
#![no_main]

use gsrelay_core::rtp::packet::append_padding;
use gsrelay_core::rtp::{ExtensionElement, PacketClass, RtpHeader, RtpPacket, WriteExtension, classify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let class = classify(data);
    let Ok(p) = RtpPacket::parse(data) else {
        return;
    };
    assert_ne!(class, PacketClass::Other, "a parsed packet is version 2");
    assert_eq!(p.version(), 2);
    assert_eq!(p.has_padding(), p.padding_len() != 0);
    let csrcs: Vec<u32> = p.csrcs().collect();
    assert_eq!(csrcs.len(), p.csrc_count());
    assert!(p.header_len() + p.payload().len() + usize::from(p.padding_len()) == data.len());

    let ext = p.extension();
    let header = RtpHeader {
        marker: p.marker(),
        payload_type: p.payload_type(),
        sequence_number: p.sequence_number(),
        timestamp: p.timestamp(),
        ssrc: p.ssrc(),
        csrcs: &csrcs,
        extension: ext.map(WriteExtension::from),
    };
    let mut rebuilt = Vec::new();
    let len = header
        .append_to(&mut rebuilt)
        .expect("a parsed header re-writes");
    assert_eq!(len, p.header_len());
    rebuilt.extend_from_slice(p.payload());
    if p.has_padding() {
        append_padding(&mut rebuilt, p.padding_len()).expect("padding re-writes");
    }
    let unpadded = data.len() - usize::from(p.padding_len());
    assert_eq!(rebuilt[..unpadded], data[..unpadded]);
    assert_eq!(rebuilt.last(), data.last());

    let Some((ext, form)) = ext.and_then(|e| Some((e, e.form()?))) else {
        return;
    };
    let elements: Vec<ExtensionElement> = ext.elements().collect();
    let header = RtpHeader {
        extension: Some(WriteExtension::Elements {
            form,
            app_bits: (ext.profile() & 0x0f) as u8,
            elements: &elements,
        }),
        ..header
    };
    let mut again = Vec::new();
    header
        .append_to(&mut again)
        .expect("parsed elements re-write");
    let reparsed = RtpPacket::parse(&again).expect("re-written elements parse");
    let ext = reparsed.extension().expect("has the extension");
    assert_eq!(ext.elements().collect::<Vec<_>>(), elements);
});
