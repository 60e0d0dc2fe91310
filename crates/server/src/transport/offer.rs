//! The WHIP-style signalling of a WebRTC join ([`super::webrtc`]): the client's SDP offer is checked before
//! any relay state is touched, so a malformed offer or one without a data channel is
//! refused with a clear 422 (`docs/api.md`, "Errors").

use rtc::peer_connection::sdp::RTCSessionDescription;

/// Why a WebRTC join's offer cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    /// The offer is not SDP.
    #[error("sdp_offer is not a valid SDP offer: {0}")]
    Malformed(String),
    /// The offer carries no SCTP data-channel section.
    #[error(
        "sdp_offer has no data channel: it needs an m=application section over \
         UDP/DTLS/SCTP (create the data channel before createOffer)"
    )]
    NoDataChannel,
    /// The WebRTC stack refused the offer (the reason is its own).
    #[error("sdp_offer cannot be answered: {0}")]
    Refused(String),
    /// The relay is bound to the unspecified address, has no advertised address, and the
    /// request named no host it could use as its ICE candidate.
    #[error(
        "the relay cannot tell which address to offer WebRTC peers; its operator must set \
         --webrtc-advertise-addr"
    )]
    NoAddress,
}

impl OfferError {
    /// The stable error code the HTTP API answers with.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) | Self::Refused(_) => "invalid_sdp_offer",
            Self::NoDataChannel => "no_data_channel",
            Self::NoAddress => "webrtc_address_unknown",
        }
    }
}

/// Parses `sdp` as an offer and checks that it opens an SCTP data channel.
pub fn check_offer(sdp: &str) -> Result<RTCSessionDescription, OfferError> {
    if sdp.trim().is_empty() {
        return Err(OfferError::Malformed("it is empty".to_owned()));
    }
    let offer = RTCSessionDescription::offer(sdp.to_owned())
        .map_err(|e| OfferError::Malformed(e.to_string()))?;
    let parsed = offer
        .unmarshal()
        .map_err(|e| OfferError::Malformed(e.to_string()))?;
    let data = parsed.media_descriptions.iter().any(|m| {
        m.media_name.media == "application" && m.media_name.protos.iter().any(|p| p == "SCTP")
    });
    if !data {
        return Err(OfferError::NoDataChannel);
    }
    Ok(offer)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA_OFFER: &str = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n\
        a=group:BUNDLE 0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n\
        c=IN IP4 0.0.0.0\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\n\
        a=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\n\
        a=setup:actpass\r\na=mid:0\r\na=sctp-port:5000\r\n";

    #[test]
    fn a_data_channel_offer_passes() {
        check_offer(DATA_OFFER).expect("a data-channel offer");
    }

    #[test]
    fn garbage_and_empty_offers_are_malformed() {
        for sdp in ["", "  ", "hello", "v=0\r\nm=\r\n"] {
            let e = check_offer(sdp).expect_err(sdp);
            assert_eq!(e.code(), "invalid_sdp_offer", "{sdp:?}: {e}");
        }
    }

    #[test]
    fn an_audio_only_offer_has_no_data_channel() {
        let audio = DATA_OFFER.replace(
            "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
            "m=audio 9 UDP/TLS/RTP/SAVPF 111",
        );
        assert!(matches!(
            check_offer(&audio),
            Err(OfferError::NoDataChannel)
        ));
    }
}
