//! Recording rooms (`docs/recording.md`): the writer threads that turn a shard's
//! recorder ring into pcapng segments ([`writer`]).

pub mod writer;
