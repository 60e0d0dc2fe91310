//! The WebRTC port's reader: one task reads every datagram of the port and hands each to
//! the shard that owns its peer, by STUN username or by source address.

use super::{Inbound, Routes, shard_of_ufrag};
use crate::metrics::Metrics;
use bytes::BytesMut;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// Largest datagram taken: larger than any a peer sends (DTLS records of at most an SCTP
/// packet, STUN checks); a larger one is dropped as `oversized`.
const MAX_DATAGRAM: usize = 2048;

/// Bytes the receive arena grows by: each datagram is split off it, so reading allocates
/// once per this many bytes, not per datagram.
const ARENA: usize = 256 * 1024;

/// STUN's magic cookie (RFC 8489 §5).
const MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xa4, 0x42];

/// The USERNAME attribute.
const ATTR_USERNAME: u16 = 0x0006;

/// What a datagram is, for routing.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Kind<'a> {
    /// A STUN message with a USERNAME: the recipient's (the relay's) ufrag.
    Stun(&'a [u8]),
    /// A STUN message without one.
    StunWithoutUsername,
    /// Anything else (DTLS, or garbage the owning peer connection refuses).
    Other,
}

/// Classifies a datagram: STUN by RFC 7983's first byte and the magic cookie.
pub(super) fn classify(d: &[u8]) -> Result<Kind<'_>, &'static str> {
    let Some(&first) = d.first() else {
        return Err("too_short");
    };
    if first > 3 {
        return Ok(Kind::Other);
    }
    if d.len() < 20 || d.get(4..8) != Some(&MAGIC_COOKIE[..]) {
        return Err("webrtc_malformed_stun");
    }
    let mut rest = d.get(20..).unwrap_or_default();
    while rest.len() >= 4 {
        let kind = u16::from_be_bytes([rest[0], rest[1]]);
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        let value = rest.get(4..4 + len).ok_or("webrtc_malformed_stun")?;
        if kind == ATTR_USERNAME {
            let local = value.split(|&b| b == b':').next().unwrap_or_default();
            return Ok(Kind::Stun(local));
        }
        rest = rest.get(4 + len.next_multiple_of(4)..).unwrap_or_default();
    }
    Ok(Kind::StunWithoutUsername)
}

/// The shard that owns a datagram from `from`, or why it is dropped.
fn route(d: &[u8], from: std::net::SocketAddr, routes: &Routes) -> Result<u8, &'static str> {
    match classify(d)? {
        Kind::Stun(ufrag) => shard_of_ufrag(ufrag).ok_or("webrtc_unknown_username"),
        Kind::StunWithoutUsername | Kind::Other => routes
            .get(&from)
            .map(|s| *s)
            .ok_or("webrtc_unknown_address"),
    }
}

/// Reads the port until the task is aborted (the endpoint dropped).
pub(super) async fn run(
    socket: UdpSocket,
    inboxes: Vec<mpsc::Sender<Inbound>>,
    routes: Routes,
    metrics: Metrics,
) {
    let mut arena = BytesMut::new();
    loop {
        // Room for the largest datagram UDP carries, so none is cut short unseen.
        if arena.capacity() < u16::MAX.into() {
            arena.reserve(ARENA);
        }
        let from = match socket.recv_buf_from(&mut arena).await {
            Ok((_, from)) => from,
            Err(e) => {
                // ICMP errors surfaced by some platforms: nothing to do for one datagram.
                tracing::debug!(error = %e, "WebRTC receive error");
                arena.clear();
                continue;
            }
        };
        let datagram = arena.split();
        if datagram.len() > MAX_DATAGRAM {
            metrics.drop("oversized");
            continue;
        }
        let shard = match route(&datagram, from, &routes) {
            Ok(s) => s,
            Err(reason) => {
                metrics.drop(reason);
                continue;
            }
        };
        let Some(inbox) = inboxes.get(usize::from(shard)) else {
            metrics.drop("webrtc_unknown_username");
            continue;
        };
        if inbox.try_send((from, datagram)).is_err() {
            metrics.drop("webrtc_inbound_full");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binding request with `username` (and no integrity: routing needs none).
    fn binding(username: &[u8]) -> Vec<u8> {
        let pad = username.len().next_multiple_of(4);
        let mut m = vec![0x00, 0x01];
        m.extend_from_slice(&u16::try_from(4 + pad).unwrap().to_be_bytes());
        m.extend_from_slice(&MAGIC_COOKIE);
        m.extend_from_slice(&[7; 12]);
        m.extend_from_slice(&ATTR_USERNAME.to_be_bytes());
        m.extend_from_slice(&u16::try_from(username.len()).unwrap().to_be_bytes());
        m.extend_from_slice(username);
        m.resize(20 + 4 + pad, 0);
        m
    }

    #[test]
    fn stun_is_routed_by_the_relays_half_of_the_username() {
        let m = binding(b"01abcdefabcdefab:browser");
        assert_eq!(classify(&m), Ok(Kind::Stun(b"01abcdefabcdefab")));
        let routes = Routes::default();
        let from = "127.0.0.1:9".parse().unwrap();
        assert_eq!(route(&m, from, &routes), Ok(1));
        assert_eq!(
            route(&binding(b"nobody:x"), from, &routes),
            Err("webrtc_unknown_username")
        );
    }

    #[test]
    fn other_datagrams_are_routed_by_a_checked_address() {
        let routes = Routes::default();
        let from = "127.0.0.1:9".parse().unwrap();
        let dtls = [22u8, 0xfe, 0xfd, 0, 0];
        assert_eq!(route(&dtls, from, &routes), Err("webrtc_unknown_address"));
        routes.insert(from, 3);
        assert_eq!(route(&dtls, from, &routes), Ok(3));
    }

    /// Every reason the reader drops a datagram for.
    const REASONS: [&str; 4] = [
        "too_short",
        "webrtc_malformed_stun",
        "webrtc_unknown_username",
        "webrtc_unknown_address",
    ];

    /// Routes `d` from a stranger: a shard only for STUN naming a relay-shaped ufrag,
    /// else one of [`REASONS`].
    fn routed_or_refused(d: &[u8]) -> Result<(), proptest::test_runner::TestCaseError> {
        let from = "127.0.0.1:9".parse().unwrap();
        match route(d, from, &Routes::default()) {
            Ok(k) => proptest::prop_assert!(
                matches!(classify(d), Ok(Kind::Stun(u)) if shard_of_ufrag(u) == Some(k))
            ),
            Err(reason) => proptest::prop_assert!(REASONS.contains(&reason), "{reason}"),
        }
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn any_datagram_is_routed_by_a_relay_ufrag_or_refused(
            d in proptest::collection::vec(0u8..=255, 0..128),
        ) {
            routed_or_refused(&d)?;
        }

        #[test]
        fn any_username_is_routed_by_a_relay_ufrag_or_refused(name in "[ -~]{0,40}") {
            routed_or_refused(&binding(name.as_bytes()))?;
        }
    }

    #[test]
    fn truncated_stun_is_malformed_never_a_panic() {
        let m = binding(b"01abcdefabcdefab:browser");
        for n in 1..m.len() {
            let _ = classify(&m[..n]);
        }
        assert_eq!(classify(&m[..10]), Err("webrtc_malformed_stun"));
        let mut bad = m.clone();
        bad[22] = 0xff; // USERNAME length past the end
        assert_eq!(classify(&bad), Err("webrtc_malformed_stun"));
        assert_eq!(classify(&[]), Err("too_short"));
    }
}
