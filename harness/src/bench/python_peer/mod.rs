//! The Python lock peers: redis-py's `redis.lock.Lock` and python-redis-lock, each benchmark
//! client a `python3` process of its own running the library from its pinned PyPI release
//! (harness/peers/lock_peer.py), driven over a line protocol on its stdin and stdout, so the
//! runner measures them exactly like the in-process contenders.
//!
//! The rooms, lowest first: [`library`] names the libraries, [`install`] puts their pinned
//! packages where the workers import them, [`worker`] is one process and its protocol,
//! [`pool`] keeps idle workers for the next cell, [`client`] is what a benchmark client
//! holds, and [`pipe_overhead`] measures the pipe alone, so a reader can subtract it.

pub mod client;
pub mod install;
pub mod library;
pub mod pipe_overhead;
pub mod pool;
pub mod worker;
