//! Datagrams in batches: [`batch`] sends, [`recv`] reads; `sys` makes the system calls
//! (`sendmmsg`/`recvmmsg` with GSO and GRO on Linux, one datagram per call elsewhere)
//! without allocating.

pub mod batch;
pub mod recv;
mod sys;

pub use sys::MAX_DATAGRAMS;
