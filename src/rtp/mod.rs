//! RTP and RTCP primitives.

pub mod srtp;
