//! Kadence's scheduling centre.
//!
//! The crate is in layers, one folder each; a layer uses the ones below it and never one above
//! (the shape check, `infra/shape.py`, fails on a loop between them):
//!
//! ```text
//!   cli ─────────────── the `kadence` command: `serve` runs a node, the rest talk to one
//!   app ─────────────── wiring: builds a node from its config, runs it, one shutdown
//!    │
//!   http ────────────── API, console, book            operations ── import, replay, accounts
//!    │                                                  │
//!   monitors ────────── follow-up of finished runs, lost runs, the executor sweep
//!   readers ─────────── results, logs, beats, shadow results, dead letters (from Kafka)
//!   engine ──────────── shards, pre-read, intake, wheel, routing, dispatch, acks, claims
//!    │
//!   store ───────────── SQLite, PostgreSQL, MySQL behind the Store trait
//!   domain ──────────── model, enums, schedules, Quartz cron, fire planning
//!
//!   beside them all: config, clock, metrics, traces
//! ```
//!
//! A tour, following one fire:
//! - [`domain`]: the nouns (apps, jobs, runs, executors) and the pure rules: schedules, cron
//!   as Quartz reads it, which fires a scan plans.
//! - [`store`]: the [`Store`](store::Store) trait with SQLite, PostgreSQL and MySQL backends,
//!   in halves by concern (jobs, fires, runs, history, the executor rows, accounts…), each
//!   caller taking the half it uses: apps, jobs and job-log rows (one per trigger, keyed by
//!   its deterministic trigger id).
//! - [`engine`]: a node leases schedule shards, pre-reads their due jobs, writes each fire
//!   durably before the in-memory wheel releases it at its millisecond, routes it to a
//!   partition, signs and produces it, records its acknowledgement, and claims the fires of a
//!   node that died.
//! - [`readers`]: what executors publish (results, log lines, beats, shadow results, dead
//!   letters) read back into the store, each record's executor signature checked; logs,
//!   beats and shadow results share one batch reader.
//! - [`monitors`]: after a run finished, retries with backoff, alarms (e-mail, webhook) and
//!   child jobs; runs whose executor died failed as lost; executors that stopped beating
//!   marked dead.
//! - [`http`]: the HTTP API (axum) the CLI and console use, the web console, and the book.
//! - [`operations`]: the XXL-JOB import, replays, backfills and shadow runs, accounts.
//! - [`app`]: wires everything into a running [`Scheduler`](app::Scheduler) with one
//!   shutdown; its three connection pools, its database watch, and topic administration.
//! - [`cli`]: the `kadence` command.
//! - Beside every layer: [`config`], typed configuration (file, then `KADENCE_…`
//!   environment); [`clock`], injectable time and [`run_every`](clock::run_every), the loop
//!   most background steps run in; [`metrics`], every Prometheus metric the node exports;
//!   [`traces`], the node's spans of a run's trace, carried across Kafka in `traceparent`
//!   headers.

pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod domain;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod monitors;
pub mod operations;
pub mod readers;
pub mod store;
pub mod traces;
