//! Copying forms of the in-place SRTP calls, for tests that keep the plaintext and the
//! protected packet side by side.

use gsrelay::rtp::{SrtpError, SrtpSession};

/// `seal_*` protect a copy of a packet; `open_*` unprotect a copy and return the plaintext.
pub trait Copying {
    fn seal_rtp(&mut self, plain: &[u8]) -> Result<Vec<u8>, SrtpError>;
    fn seal_rtcp(&mut self, plain: &[u8]) -> Result<Vec<u8>, SrtpError>;
    fn open_rtp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError>;
    fn open_rtcp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError>;
}

impl Copying for SrtpSession {
    fn seal_rtp(&mut self, plain: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let mut packet = plain.to_vec();
        self.protect_rtp(&mut packet)?;
        Ok(packet)
    }

    fn seal_rtcp(&mut self, plain: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let mut packet = plain.to_vec();
        self.protect_rtcp(&mut packet)?;
        Ok(packet)
    }

    fn open_rtp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let mut plain = packet.to_vec();
        let len = self.unprotect_rtp(&mut plain)?;
        plain.truncate(len);
        Ok(plain)
    }

    fn open_rtcp(&mut self, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
        let mut plain = packet.to_vec();
        let len = self.unprotect_rtcp(&mut plain)?;
        plain.truncate(len);
        Ok(plain)
    }
}
