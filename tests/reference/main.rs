//! The book's reference pages, generated from the code and held to it.
//!
//! Each test renders one page of `docs/src/reference/` from what the code says now (the
//! configuration types' doc comments and defaults, the metric registries, the OpenAPI
//! document, the clap command tree) and compares it with the page on disk. A difference
//! fails the test, showing it; `UPDATE_EXPECT=1 cargo test -p kadence-tests --test
//! reference_docs` writes the pages anew (the `expect-test` crate's convention), after
//! which the difference is part of the change that caused it, for review.
//!
//! The pages are committed rather than generated at build time so that the book builds with
//! mdBook alone and a change to a setting, a metric, a route or a flag shows in review as a
//! change to its documentation.
//!
//! Beside the pages, `console_help` holds the console's help links to the book's headings,
//! by the same heading-id rule (`markdown::heading_anchors`) the generated pages are checked
//! with.

mod cli;
mod config;
mod console_help;
mod http_api;
mod markdown;
mod metrics;
