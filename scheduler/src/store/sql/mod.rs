//! The SQL the backends share: one implementation of [`Store`](super::Store) and each of its
//! halves on [`SqlStore<B>`](backend::SqlStore), ordinary code generic over the backend `B`
//! ([`SqlBackend`](backend::SqlBackend)).
//!
//! Generic code runs [`Statement`](statement::Statement)s, whose module says how the sqlx
//! bounds that once made macros the easier way are stated once. What differs between the
//! backends is said by [`SqlBackend`](backend::SqlBackend) (its locks, how it reserves job-log
//! ids, its plan hints, its migrations), or by a `match B::DIALECT` where a statement is
//! written once per [`dialect`]. Each table's columns, rows and the values written to it are
//! described once, in [`rows`](super::rows).
//!
//! The modules, each implementing its half of the store ([`store`] the store itself):
//! - the fire path: [`fires`] ([`Fires`](super::Fires): the pre-read scan, manual fires and
//!   retries, claims, dispatched marks), with [`fire_updates`] (the keyed batch updates and the
//!   claims by lease), [`batches`] ([`FireBatches`](super::FireBatches): a scan's fires as
//!   batches), [`writes`] (fires written one row each, once by trigger id), [`shards`]
//!   ([`ScheduleShards`](super::ScheduleShards), and the scan's fence check) and [`planning`]
//!   (the pure planning of a scan);
//! - runs: [`runs`] ([`Runs`](super::Runs): results, reads, follow-up claims), [`history`]
//!   ([`History`](super::History), and the run log lines), [`run_counts`] (the runs counted
//!   once each for the reports and the overview), [`unkept_runs`] (the succeeded
//!   runs their history policy does not keep that never had a row), [`replays`]
//!   ([`Replays`](super::Replays)), [`registry`]
//!   ([`ExecutorRegistry`](super::ExecutorRegistry), and the runs the lost-run monitor looks
//!   at);
//! - jobs: [`jobs`] ([`Jobs`](super::Jobs): apps, jobs, script versions), with [`job_writes`],
//!   which the import shares, and [`cancellations`], the cancellations of planned fires a
//!   stop or an edit leaves;
//! - people and keys: [`accounts`] with [`user_changes`] ([`Accounts`](super::Accounts)),
//!   [`password_resets`] ([`PasswordResets`](super::PasswordResets)), [`audit`]
//!   ([`AuditTrail`](super::AuditTrail)), [`signing`] ([`SigningKeys`](super::SigningKeys)),
//!   [`executor_keys`] ([`ExecutorKeys`](super::ExecutorKeys));
//! - pages and imports: [`console`] ([`Console`](super::Console)) and [`imports`]
//!   ([`Imports`](super::Imports)).
//!
//! Statements are prepared once per connection and kept in its cache of
//! [`STATEMENT_CACHE`] statements. A statement built as it goes has a text of its own for each
//! count of rows or ids it lists, so those churn through the cache; a recurring
//! count (a steady load's batches) still finds its statement, which keeps the fire path ~25 %
//! faster than preparing every time, and the cache's size bounds what they hold: up to
//! ~180 KB for a statement of 2 000 parameters. sqlx's default of 100 a connection let the
//! node's seventeen connections hold hundreds of MiB of them (found by the soak). On
//! PostgreSQL the fire path's batches (run rows, job advances, batch progress, results,
//! log lines, run counts) do not churn at all: they bind one array per column
//! ([`Statement::push_rows`](statement::Statement::push_rows)), one text whatever their
//! size.

pub(crate) mod accounts;
pub(crate) mod audit;
pub(crate) mod backend;
pub(crate) mod batches;
pub(crate) mod cancellations;
pub(crate) mod console;
pub(crate) mod dialect;
pub(crate) mod executor_keys;
pub(crate) mod fire_updates;
pub(crate) mod fires;
pub(crate) mod history;
pub(crate) mod imports;
pub(crate) mod job_writes;
pub(crate) mod jobs;
pub(crate) mod password_resets;
pub(crate) mod planning;
pub(crate) mod registry;
pub(crate) mod replays;
pub(crate) mod run_counts;
pub(crate) mod runs;
pub(crate) mod shards;
pub(crate) mod signing;
pub(crate) mod statement;
pub(crate) mod store;
pub(crate) mod unkept_runs;
pub(crate) mod user_changes;
pub(crate) mod writes;

/// Prepared statements each pooled connection keeps (see the module docs).
pub(crate) const STATEMENT_CACHE: usize = 24;

/// Rows per batched `UPDATE … FROM (VALUES …)`: 4 binds each, far below both bind limits.
pub(crate) const UPDATE_CHUNK: usize = 2_000;

/// Script versions kept per job (XXL-JOB keeps 30).
pub(crate) const GLUE_VERSIONS_KEPT: i64 = 30;

/// Rows written per multi-row `INSERT`: 21 binds each stays far below SQLite's 32 766 and
/// PostgreSQL's 65 535 bind limits.
pub(crate) const INSERT_CHUNK: usize = 500;
