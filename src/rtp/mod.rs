//! RTP and RTCP primitives.
