//! `gsrelay bench`: publishers and subscribers driven through the real HTTP API and
//! RTP/SRTP transport against an in-process relay, a remote relay or a plain UDP
//! reflector (the baseline), with throughput, loss, end-to-end latency, late-join
//! snapshot time, CPU and memory in a table and as JSON; the soak (`soak`) and
//! relay-restart (`restart`) runs, which check whole-state convergence against a relay
//! in a child process; and the cluster runs, a room across nodes (`nodes`) and nodes
//! killed one after another behind a Service (`failover`), and faults drawn from a
//! seed against a cluster of five (`chaos`), against child processes
//! sharing a `redis-server`. `docs/benchmarks.md` describes the method.
//!
//! The `gsrelay` binary's `bench` subcommand is [`cli::BenchArgs`]; this crate is the
//! load generator on its own, on the client crate and, for the relay it starts in
//! process, the server crate.
#![warn(missing_docs)]

pub mod baseline;
pub mod chaos;
pub mod cli;
pub mod cluster;
pub mod dist;
pub mod failover;
pub mod ffi;
pub mod impair;
pub mod nft;
pub mod nodes;
pub mod peers;
pub mod process;
pub mod report;
pub mod restart;
pub mod run;
pub mod scenario;
pub mod seek;
pub mod share;
pub mod soak;
pub mod state;
pub mod sys;

pub use report::{Report, SweepPoint, TargetKind};
pub use run::{RunOptions, Target, run};
pub use scenario::{BenchTransport, Scenario, Security};
