//! The engine room: virtual time and what is built on it alone — clocks with skew, drift
//! and jumps ([`clock`]), timers ([`timer`]), the seeded random source ([`rng`]), the
//! trace ([`trace`]) and durations written as text in spec files ([`duration_text`]).
//!
//! Invariant: everything here is a pure function of virtual time and a seed; nothing here
//! knows Redis, a lock or a fault, so every room above can trust it and none below exists.
//! The executor and the network are not here: they carry the model's replies and the
//! history's events, so they live in [`crate::world`].
//!
//! May import: nothing.
pub mod clock;
pub mod duration_text;
pub mod rng;
pub mod timer;
pub mod trace;
