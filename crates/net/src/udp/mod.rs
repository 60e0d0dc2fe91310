//! Datagrams in batches: [`batch`] sends, [`recv`] reads, `mmsg` makes the system calls
//! without allocating.

pub mod batch;
mod mmsg;
pub mod recv;
