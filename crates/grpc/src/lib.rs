//! gRPC unary calls for loadlab, resolved at run time from a `.proto` file, like ghz.
//!
//! This crate is the part of `loadlab grpc` that needs no network: it turns
//! `--proto FILE --call package.Service/Method --data JSON --metadata …` into the bytes and
//! headers a transport sends for every request, and classifies what comes back.
//!
//! # Layout
//!
//! - [`call`]: [`UnaryCall::resolve`] compiles the `.proto` with `protox` (pure Rust, no
//!   `protoc`), finds the method, checks it is unary and builds the request message from
//!   JSON with `prost-reflect`. Also the HTTP/2 `:path` and response decoding.
//! - `json` (private): checks request JSON against the message descriptor first, so a
//!   misfit names the field and the expected type.
//! - [`frame`]: the gRPC length-prefixed message framing (5-byte header).
//! - [`status`]: [`GrpcStatus`], the 17 canonical status codes, parsed from `grpc-status`.
//! - [`metadata`]: [`parse_metadata`], validated custom request metadata.
//! - [`error`]: [`GrpcError`]; every variant says what is wrong and where.
//! - `templated` (private): request JSON holding `${...}` templates (loadlab-template's
//!   syntax) turned into a [`MessageTemplate`] with the message descriptor: fields without
//!   templates encoded once, templated ones kept as template text, the JSON checked with
//!   each template at its zero value.
//! - [`message`]: [`MessageTemplate`] (serializable, no descriptors, so it travels with a
//!   [`GrpcCall`]) and [`CompiledMessage`], which checks its templates against a data file
//!   and renders one call's gRPC frame into reused buffers (no allocation per call).
//!   Available without the `resolve` feature.
//! - [`reflection`]: server reflection (`grpc.reflection.v1` and `v1alpha`): the queries
//!   sent when no `.proto` is given and the descriptor set built from the answers (the
//!   exchange is the caller's: it needs a connection). [`Schema`] says where a call's
//!   service is described: a `.proto`, or a descriptor set.
//! - [`wire`]: [`GrpcCall`], a resolved call as the transport sends it (serializable), built
//!   by [`GrpcCall::resolve`] for `loadlab grpc` and plan scenarios alike.
//!
//! All validation happens in [`UnaryCall::resolve`], [`CompiledMessage::compile`] and
//! [`parse_metadata`], before any load is generated; the per-request path is
//! [`UnaryCall::request_frame`] (a reference-counted clone) or
//! [`CompiledMessage::render_frame`] (templated messages, no allocation) and
//! [`GrpcStatus::from_trailer`] (no allocation).

#[cfg(feature = "resolve")]
pub mod call;
pub mod error;
pub mod fields;
pub mod frame;
#[cfg(feature = "resolve")]
mod json;
pub mod message;
pub mod metadata;
#[cfg(feature = "resolve")]
pub mod reflection;
pub mod status;
#[cfg(feature = "resolve")]
mod templated;
pub mod wire;

#[cfg(feature = "resolve")]
pub use call::{Schema, UnaryCall};
pub use error::GrpcError;
pub use message::{CompiledMessage, MessageTemplate};
pub use metadata::parse_metadata;
pub use status::GrpcStatus;
pub use wire::{CallInput, GrpcCall, MatchField, Reads, DEFAULT_MESSAGES_PER_CALL};
