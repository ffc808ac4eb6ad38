//! The live face of cotenant: a controller that runs one `core::Engine` with a
//! policy from the registry behind an HTTP/JSON API, node agents that run the
//! jobs it starts, the client those commands use, and the write-ahead journal
//! that makes the controller's history replayable in the simulator.
//!
//! Dependencies point one way: this crate uses `core` and `policies`, never `sim`.

pub mod agent;
pub mod agent_api;
pub mod api;
pub mod bench;
pub mod client;
pub mod controller;
pub mod history;
pub mod http;
pub mod journal;
pub mod setup;
