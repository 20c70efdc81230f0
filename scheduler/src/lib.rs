//! Kadence's scheduling centre.
//!
//! A tour, following one fire:
//! - [`config`]: typed configuration (file, then `KADENCE_…` environment).
//! - [`model`]: the domain nouns: apps, jobs, runs (job-log rows), pending fires, executors,
//!   reports; [`enums`]: the enumerations users type and the error naming accepted values.
//! - [`store`]: the [`Store`](store::Store) trait with SQLite, PostgreSQL and MySQL backends: apps,
//!   jobs and job-log rows (one per trigger, keyed by its deterministic trigger id).
//! - [`schedule`]: Quartz cron, fixed rate and manual-only schedules, per-job time zone;
//!   [`quartz`] reads cron expressions as Kadence and as Quartz (XXL-JOB) do, and gives their
//!   fires when the clocks change.
//! - [`planning`]: pure fire planning: which fires of a due job a scan writes, misfires.
//! - [`shards`]: jobs hash into schedule shards; each node owns a share of them under a
//!   lease with a fencing token, renewed by its [`ShardLeaser`](shards::ShardLeaser). There is
//!   no global schedule lock.
//! - [`preread`]: `pre_read_once(now)` reads the due jobs of this node's shards (fences
//!   checked in the same transaction), plans their fires and writes them as one compact
//!   batch per shard, with reserved job-log ids (the durable half of the time wheel).
//! - [`intake`]: the one way into the wheel: every fire (schedule, claim, manual, retry,
//!   child) is written durably, owned by this node under a lease, then handed over.
//! - [`open_batches`]: the fires of this node's batches not yet acknowledged, which move
//!   each batch's lease.
//! - [`wheel`]: the in-memory millisecond time wheel that releases each pending fire at its time.
//! - [`routing`]: the route strategy picks the partition of `{prefix}.triggers.{app}`, among
//!   the app's partitions ([`partitions`]).
//! - [`registry`]: the live executors, from the beats they publish to `{prefix}.beats`;
//!   FAILOVER and BUSYOVER route by it, `GET /api/executors` lists it.
//! - [`monitors`]: after a run finished — retries with backoff, alarms (e-mail, webhook),
//!   child jobs.
//! - [`lost_runs`]: fails runs whose executor died and whose result can no longer arrive.
//! - [`dispatch`]: builds the `TriggerRecord`, produces it with an idempotent producer, retries
//!   retriable errors, and drops fires cancelled meanwhile.
//! - [`signer`]: every trigger and control record is signed (Ed25519, headers) with the
//!   cluster's newest key, kept in the store ([`SigningKeys`](store::SigningKeys)) and
//!   refreshed on every node, so executors that trust its public key refuse forgeries.
//! - [`acks`]: writes the runs of acknowledged triggers (DISPATCHED) and settles their
//!   batches, in batches, retrying until the database takes them; until then no claim
//!   re-emits them.
//! - [`cancellations`]: a stop or a schedule edit cancels the job's planned fires; every node
//!   learns of it and does not emit its copies.
//! - [`claims`]: takes over batches and pending fires whose owner's lease expired (a dead
//!   node) and emits their unacknowledged fires with the same trigger ids.
//! - [`results`]: consumes `{prefix}.results` and completes job-log rows, first result wins.
//! - [`replay`]: replays past triggers read back from a trigger topic, backfills fires that
//!   never fired, and keeps shadow runs' results for a diff report against production.
//! - [`logs`]: stores the lines runs write (`{prefix}.logs`) for the rolling log view.
//! - [`dead_letters`]: fails the runs whose triggers an executor dead-lettered, with the
//!   reason, so that alarms and retries see them.
//! - [`executor_auth`]: what executors write (results, logs, beats, dead letters) must be
//!   signed by an executor key of its app; every reader checks it with the node's keyring.
//!   Results, logs and the beats reader are batch readers of `kadence_kafka::batch`.
//! - [`kafka`]: topic administration and the control channel; the Kafka plumbing shared with
//!   executors (client settings, retries, dead letters, batch consumers) is `kadence-kafka`.
//! - [`api`]: the HTTP API (axum) the CLI and console use, paginated and under load limits;
//!   [`cli`]: the `kadence` command; [`console`]: the web console, served at `/`, which
//!   works through that API; [`book`]: the Kadence book, served at `/docs/` from
//!   `api.book_dir` when set, which the console's help links to.
//! - [`app`]: wires everything into a running [`Scheduler`](app::Scheduler) with one shutdown;
//!   [`pools`]: its three connection pools (scheduling, background, API).
//! - [`database_watch`]: whether the node reaches its database, checked every second: one log
//!   line per outage, a gauge, and the readiness answer `GET /health/ready`.
//! - [`metrics`]: every Prometheus metric the node exports on `GET /metrics`, names and
//!   labels in one place.
//! - [`traces`]: the node's spans of a run's trace (dispatch, completion) and of pre-read
//!   scans, carried across Kafka in `traceparent` headers, exported over OTLP when
//!   `[telemetry]` names an endpoint.
//! - [`clock`]: injectable time for the step functions, and [`run_every`](clock::run_every),
//!   the loop most background steps run in (its failures logged by
//!   [`FailureLog`](kadence_kafka::FailureLog), as every retrying loop's are).
//! - [`import`]: `kadence import xxl-job`: an XXL-JOB database's groups, jobs, script
//!   versions and users mapped onto apps, jobs and users (a pure plan with every difference
//!   in behaviour, written in one transaction through the store's
//!   [`Imports`](store::Imports) half); imported users set a password with a one-time reset
//!   token ([`PasswordResets`](store::PasswordResets)).
//! - [`auth`]: passwords (Argon2id), tokens (random, stored as SHA-256) and the first admin
//!   of a fresh database; users, grants and tokens are kept by the store's
//!   [`Accounts`](store::Accounts) half.

pub mod acks;
pub mod api;
pub mod app;
pub mod auth;
pub mod book;
pub mod cancellations;
pub mod claims;
pub mod cli;
pub mod clock;
pub mod config;
pub mod console;
pub mod database_watch;
pub mod dead_letters;
pub mod dispatch;
pub mod enums;
pub mod executor_auth;
pub mod import;
pub mod intake;
pub mod kafka;
pub mod logs;
pub mod lost_runs;
pub mod metrics;
pub mod model;
pub mod monitors;
pub mod open_batches;
pub mod partitions;
pub mod planning;
pub mod pools;
pub mod preread;
pub mod quartz;
pub mod registry;
pub mod replay;
pub mod results;
pub mod routing;
pub mod schedule;
pub mod shards;
pub mod signer;
pub mod store;
pub mod traces;
pub mod wheel;
