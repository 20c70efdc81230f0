//! The SQL the backends share: one implementation of [`Store`](super::Store) and its halves
//! on [`SqlStore<B>`](backend::SqlStore), for the backends `B` ([`SqlBackend`](backend::SqlBackend)).
//!
//! It is being moved from macros to ordinary code generic over the backend. Generic code runs
//! [`Statement`](statement::Statement)s, whose module says how the sqlx bounds that once made
//! macros the easier way are stated once, and says what differs between the backends through
//! [`SqlBackend`](backend::SqlBackend) and `match B::DIALECT`. Generic already, each module
//! implementing its half of the store: [`jobs`] ([`Jobs`](super::Jobs): apps, jobs, script
//! versions; with [`job_writes`], which the import shares, and [`cancellations`], the
//! cancellations of planned fires a stop or an edit leaves), [`registry`]
//! ([`ExecutorRegistry`](super::ExecutorRegistry), and the runs the lost-run monitor looks
//! at), [`history`] ([`History`](super::History), and the run log lines), [`accounts`] with
//! [`user_changes`] ([`Accounts`](super::Accounts)), [`password_resets`]
//! ([`PasswordResets`](super::PasswordResets)), [`audit`] ([`AuditTrail`](super::AuditTrail)),
//! [`signing`] ([`SigningKeys`](super::SigningKeys)), [`executor_keys`]
//! ([`ExecutorKeys`](super::ExecutorKeys)), [`console`] ([`Console`](super::Console)) and
//! [`imports`] ([`Imports`](super::Imports)).
//!
//! The fire path is still the macro `impl_sql_store!`, expanded in each backend's file, and
//! moves next, measured on the throughput benchmark as it does: the [`Store`](super::Store),
//! [`Fires`](super::Fires) and [`Runs`](super::Runs) methods in the macro itself, calling what
//! [`fires`] (the pre-read scan), [`fire_updates`], [`writes`] (fires written once by trigger
//! id), [`batches`] ([`FireBatches`](super::FireBatches)) and [`shards`]
//! ([`ScheduleShards`](super::ScheduleShards)) generate beside it; [`replays`]
//! ([`Replays`](super::Replays)) writes its fires with them, so it moves with them.
//! [`planning`] is the pure planning of a scan. Besides its
//! [`SqlBackend`](backend::SqlBackend) implementation, a backend supplies the macro, as
//! inherent items of its `SqlStore`:
//! - `const BACKEND: &'static str` and `fn claim_expired_sql() -> &'static str`;
//! - `async fn apply_migrations(&self) -> Result<(), StoreError>`;
//! - `async fn reserve_log_ids_in(tx, count) -> Result<Vec<i64>, StoreError>`: job-log ids
//!   for rows written later;
//! - `async fn prefer_keyed_joins(tx) -> Result<(), StoreError>`: whatever the backend needs
//!   so that the keyed batches of `tx` (`UPDATE … FROM (VALUES …)`, `INSERT … SELECT` joining
//!   `VALUES`) probe the primary key rather than scan the table.
//!
//! Statements are prepared once per connection and kept in its cache of
//! [`STATEMENT_CACHE`] statements. A statement built with a `QueryBuilder` has a text of its
//! own for each count of rows or ids it lists, so those churn through the cache; a recurring
//! count (a steady load's batches) still finds its statement, which keeps the fire path ~25 %
//! faster than preparing every time, and the cache's size bounds what they hold: up to
//! ~180 KB for a statement of 2 000 parameters. sqlx's default of 100 a connection let the
//! node's seventeen connections hold hundreds of MiB of them (found by the soak).

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
mod lists;
pub(crate) mod password_resets;
pub(crate) mod planning;
pub(crate) mod registry;
pub(crate) mod replays;
pub(crate) mod shards;
pub(crate) mod signing;
pub(crate) mod statement;
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

pub(crate) use lists::{push_app_scope, push_in_list};

macro_rules! impl_sql_store {
    ($store:ty, $db:ty, $dialect:ident) => {
        // What the generated code names; the backend's file brings `StoreError` itself.
        use kadence_schemas::JobId;
        use $crate::domain::model::{
            Completion, CompletionOutcome, Job, PendingFire, Run, RunState,
        };
        use $crate::store::rows::{FireRow, JOB_COLUMNS, JobRow, RUN_COLUMNS, RunRow, convert_all};
        use $crate::store::sql::planning::plan_rows;
        use $crate::store::{
            DispatchAck, DispatchMarks, NewFire, PageRequest, PreReadOutcome, PreReadRequest,
        };

        /// This backend's text of a statement written with `$1`, `$2`, … placeholders (see
        /// [`dialect`](crate::store::sql::dialect)).
        fn backend_sql(text: &str) -> std::borrow::Cow<'_, str> {
            <$db as $crate::store::sql::backend::SqlBackend>::DIALECT.text(text)
        }

        /// The type a `CAST` to a 64-bit integer names.
        const BIGINT: &str = <$db as $crate::store::sql::backend::SqlBackend>::DIALECT.bigint();

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> &'static str {
                Self::BACKEND
            }

            async fn migrate(&self) -> Result<(), StoreError> {
                self.apply_migrations().await
            }

            async fn ping(&self) -> Result<(), StoreError> {
                sqlx::query("SELECT 1")
                    .execute(&self.pool)
                    .await
                    .map(|_| ())
                    .map_err(StoreError::query("check that the database answers"))
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Fires for $store {
            async fn recent_cancellations(
                &self,
                now_ms: i64,
            ) -> Result<Vec<$crate::store::FireCancellation>, StoreError> {
                $crate::store::sql::cancellations::recent_cancellations(self, now_ms).await
            }

            async fn insert_fire(
                &self,
                job: &Job,
                fire: &NewFire,
            ) -> Result<Vec<PendingFire>, StoreError> {
                fires::insert_fire(self, job, fire).await
            }

            async fn pre_read(
                &self,
                request: &PreReadRequest,
            ) -> Result<PreReadOutcome, StoreError> {
                fires::pre_read(self, request).await
            }

            async fn claim_expired_fires(
                &self,
                node_id: &str,
                now_ms: i64,
                lease_until_ms: i64,
                limit: u32,
            ) -> Result<Vec<PendingFire>, StoreError> {
                let rows =
                    fire_updates::claim_expired_fires(self, node_id, now_ms, lease_until_ms, limit)
                        .await?;
                let mut fires: Vec<PendingFire> = convert_all(rows)?;
                fires.sort_by_key(|fire| (fire.fire_at_ms, fire.log_id));
                Ok(fires)
            }

            async fn mark_dispatched(&self, marks: &DispatchMarks<'_>) -> Result<(), StoreError> {
                fires::mark_dispatched(self, marks).await
            }

            async fn insert_retry(
                &self,
                fire: &PendingFire,
                first_log_id: i64,
                node_id: &str,
                lease_ms: i64,
                now_ms: i64,
            ) -> Result<Option<PendingFire>, StoreError> {
                fires::insert_retry(self, fire, first_log_id, node_id, lease_ms, now_ms).await
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Runs for $store {
            async fn complete_runs(
                &self,
                completions: &[Completion],
            ) -> Result<Vec<CompletionOutcome>, StoreError> {
                fires::complete_runs(self, completions).await
            }

            async fn list_runs(
                &self,
                job: JobId,
                page: &PageRequest<i64>,
            ) -> Result<Vec<Run>, StoreError> {
                let rows: Vec<RunRow> = sqlx::query_as(&backend_sql(&format!(
                    "SELECT {RUN_COLUMNS} FROM job_logs WHERE job_id = $1 AND id < $2 \
                     ORDER BY id DESC LIMIT $3"
                )))
                .bind(job.get())
                .bind(page.after.unwrap_or(i64::MAX))
                .bind(i64::from(page.limit))
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("list runs"))?;
                convert_all(rows)
            }

            async fn get_run(&self, log_id: i64) -> Result<Option<Run>, StoreError> {
                let row: Option<RunRow> = sqlx::query_as(&backend_sql(&format!(
                    "SELECT {RUN_COLUMNS} FROM job_logs WHERE id = $1"
                )))
                .bind(log_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(StoreError::query("read a run"))?;
                row.map(Run::try_from).transpose()
            }

            async fn run_apps(
                &self,
                log_ids: &[i64],
            ) -> Result<std::collections::HashMap<i64, String>, StoreError> {
                $crate::store::sql::history::run_apps(self, log_ids).await
            }

            async fn append_log_lines(
                &self,
                batches: &[$crate::store::LogLines],
                max_lines_per_run: i64,
            ) -> Result<u64, StoreError> {
                $crate::store::sql::history::append_log_lines(self, batches, max_lines_per_run)
                    .await
            }

            async fn read_log_lines(
                &self,
                log_id: i64,
                from_line: i64,
                limit: u32,
            ) -> Result<$crate::store::RunLogLines, StoreError> {
                $crate::store::sql::history::read_log_lines(self, log_id, from_line, limit).await
            }

            async fn unfinished_runs(
                &self,
                dispatched_before_ms: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::UnfinishedRun>, StoreError> {
                $crate::store::sql::registry::unfinished_runs(self, dispatched_before_ms, limit)
                    .await
            }

            async fn claim_finished_runs(
                &self,
                now_ms: i64,
                locked_until_ms: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::FinishedRun>, StoreError> {
                fire_updates::claim_finished_runs(self, now_ms, locked_until_ms, limit).await
            }

            async fn finish_follow_up(
                &self,
                log_id: i64,
                alarm_status: $crate::domain::model::AlarmStatus,
            ) -> Result<(), StoreError> {
                sqlx::query(&backend_sql(
                    "UPDATE job_logs SET follow_up = 'DONE', follow_up_locked_until = NULL, \
                     alarm_status = $1 WHERE id = $2",
                ))
                .bind(alarm_status.as_str())
                .bind(log_id)
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("finish a run's follow-up"))?;
                Ok(())
            }

            async fn succeeded_shards(
                &self,
                job: JobId,
                fire_prefix: &str,
            ) -> Result<i64, StoreError> {
                let (count,): (i64,) = sqlx::query_as(&backend_sql(
                    "SELECT COUNT(DISTINCT shard_index) FROM job_logs \
                     WHERE job_id = $1 AND trigger_id LIKE $2 AND handle_code = 200",
                ))
                .bind(job.get())
                .bind(format!("{fire_prefix}-%"))
                .fetch_one(&self.pool)
                .await
                .map_err(StoreError::query("count succeeded shards"))?;
                Ok(count)
            }
        }

        $crate::store::sql::writes::sql_writes!($store, $db, $dialect);
        $crate::store::sql::fires::sql_fires!($store, $db, $dialect);
        $crate::store::sql::fire_updates::sql_fire_updates!($store, $db, $dialect);
        $crate::store::sql::batches::impl_sql_batches!($store, $db, $dialect);
        $crate::store::sql::shards::impl_sql_shards!($store, $db, $dialect);
        $crate::store::sql::replays::impl_sql_replays!($store, $db, $dialect);
    };
}

pub(crate) use impl_sql_store;
