//! HTTP: everything a node serves.
//!
//! - [`api`]: the HTTP API (axum) the CLI and console use, paginated, under load limits, and
//!   described by its OpenAPI document;
//! - [`console`]: the web console, served at `/`, which works through that API;
//! - [`book`]: the Kadence book, served at `/docs/` from `api.book_dir` when set, which the
//!   console's help links to.

pub mod api;
pub mod book;
pub mod console;
