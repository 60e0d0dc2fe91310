//! The framing of a link between nodes (`cluster::wire`) on arbitrary bytes:
//! a control frame (its length prefix, then its body) and a datagram.
//!
//! Checks: no panic; a control frame that parses writes back to the same bytes, prefix
//! included; a datagram's header that parses writes back to the same 13 bytes.
#![no_main]

use gsrelay_server::internal::link_wire as wire;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 2
        && let Ok(len) = wire::control_len([data[0], data[1]])
        && let Some(body) = data.get(2..2 + len)
        && let Ok(frame) = wire::read_control(body)
    {
        let mut out = Vec::new();
        wire::write_control(&frame, &mut out).expect("a parsed frame writes");
        assert_eq!(out, &data[..2 + len], "{frame:?}");
    }
    if let Ok((header, packet)) = wire::read_datagram(data) {
        let mut head = [0u8; wire::DATAGRAM_HEADER];
        wire::write_datagram_header(&header, &mut head);
        assert_eq!(&head[..], &data[..wire::DATAGRAM_HEADER]);
        assert_eq!(packet, &data[wire::DATAGRAM_HEADER..]);
    }
});
