//! The SQL both backends share, as one macro that implements [`Store`](super::Store) for a
//! backend type. A backend supplies, as inherent items:
//! - `const BACKEND: &'static str` and `fn claim_expired_sql() -> &'static str`;
//! - `async fn apply_migrations(&self) -> Result<(), StoreError>`;
//! - `async fn begin_write(&self, operation) -> Result<sqlx::Transaction<'_, DB>, StoreError>`:
//!   a transaction that will write (every transaction here does);
//! - `async fn begin_locked(&self) -> Result<sqlx::Transaction<'_, DB>, StoreError>`: a
//!   transaction that holds the schedule lock;
//! - `async fn prefer_keyed_joins(tx) -> Result<(), StoreError>`: whatever the backend needs
//!   so that the keyed batches of `tx` (`UPDATE … FROM (VALUES …)`, `INSERT … SELECT` joining
//!   `VALUES`) probe the primary key rather than scan the table;
//! - a `pool` field.
//!
//! A macro rather than generic code over `sqlx::Database`: the generic bounds sqlx needs for
//! shared queries are long and repeated on every function, while the SQL text is identical.

/// Rows per batched `UPDATE … FROM (VALUES …)`: 4 binds each, far below both bind limits.
pub(crate) const UPDATE_CHUNK: usize = 2_000;

/// Script versions kept per job (XXL-JOB keeps 30).
pub(crate) const GLUE_VERSIONS_KEPT: i64 = 30;

/// Rows written per multi-row `INSERT`: 21 binds each stays far below SQLite's 32 766 and
/// PostgreSQL's 65 535 bind limits.
pub(crate) const INSERT_CHUNK: usize = 500;

macro_rules! impl_sql_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> &'static str {
                Self::BACKEND
            }

            async fn migrate(&self) -> Result<(), StoreError> {
                self.apply_migrations().await
            }

            async fn create_app(&self, app: &App) -> Result<(), StoreError> {
                let inserted = sqlx::query(
                    "INSERT INTO apps (name, title, partitions, created_at_ms) VALUES ($1, $2, $3, $4)",
                )
                .bind(app.name.as_str())
                .bind(&app.title)
                .bind(i64::from(app.partitions))
                .bind(app.created_at_ms)
                .execute(&self.pool)
                .await;
                match inserted {
                    Ok(_) => Ok(()),
                    Err(sqlx::Error::Database(error)) if error.is_unique_violation() => {
                        Err(StoreError::AppExists(app.name.clone()))
                    }
                    Err(source) => Err(StoreError::Query { operation: "create an app", source }),
                }
            }

            async fn get_app(&self, name: &AppName) -> Result<Option<App>, StoreError> {
                let row: Option<AppRow> =
                    sqlx::query_as(&format!("SELECT {APP_COLUMNS} FROM apps WHERE name = $1"))
                        .bind(name.as_str())
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(StoreError::query("read an app"))?;
                row.map(App::try_from).transpose()
            }

            async fn list_apps(&self) -> Result<Vec<App>, StoreError> {
                let rows: Vec<AppRow> =
                    sqlx::query_as(&format!("SELECT {APP_COLUMNS} FROM apps ORDER BY name"))
                        .fetch_all(&self.pool)
                        .await
                        .map_err(StoreError::query("list apps"))?;
                convert_all(rows)
            }

            async fn list_apps_page(&self, page: &PageRequest<String>) -> Result<Vec<App>, StoreError> {
                let rows: Vec<AppRow> = sqlx::query_as(&format!(
                    "SELECT {APP_COLUMNS} FROM apps WHERE ($1 IS NULL OR name > $1) ORDER BY name LIMIT $2"
                ))
                .bind(page.after.clone())
                .bind(i64::from(page.limit))
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("list apps"))?;
                convert_all(rows)
            }

            async fn create_job(&self, job: &NewJob, now_ms: i64) -> Result<Job, StoreError> {
                const OPERATION: &str = "create a job";
                let mut tx = self.begin_write(OPERATION).await?;
                ensure_app_exists(&mut tx, &job.app, OPERATION).await?;
                let placeholders: Vec<String> = (1..=JOB_SPEC_COLUMNS.len()).map(|n| format!("${n}")).collect();
                // The spec takes $1…$n; the rest follow it.
                let n = JOB_SPEC_COLUMNS.len();
                let sql = format!(
                    "INSERT INTO jobs ({}, status, created_at_ms, updated_at_ms, glue_updated_at_ms) \
                     VALUES ({}, ${}, ${}, ${}, ${}) RETURNING {JOB_COLUMNS}",
                    JOB_SPEC_COLUMNS.join(", "),
                    placeholders.join(", "),
                    n + 1,
                    n + 2,
                    n + 2,
                    n + 3,
                );
                let glue_version = job.glue.source.is_some().then_some(now_ms);
                let row: JobRow = bind_job_spec(sqlx::query_as(&sql), job)
                    .bind(JobStatus::Stopped.as_str())
                    .bind(now_ms)
                    .bind(glue_version)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                let created = Job::try_from(row)?;
                if glue_version.is_some() {
                    save_glue_version(&mut tx, created.id, &job.glue, now_ms).await?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(created)
            }

            async fn update_job(
                &self,
                id: JobId,
                job: &NewJob,
                status: JobStatus,
                next_fire_ms: Option<i64>,
                replan: Option<i64>,
                now_ms: i64,
            ) -> Result<JobChange, StoreError> {
                const OPERATION: &str = "update a job";
                let mut tx = self.begin_write(OPERATION).await?;
                ensure_app_exists(&mut tx, &job.app, OPERATION).await?;
                let current: Option<(String, Option<String>, Option<i64>)> = sqlx::query_as(
                    "SELECT glue_type, glue_source, glue_updated_at_ms FROM jobs WHERE id = $1",
                )
                .bind(id.get())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let Some((glue_type, glue_source, glue_updated_at_ms)) = current else {
                    return Err(StoreError::JobNotFound(id));
                };
                let glue_changed = glue_type != job.glue.glue_type.as_str() || glue_source != job.glue.source;
                let glue_version = if glue_changed { Some(now_ms) } else { glue_updated_at_ms };
                let assignments: Vec<String> = JOB_SPEC_COLUMNS
                    .iter()
                    .enumerate()
                    .map(|(index, column)| format!("{column} = ${}", index + 1))
                    .collect();
                let n = JOB_SPEC_COLUMNS.len();
                let sql = format!(
                    "UPDATE jobs SET {}, status = ${}, next_fire_ms = ${}, updated_at_ms = ${}, \
                     glue_updated_at_ms = ${} WHERE id = ${} RETURNING {JOB_COLUMNS}",
                    assignments.join(", "),
                    n + 1,
                    n + 2,
                    n + 3,
                    n + 4,
                    n + 5,
                );
                let row: JobRow = bind_job_spec(sqlx::query_as(&sql), job)
                    .bind(status.as_str())
                    .bind(next_fire_ms)
                    .bind(now_ms)
                    .bind(glue_version)
                    .bind(id.get())
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                if glue_changed && job.glue.source.is_some() {
                    save_glue_version(&mut tx, id, &job.glue, now_ms).await?;
                }
                let cancelled = match replan {
                    Some(from_ms) => {
                        cancel_planned_fires(&mut tx, id, "the job's schedule changed", from_ms, now_ms).await?
                    }
                    None => None,
                };
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(JobChange { job: Job::try_from(row)?, cancelled })
            }

            async fn glue_versions(&self, id: JobId) -> Result<Vec<GlueVersion>, StoreError> {
                let rows: Vec<GlueVersionRow> = sqlx::query_as(
                    "SELECT glue_type, glue_source, glue_remark, created_at_ms FROM job_glue_versions \
                     WHERE job_id = $1 ORDER BY id DESC",
                )
                .bind(id.get())
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("list glue versions"))?;
                convert_all(rows)
            }

            async fn get_job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
                let row: Option<JobRow> =
                    sqlx::query_as(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1"))
                        .bind(id.get())
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(StoreError::query("read a job"))?;
                row.map(Job::try_from).transpose()
            }

            async fn list_jobs(
                &self,
                filter: &$crate::store::JobFilter,
                page: &PageRequest<JobId>,
            ) -> Result<Vec<Job>, StoreError> {
                // Only the filters given become conditions, so each shape of the query has a
                // plan that uses its index (jobs_app_id for the app, the primary key for
                // the page) rather than one generic plan for every combination.
                let mut query = sqlx::QueryBuilder::<$db>::new(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE true"));
                if let Some(app) = &filter.app {
                    query.push(" AND app = ").push_bind(app.as_str().to_owned());
                }
                if let Some(status) = filter.status {
                    query.push(" AND status = ").push_bind(status.as_str());
                }
                if let Some(after) = page.after {
                    query.push(" AND id > ").push_bind(after.get());
                }
                query.push(" ORDER BY id LIMIT ").push_bind(i64::from(page.limit));
                let rows: Vec<JobRow> = query
                    .build_query_as()
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("list jobs"))?;
                convert_all(rows)
            }

            async fn child_links(&self, ids: &[JobId]) -> Result<Vec<(JobId, Vec<JobId>)>, StoreError> {
                let mut links = Vec::with_capacity(ids.len());
                for chunk in ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut query = sqlx::QueryBuilder::<$db>::new("SELECT id, child_job_ids FROM jobs WHERE id IN (");
                    let mut separated = query.separated(", ");
                    for id in chunk {
                        separated.push_bind(id.get());
                    }
                    query.push(")");
                    let rows: Vec<(i64, String)> = query
                        .build_query_as()
                        .fetch_all(&self.pool)
                        .await
                        .map_err(StoreError::query("read child job links"))?;
                    for (id, children) in rows {
                        let corrupt = |reason: String| StoreError::CorruptRow { what: format!("job {id}"), reason };
                        let id = JobId::new(id).map_err(|error| corrupt(error.to_string()))?;
                        let children = $crate::store::rows::parse_list::<JobId>(&children).map_err(corrupt)?;
                        links.push((id, children));
                    }
                }
                Ok(links)
            }

            async fn set_job_status(
                &self,
                id: JobId,
                status: JobStatus,
                next_fire_ms: Option<i64>,
                cancel_from_ms: i64,
                now_ms: i64,
            ) -> Result<JobChange, StoreError> {
                const OPERATION: &str = "change a job's status";
                let mut tx = self.begin_write(OPERATION).await?;
                let row: Option<JobRow> = sqlx::query_as(&format!(
                    "UPDATE jobs SET status = $1, next_fire_ms = $2, updated_at_ms = $3 \
                     WHERE id = $4 RETURNING {JOB_COLUMNS}"
                ))
                .bind(status.as_str())
                .bind(next_fire_ms)
                .bind(now_ms)
                .bind(id.get())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let job = row.map(Job::try_from).transpose()?.ok_or(StoreError::JobNotFound(id))?;
                let cancelled = if status == JobStatus::Stopped {
                    cancel_planned_fires(&mut tx, id, "the job was stopped", cancel_from_ms, now_ms).await?
                } else {
                    None
                };
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(JobChange { job, cancelled })
            }

            async fn recent_cancellations(
                &self,
                now_ms: i64,
            ) -> Result<Vec<$crate::store::FireCancellation>, StoreError> {
                let rows: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
                    "SELECT job_id, up_to_log_id, from_ms, until_ms FROM fire_cancellations \
                     WHERE until_ms > $1",
                )
                .bind(now_ms)
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("read recent cancellations"))?;
                rows.into_iter()
                    .map(|(job_id, up_to_log_id, from_ms, until_ms)| {
                        Ok($crate::store::FireCancellation {
                            job_id: JobId::new(job_id).map_err(|error| StoreError::CorruptRow {
                                what: format!("cancellation of job {job_id}"),
                                reason: error.to_string(),
                            })?,
                            up_to_log_id,
                            from_ms,
                            until_ms,
                        })
                    })
                    .collect()
            }

            async fn insert_fire(&self, job: &Job, fire: &NewFire) -> Result<Vec<PendingFire>, StoreError> {
                let draft = PendingFire {
                    glue_type: job.spec.glue.glue_type,
                    glue_source: job.spec.glue.source.clone(),
                    glue_updated_at_ms: job.glue_updated_at_ms,
                    log_id: 0,
                    trigger_id: fire.trigger_id.clone(),
                    job_id: job.id,
                    app: job.spec.app.clone(),
                    handler: job.spec.handler.clone(),
                    params: fire.params.clone(),
                    trigger_type: fire.trigger_type,
                    shard_index: 0,
                    shard_total: 1,
                    attempt: 0,
                    scheduled_at_ms: fire.scheduled_at_ms,
                    fire_at_ms: fire.scheduled_at_ms,
                    route_strategy: job.spec.route_strategy,
                    block_strategy: job.spec.block_strategy,
                    timeout_ms: job.spec.timeout_ms,
                    route_partitions: fire.partitions.clone(),
                };
                let mut tx = self.begin_write("write a fire").await?;
                let written =
                    insert_fires(&mut tx, vec![draft], &fire.node_id, fire.lease_until_ms - fire.scheduled_at_ms, fire.scheduled_at_ms)
                        .await?;
                tx.commit().await.map_err(StoreError::query("write a fire"))?;
                Ok(written)
            }

            async fn pre_read(&self, request: &PreReadRequest) -> Result<PreReadOutcome, StoreError> {
                const OPERATION: &str = "pre-read due jobs";
                let mut tx = self.begin_locked().await?;
                Self::prefer_keyed_joins(&mut tx).await?;
                let rows: Vec<JobRow> = sqlx::query_as(&format!(
                    "SELECT {JOB_COLUMNS} FROM jobs WHERE status = 'RUNNING' AND next_fire_ms <= $1 \
                     ORDER BY next_fire_ms LIMIT $2"
                ))
                .bind(request.now_ms + request.window_ms)
                .bind(i64::from(request.batch_size))
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let jobs_read = rows.len();
                let planned = plan_rows(rows, request);
                // Jobs first, fires after, and only for the jobs whose advance applied: a job
                // stopped or edited while this scan ran gets no fire from it. On PostgreSQL
                // the advance also locks the job's row, so a stop that comes later waits for
                // this scan and then cancels what it wrote.
                let mut advanced = std::collections::HashSet::with_capacity(planned.advances.len());
                // All next-fire times in one statement per chunk: one round trip, not one per job.
                for chunk in planned.advances.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut update = sqlx::QueryBuilder::<$db>::new(
                        "WITH v(id, next_fire, last_fire, status, read_next_fire) AS (",
                    );
                    update.push_values(chunk, |mut values, advance| {
                        values
                            .push_bind(advance.job_id)
                            .push_bind(advance.next_fire_ms)
                            .push_bind(advance.last_fire_ms)
                            .push_bind(advance.status.as_str())
                            .push_bind(advance.read_next_fire_ms);
                    });
                    // Compare-and-set: a job stopped or edited while this scan ran (possible on
                    // PostgreSQL, where the scan does not lock job rows) keeps the change; the
                    // scan must never restart a stopped job.
                    update.push(
                        ") UPDATE jobs SET next_fire_ms = v.next_fire, \
                         last_fire_ms = COALESCE(v.last_fire, jobs.last_fire_ms), status = v.status \
                         FROM v WHERE jobs.id = v.id AND jobs.status = 'RUNNING' \
                         AND jobs.next_fire_ms = v.read_next_fire RETURNING jobs.id",
                    );
                    let ids: Vec<(i64,)> = update
                        .build_query_as()
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    advanced.extend(ids.into_iter().map(|(id,)| id));
                }
                let fires: Vec<PendingFire> = planned
                    .fires
                    .into_iter()
                    .filter(|fire| advanced.contains(&fire.job_id.get()))
                    .collect();
                let fires = insert_fires(&mut tx, fires, &request.node_id, request.lease_ms, request.now_ms).await?;
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(PreReadOutcome { jobs_read, fires })
            }

            async fn claim_expired_fires(
                &self,
                node_id: &str,
                now_ms: i64,
                lease_until_ms: i64,
                limit: u32,
            ) -> Result<Vec<PendingFire>, StoreError> {
                let rows: Vec<FireRow> = sqlx::query_as(Self::claim_expired_sql())
                    .bind(node_id)
                    .bind(lease_until_ms)
                    .bind(now_ms)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("claim expired pending fires"))?;
                let mut fires: Vec<PendingFire> = convert_all(rows)?;
                fires.sort_by_key(|fire| (fire.fire_at_ms, fire.log_id));
                Ok(fires)
            }

            async fn mark_dispatched(&self, acks: &[DispatchAck]) -> Result<(), StoreError> {
                const OPERATION: &str = "mark triggers dispatched";
                let mut tx = self.begin_write(OPERATION).await?;
                Self::prefer_keyed_joins(&mut tx).await?;
                for chunk in acks.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut update = sqlx::QueryBuilder::<$db>::new(
                        "WITH v(id, partition_no, dispatched_at, executor_id) AS (",
                    );
                    update.push_values(chunk, |mut values, ack| {
                        values
                            .push_bind(ack.log_id)
                            .push_bind(i64::from(ack.partition))
                            .push_bind(ack.dispatched_at_ms)
                            .push_bind(ack.executor_id.clone());
                    });
                    // A run whose result arrived first keeps state FINISHED and the executor
                    // that ran it.
                    update.push(
                        ") UPDATE job_logs SET \
                         state = CASE WHEN job_logs.state = 'SCHEDULED' THEN 'DISPATCHED' ELSE job_logs.state END, \
                         executor_id = COALESCE(job_logs.executor_id, v.executor_id), \
                         partition_no = v.partition_no, dispatched_at_ms = v.dispatched_at, \
                         owner_node = NULL, lease_until_ms = NULL FROM v WHERE job_logs.id = v.id",
                    );
                    update
                        .build()
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))
            }

            async fn complete_runs(
                &self,
                completions: &[Completion],
            ) -> Result<Vec<CompletionOutcome>, StoreError> {
                const OPERATION: &str = "record results";
                let mut tx = self.begin_write(OPERATION).await?;
                let mut outcomes = Vec::with_capacity(completions.len());
                for completion in completions {
                    // The run's trigger type is its first attempt's: a retry's own is RETRY.
                    let completed: Option<(i64, String, i64)> = sqlx::query_as(
                        "UPDATE job_logs SET state = 'FINISHED', executor_id = $1, handle_code = $2, \
                         handle_msg = $3, handle_started_at_ms = $4, handle_at_ms = $5, \
                         retry_after_ms = $7, owner_node = NULL, lease_until_ms = NULL \
                         WHERE trigger_id = $6 AND handle_code IS NULL \
                         RETURNING job_id, COALESCE((SELECT first_attempt.trigger_type FROM job_logs first_attempt \
                         WHERE first_attempt.id = job_logs.first_log_id), trigger_type), attempt",
                    )
                    .bind(&completion.executor_id)
                    .bind(i64::from(completion.code))
                    .bind(completion.message.as_deref())
                    .bind(completion.started_at_ms)
                    .bind(completion.finished_at_ms)
                    .bind(completion.trigger_id.as_str())
                    .bind(completion.retry_after_ms)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    let outcome = if let Some((job_id, run_trigger_type, attempt)) = completed {
                        // FIX_DELAY: once the run the schedule fired has ended for good, the next
                        // fire is due `delay` after its end (only while the job still waits). A
                        // failure the follow-up monitor will retry has not ended: the job waits
                        // for its last attempt, so a retry never overlaps the next fire.
                        if matches!(run_trigger_type.as_str(), "FIX_DELAY" | "MISFIRE") {
                            // The same rule as the follow-up monitor's: a failure is retried
                            // while its attempt number is below the job's retry count.
                            sqlx::query(
                                "UPDATE jobs SET next_fire_ms = $1 + CAST(schedule_conf AS BIGINT) * 1000 \
                                 WHERE id = $2 AND schedule_type = 'FIX_DELAY' AND status = 'RUNNING' \
                                 AND next_fire_ms IS NULL AND ($3 OR $4 >= retry_count)",
                            )
                            .bind(completion.finished_at_ms)
                            .bind(job_id)
                            .bind(completion.code == kadence_schemas::result_code::SUCCESS)
                            .bind(attempt)
                            .execute(&mut *tx)
                            .await
                            .map_err(StoreError::query(OPERATION))?;
                        }
                        CompletionOutcome::Applied
                    } else {
                        let known = sqlx::query("SELECT id FROM job_logs WHERE trigger_id = $1")
                            .bind(completion.trigger_id.as_str())
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(StoreError::query(OPERATION))?
                            .is_some();
                        if known {
                            CompletionOutcome::Duplicate
                        } else {
                            CompletionOutcome::UnknownTrigger
                        }
                    };
                    outcomes.push(outcome);
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(outcomes)
            }

            async fn list_runs(&self, job: JobId, page: &PageRequest<i64>) -> Result<Vec<Run>, StoreError> {
                let rows: Vec<RunRow> = sqlx::query_as(&format!(
                    "SELECT {RUN_COLUMNS} FROM job_logs WHERE job_id = $1 AND id < $2 \
                     ORDER BY id DESC LIMIT $3"
                ))
                .bind(job.get())
                .bind(page.after.unwrap_or(i64::MAX))
                .bind(i64::from(page.limit))
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("list runs"))?;
                convert_all(rows)
            }

            // --- Executor registry ---

            async fn upsert_executors(
                &self,
                entries: &[$crate::model::ExecutorEntry],
            ) -> Result<(), StoreError> {
                use $crate::store::rows::join_list;
                const OPERATION: &str = "record executor beats";
                if entries.is_empty() {
                    return Ok(());
                }
                let mut tx = self.begin_write(OPERATION).await?;
                for entry in entries {
                    // Only a newer beat replaces the row: beats read late (several scheduler
                    // nodes, a replayed topic) never roll an executor back.
                    sqlx::query(
                        "INSERT INTO executors (executor_id, app, host, version, handlers, \
                         owned_partitions, running_jobs, queued_jobs, state, first_seen_at_ms, \
                         last_beat_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) \
                         ON CONFLICT (executor_id) DO UPDATE SET app = excluded.app, \
                         host = excluded.host, version = excluded.version, \
                         handlers = excluded.handlers, owned_partitions = excluded.owned_partitions, \
                         running_jobs = excluded.running_jobs, queued_jobs = excluded.queued_jobs, \
                         state = excluded.state, last_beat_at_ms = excluded.last_beat_at_ms \
                         WHERE executors.last_beat_at_ms <= excluded.last_beat_at_ms",
                    )
                    .bind(&entry.executor_id)
                    .bind(entry.app.as_str())
                    .bind(&entry.host)
                    .bind(&entry.version)
                    .bind(join_list(&entry.handlers))
                    .bind(join_list(&entry.owned_partitions))
                    .bind(join_list(&entry.running_jobs))
                    .bind(join_list(&entry.queued_jobs))
                    .bind(entry.state.as_str())
                    .bind(entry.last_beat_at_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))
            }

            async fn list_executors(
                &self,
                app: Option<&AppName>,
            ) -> Result<Vec<$crate::model::ExecutorEntry>, StoreError> {
                let rows: Vec<$crate::store::rows::ExecutorRow> = sqlx::query_as(&format!(
                    "SELECT {} FROM executors WHERE ($1 IS NULL OR app = $1) ORDER BY app, executor_id",
                    $crate::store::rows::EXECUTOR_COLUMNS
                ))
                .bind(app.map(|app| app.as_str().to_owned()))
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("list executors"))?;
                convert_all(rows)
            }

            async fn list_executors_page(
                &self,
                app: Option<&AppName>,
                page: &PageRequest<(String, String)>,
            ) -> Result<Vec<$crate::model::ExecutorEntry>, StoreError> {
                let mut query = sqlx::QueryBuilder::<$db>::new(format!(
                    "SELECT {} FROM executors WHERE true",
                    $crate::store::rows::EXECUTOR_COLUMNS
                ));
                if let Some(app) = app {
                    query.push(" AND app = ").push_bind(app.as_str().to_owned());
                }
                if let Some((app, executor)) = &page.after {
                    query
                        .push(" AND (app > ")
                        .push_bind(app.clone())
                        .push(" OR (app = ")
                        .push_bind(app.clone())
                        .push(" AND executor_id > ")
                        .push_bind(executor.clone())
                        .push("))");
                }
                query.push(" ORDER BY app, executor_id LIMIT ").push_bind(i64::from(page.limit));
                let rows: Vec<$crate::store::rows::ExecutorRow> = query
                    .build_query_as()
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("list executors"))?;
                convert_all(rows)
            }

            async fn mark_dead_executors(
                &self,
                stale_before_ms: i64,
            ) -> Result<Vec<String>, StoreError> {
                let rows: Vec<(String,)> = sqlx::query_as(
                    "UPDATE executors SET state = 'DEAD' \
                     WHERE state <> 'DEAD' AND last_beat_at_ms < $1 RETURNING executor_id",
                )
                .bind(stale_before_ms)
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("mark executors dead"))?;
                Ok(rows.into_iter().map(|(id,)| id).collect())
            }

            async fn get_run(&self, log_id: i64) -> Result<Option<Run>, StoreError> {
                let row: Option<RunRow> = sqlx::query_as(&format!(
                    "SELECT {RUN_COLUMNS} FROM job_logs WHERE id = $1"
                ))
                .bind(log_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(StoreError::query("read a run"))?;
                row.map(Run::try_from).transpose()
            }

            async fn append_log_lines(
                &self,
                batches: &[$crate::store::LogLines],
                max_lines_per_run: i64,
            ) -> Result<u64, StoreError> {
                const OPERATION: &str = "store log lines";
                let lines: Vec<(i64, i64, &str)> = batches
                    .iter()
                    .flat_map(|batch| {
                        batch.lines.iter().enumerate().map(move |(index, line)| {
                            (batch.log_id, batch.first_line + index as i64, line.as_str())
                        })
                    })
                    .filter(|(_, line_no, _)| (1..=max_lines_per_run).contains(line_no))
                    .collect();
                let mut stored = 0;
                let mut tx = self.begin_write(OPERATION).await?;
                Self::prefer_keyed_joins(&mut tx).await?;
                for chunk in lines.chunks($crate::store::sql::INSERT_CHUNK) {
                    let mut insert =
                        sqlx::QueryBuilder::<$db>::new("WITH v(log_id, line_no, line) AS (");
                    insert.push_values(chunk, |mut values, (log_id, line_no, line)| {
                        values.push_bind(*log_id).push_bind(*line_no).push_bind(line.to_string());
                    });
                    // Lines of unknown runs are dropped by the join; repeats by the key. (SQLite
                    // needs a WHERE before ON CONFLICT to parse INSERT … SELECT … JOIN.)
                    insert.push(
                        ") INSERT INTO run_log_lines (log_id, line_no, line) \
                         SELECT v.log_id, v.line_no, v.line FROM v \
                         JOIN job_logs ON job_logs.id = v.log_id WHERE true \
                         ON CONFLICT (log_id, line_no) DO NOTHING",
                    );
                    stored += insert
                        .build()
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?
                        .rows_affected();
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(stored)
            }

            async fn read_log_lines(
                &self,
                log_id: i64,
                from_line: i64,
                limit: u32,
            ) -> Result<Vec<(i64, String)>, StoreError> {
                sqlx::query_as(
                    "SELECT line_no, line FROM run_log_lines WHERE log_id = $1 AND line_no >= $2 \
                     ORDER BY line_no LIMIT $3",
                )
                .bind(log_id)
                .bind(from_line)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("read log lines"))
            }

            async fn unfinished_runs(
                &self,
                dispatched_before_ms: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::UnfinishedRun>, StoreError> {
                const OPERATION: &str = "read unfinished runs";
                let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
                    "SELECT trigger_id, app, executor_id, dispatched_at_ms FROM job_logs \
                     WHERE state = 'DISPATCHED' AND executor_id IS NOT NULL \
                     AND dispatched_at_ms < $1 ORDER BY dispatched_at_ms LIMIT $2",
                )
                .bind(dispatched_before_ms)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query(OPERATION))?;
                rows.into_iter()
                    .map(|(trigger_id, app, executor_id, dispatched_at_ms)| {
                        let corrupt = |reason: String| StoreError::CorruptRow {
                            what: format!("run {trigger_id}"),
                            reason,
                        };
                        let trigger = kadence_schemas::TriggerId::parse(&trigger_id)
                            .map_err(|error| corrupt(error.to_string()))?;
                        Ok($crate::store::UnfinishedRun {
                            job_id: trigger.job_id(),
                            trigger_id: trigger,
                            app: AppName::parse(&app).map_err(|error| corrupt(error.to_string()))?,
                            executor_id,
                            dispatched_at_ms,
                        })
                    })
                    .collect()
            }

            async fn forget_executors(&self, dead_before_ms: i64) -> Result<u64, StoreError> {
                let done = sqlx::query(
                    "DELETE FROM executors WHERE state = 'DEAD' AND last_beat_at_ms < $1",
                )
                .bind(dead_before_ms)
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("forget dead executors"))?;
                Ok(done.rows_affected())
            }

            // --- Monitors ---

            async fn claim_finished_runs(
                &self,
                now_ms: i64,
                locked_until_ms: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::FinishedRun>, StoreError> {
                // Compare-and-set: the condition is repeated outside the subquery, so a row
                // two nodes picked at once is claimed by one of them only.
                let rows: Vec<$crate::store::rows::FinishedRunRow> = sqlx::query_as(&format!(
                    "UPDATE job_logs SET follow_up = 'LOCKED', follow_up_locked_until = $1, \
                     alarm_status = CASE WHEN handle_code = 200 THEN 'NOT_NEEDED' ELSE 'LOCKED' END \
                     WHERE id IN (SELECT id FROM job_logs WHERE state = 'FINISHED' \
                         AND follow_up <> 'DONE' \
                         AND (follow_up = 'PENDING' OR follow_up_locked_until < $2) \
                         ORDER BY id LIMIT $3) \
                     AND follow_up <> 'DONE' AND (follow_up = 'PENDING' OR follow_up_locked_until < $2) \
                     RETURNING {}, handle_code, handle_msg, executor_id, handle_at_ms, first_log_id, \
                     retry_after_ms",
                    $crate::store::rows::FIRE_COLUMNS
                ))
                .bind(locked_until_ms)
                .bind(now_ms)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("claim finished runs"))?;
                let mut runs: Vec<$crate::store::FinishedRun> = convert_all(rows)?;
                runs.sort_by_key(|run| run.fire.log_id);
                Ok(runs)
            }

            async fn finish_follow_up(
                &self,
                log_id: i64,
                alarm_status: $crate::model::AlarmStatus,
            ) -> Result<(), StoreError> {
                sqlx::query(
                    "UPDATE job_logs SET follow_up = 'DONE', follow_up_locked_until = NULL, \
                     alarm_status = $1 WHERE id = $2",
                )
                .bind(alarm_status.as_str())
                .bind(log_id)
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("finish a run's follow-up"))?;
                Ok(())
            }

            async fn insert_retry(
                &self,
                fire: &PendingFire,
                first_log_id: i64,
                node_id: &str,
                lease_ms: i64,
                now_ms: i64,
            ) -> Result<Option<PendingFire>, StoreError> {
                const OPERATION: &str = "write a retry";
                let mut tx = self.begin_write(OPERATION).await?;
                let written = insert_fires(&mut tx, vec![fire.clone()], node_id, lease_ms, now_ms).await?;
                for retry in &written {
                    sqlx::query("UPDATE job_logs SET first_log_id = $1 WHERE id = $2")
                        .bind(first_log_id)
                        .bind(retry.log_id)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(written.into_iter().next())
            }

            async fn refresh_reports(&self, from_ms: i64, to_ms: i64) -> Result<u64, StoreError> {
                // One statement: the counts are recomputed from the runs, never incremented,
                // so a repeated or concurrent refresh writes the same numbers.
                let done = sqlx::query(
                    "INSERT INTO job_reports (day_ms, app, job_id, running, succeeded, failed) \
                     SELECT (scheduled_at_ms / 86400000) * 86400000, app, job_id, \
                     SUM(CASE WHEN state IN ('SCHEDULED', 'DISPATCHED') THEN 1 ELSE 0 END), \
                     SUM(CASE WHEN handle_code = 200 THEN 1 ELSE 0 END), \
                     SUM(CASE WHEN state = 'FINISHED' AND handle_code <> 200 THEN 1 ELSE 0 END) \
                     FROM job_logs WHERE scheduled_at_ms >= $1 AND scheduled_at_ms < $2 \
                     GROUP BY (scheduled_at_ms / 86400000) * 86400000, app, job_id \
                     ON CONFLICT (day_ms, app, job_id) DO UPDATE SET running = excluded.running, \
                     succeeded = excluded.succeeded, failed = excluded.failed",
                )
                .bind(from_ms)
                .bind(to_ms)
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("refresh daily reports"))?;
                Ok(done.rows_affected())
            }

            async fn list_reports(
                &self,
                from_ms: i64,
                to_ms: i64,
                app: Option<&AppName>,
                page: &PageRequest<(i64, String, i64)>,
            ) -> Result<Vec<$crate::model::DailyReport>, StoreError> {
                let mut query = sqlx::QueryBuilder::<$db>::new(
                    "SELECT day_ms, app, job_id, running, succeeded, failed FROM job_reports WHERE day_ms >= ",
                );
                query.push_bind(from_ms).push(" AND day_ms < ").push_bind(to_ms);
                if let Some(app) = app {
                    query.push(" AND app = ").push_bind(app.as_str().to_owned());
                }
                if let Some((day, app, job)) = &page.after {
                    // (day, app, job) > (after…), spelled out: both backends plan it on the key.
                    query
                        .push(" AND (day_ms > ")
                        .push_bind(*day)
                        .push(" OR (day_ms = ")
                        .push_bind(*day)
                        .push(" AND (app > ")
                        .push_bind(app.clone())
                        .push(" OR (app = ")
                        .push_bind(app.clone())
                        .push(" AND job_id > ")
                        .push_bind(*job)
                        .push("))))");
                }
                query.push(" ORDER BY day_ms, app, job_id LIMIT ").push_bind(i64::from(page.limit));
                query
                .build_query_as()
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("list daily reports"))
            }

            async fn delete_old_runs(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
                const OPERATION: &str = "delete old runs";
                let mut tx = self.begin_write(OPERATION).await?;
                let ids: Vec<(i64,)> = sqlx::query_as(
                    "SELECT id FROM job_logs WHERE scheduled_at_ms < $1 AND state IN ('FINISHED', 'CANCELLED') \
                     ORDER BY scheduled_at_ms LIMIT $2",
                )
                .bind(before_ms)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let mut deleted = 0;
                for chunk in ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    for table in ["run_log_lines WHERE log_id", "job_logs WHERE id"] {
                        let mut delete = sqlx::QueryBuilder::<$db>::new(format!("DELETE FROM {table} IN ("));
                        let mut separated = delete.separated(", ");
                        for (id,) in chunk {
                            separated.push_bind(*id);
                        }
                        delete.push(")");
                        let done = delete
                            .build()
                            .execute(&mut *tx)
                            .await
                            .map_err(StoreError::query(OPERATION))?;
                        if table.starts_with("job_logs") {
                            deleted += done.rows_affected();
                        }
                    }
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(deleted)
            }

            async fn delete_old_reports(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
                let done = sqlx::query(
                    "DELETE FROM job_reports WHERE (day_ms, app, job_id) IN \
                     (SELECT day_ms, app, job_id FROM job_reports WHERE day_ms < $1 LIMIT $2)",
                )
                .bind(before_ms)
                .bind(i64::from(limit))
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("delete old reports"))?;
                Ok(done.rows_affected())
            }

            async fn succeeded_shards(
                &self,
                job: JobId,
                fire_prefix: &str,
            ) -> Result<i64, StoreError> {
                let (count,): (i64,) = sqlx::query_as(
                    "SELECT COUNT(DISTINCT shard_index) FROM job_logs \
                     WHERE job_id = $1 AND trigger_id LIKE $2 AND handle_code = 200",
                )
                .bind(job.get())
                .bind(format!("{fire_prefix}-%"))
                .fetch_one(&self.pool)
                .await
                .map_err(StoreError::query("count succeeded shards"))?;
                Ok(count)
            }
        }

        /// Fails with [`StoreError::UnknownApp`] unless `app` exists.
        async fn ensure_app_exists(
            tx: &mut sqlx::Transaction<'_, $db>,
            app: &AppName,
            operation: &'static str,
        ) -> Result<(), StoreError> {
            let exists = sqlx::query("SELECT name FROM apps WHERE name = $1")
                .bind(app.as_str())
                .fetch_optional(&mut **tx)
                .await
                .map_err(StoreError::query(operation))?
                .is_some();
            if exists { Ok(()) } else { Err(StoreError::UnknownApp(app.clone())) }
        }

        /// Cancels the fires of `job` that its schedule planned, due after `from_ms`, that no
        /// node has emitted yet (state CANCELLED, `reason` as their message). Manual, API,
        /// retry and child fires are kept: someone asked for those. Returns what was
        /// cancelled, if anything.
        async fn cancel_planned_fires(
            tx: &mut sqlx::Transaction<'_, $db>,
            job: JobId,
            reason: &str,
            from_ms: i64,
            now_ms: i64,
        ) -> Result<Option<$crate::store::FireCancellation>, StoreError> {
            let cancelled: Vec<(i64, Option<i64>)> = sqlx::query_as(
                "UPDATE job_logs SET state = 'CANCELLED', handle_msg = $2, handle_at_ms = $3, \
                 owner_node = NULL WHERE job_id = $1 AND state = 'SCHEDULED' \
                 AND trigger_type IN ('CRON', 'FIX_RATE', 'FIX_DELAY', 'MISFIRE') \
                 AND fire_at_ms > $4 RETURNING id, lease_until_ms",
            )
            .bind(job.get())
            .bind(format!("cancelled: {reason} before this fire was emitted"))
            .bind(now_ms)
            .bind(from_ms)
            .fetch_all(&mut **tx)
            .await
            .map_err(StoreError::query("cancel planned fires"))?;
            let Some(up_to_log_id) = cancelled.iter().map(|(id, _)| *id).max() else {
                return Ok(None);
            };
            let cancellation = $crate::store::FireCancellation {
                job_id: job,
                up_to_log_id,
                from_ms,
                until_ms: cancelled.iter().filter_map(|(_, lease)| *lease).max().unwrap_or(now_ms),
            };
            // Cancellations an hour past their leases are of no use to any node: cleared here
            // rather than by a loop of their own.
            sqlx::query("DELETE FROM fire_cancellations WHERE until_ms < $1")
                .bind(now_ms - 3_600_000)
                .execute(&mut **tx)
                .await
                .map_err(StoreError::query("cancel planned fires"))?;
            sqlx::query(
                "INSERT INTO fire_cancellations (job_id, up_to_log_id, from_ms, until_ms, created_at_ms) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(job.get())
            .bind(cancellation.up_to_log_id)
            .bind(cancellation.from_ms)
            .bind(cancellation.until_ms)
            .bind(now_ms)
            .execute(&mut **tx)
            .await
            .map_err(StoreError::query("cancel planned fires"))?;
            Ok(Some(cancellation))
        }

        /// Binds a job's definition in [`JOB_SPEC_COLUMNS`] order, as `$1`…`$n`.
        fn bind_job_spec<'q, O>(
            query: sqlx::query::QueryAs<'q, $db, O, <$db as sqlx::Database>::Arguments<'q>>,
            job: &NewJob,
        ) -> sqlx::query::QueryAs<'q, $db, O, <$db as sqlx::Database>::Arguments<'q>> {
            let (backoff_ms, backoff_cap_ms) = job.retry.backoff.parts();
            query
                .bind(job.app.as_str().to_owned())
                .bind(job.name.clone())
                .bind(job.schedule.schedule_type().as_str())
                .bind(job.schedule.conf())
                .bind(job.time_zone.name())
                .bind(job.misfire_strategy.as_str())
                .bind(job.route_strategy.as_str())
                .bind(job.handler.clone())
                .bind(job.params.clone())
                .bind(job.block_strategy.as_str())
                .bind(job.timeout_ms)
                .bind(job.author.clone())
                .bind(job.alarm_emails.join(","))
                .bind(job.alarm_webhook.clone())
                .bind(i64::from(job.retry.count))
                .bind(job.retry.backoff.kind())
                .bind(backoff_ms)
                .bind(backoff_cap_ms)
                .bind(job.glue.glue_type.as_str())
                .bind(job.glue.source.clone())
                .bind(job.glue.remark.clone())
                .bind($crate::store::rows::join_list(&job.child_job_ids))
                .bind(job.child_trigger_mode.as_str())
        }

        /// Saves a script version and keeps only the newest [`GLUE_VERSIONS_KEPT`].
        async fn save_glue_version(
            tx: &mut sqlx::Transaction<'_, $db>,
            job: JobId,
            glue: &Glue,
            now_ms: i64,
        ) -> Result<(), StoreError> {
            const OPERATION: &str = "save a glue version";
            sqlx::query(
                "INSERT INTO job_glue_versions (job_id, glue_type, glue_source, glue_remark, created_at_ms) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(job.get())
            .bind(glue.glue_type.as_str())
            .bind(glue.source.clone().unwrap_or_default())
            .bind(glue.remark.clone())
            .bind(now_ms)
            .execute(&mut **tx)
            .await
            .map_err(StoreError::query(OPERATION))?;
            sqlx::query(
                "DELETE FROM job_glue_versions WHERE job_id = $1 AND id NOT IN \
                 (SELECT id FROM job_glue_versions WHERE job_id = $1 ORDER BY id DESC LIMIT $2)",
            )
            .bind(job.get())
            .bind($crate::store::sql::GLUE_VERSIONS_KEPT)
            .execute(&mut **tx)
            .await
            .map_err(StoreError::query(OPERATION))?;
            Ok(())
        }

        /// Replaces each SHARDING_BROADCAST fire by its shards ([`PendingFire::into_shards`]),
        /// reading the partition counts of the apps concerned in the same transaction.
        async fn expand_broadcasts(
            tx: &mut sqlx::Transaction<'_, $db>,
            drafts: Vec<PendingFire>,
        ) -> Result<Vec<PendingFire>, StoreError> {
            if !drafts.iter().any(|fire| fire.route_strategy == $crate::model::RouteStrategy::ShardingBroadcast) {
                return Ok(drafts);
            }
            let rows: Vec<(String, i64)> = sqlx::query_as("SELECT name, partitions FROM apps")
                .fetch_all(&mut **tx)
                .await
                .map_err(StoreError::query("read partition counts for a broadcast"))?;
            let partitions: std::collections::HashMap<String, i64> = rows.into_iter().collect();
            let mut expanded = Vec::with_capacity(drafts.len());
            for fire in drafts {
                let count = partitions.get(fire.app.as_str()).copied().unwrap_or(1);
                expanded.extend(fire.into_shards(i32::try_from(count).unwrap_or(1)));
            }
            Ok(expanded)
        }

        /// Writes fires as pending job-log rows owned by `node_id`, skipping trigger ids that
        /// exist already (a fire is written once, whoever writes it), and returns the written
        /// ones with their row ids.
        ///
        /// A trigger id that exists only as a cancelled fire is written again: the new
        /// schedule fires at an instant the old one had planned too, and the new fire replaces
        /// the cancelled one. It gets a new row id, above the cancellation's, so the copy of
        /// the cancelled fire that a wheel may hold is still recognised and dropped.
        async fn insert_fires(
            tx: &mut sqlx::Transaction<'_, $db>,
            drafts: Vec<PendingFire>,
            node_id: &str,
            lease_ms: i64,
            now_ms: i64,
        ) -> Result<Vec<PendingFire>, StoreError> {
            let drafts = expand_broadcasts(tx, drafts).await?;
            let (mut written, existing) = insert_new_fires(tx, drafts, node_id, lease_ms, now_ms).await?;
            if existing.is_empty() {
                return Ok(written);
            }
            let mut replaced = std::collections::HashSet::new();
            for chunk in existing.chunks($crate::store::sql::UPDATE_CHUNK) {
                let mut delete = sqlx::QueryBuilder::<$db>::new(
                    "DELETE FROM job_logs WHERE state = 'CANCELLED' AND trigger_id IN (",
                );
                let mut separated = delete.separated(", ");
                for fire in chunk {
                    separated.push_bind(fire.trigger_id.as_str().to_owned());
                }
                delete.push(") RETURNING trigger_id");
                let rows: Vec<(String,)> = delete
                    .build_query_as()
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::query("replace cancelled fires"))?;
                replaced.extend(rows.into_iter().map(|(trigger,)| trigger));
            }
            let (again, still_existing): (Vec<PendingFire>, Vec<PendingFire>) = existing
                .into_iter()
                .partition(|fire| replaced.contains(fire.trigger_id.as_str()));
            for fire in &still_existing {
                tracing::warn!(trigger_id = %fire.trigger_id, "fire exists already; not writing it twice");
            }
            let (rewritten, _) = insert_new_fires(tx, again, node_id, lease_ms, now_ms).await?;
            written.extend(rewritten);
            Ok(written)
        }

        /// Inserts fires whose trigger ids are new; returns the written ones with their row
        /// ids, and the ones whose trigger id exists already.
        async fn insert_new_fires(
            tx: &mut sqlx::Transaction<'_, $db>,
            drafts: Vec<PendingFire>,
            node_id: &str,
            lease_ms: i64,
            now_ms: i64,
        ) -> Result<(Vec<PendingFire>, Vec<PendingFire>), StoreError> {
            let mut written = Vec::with_capacity(drafts.len());
            let mut existing = Vec::new();
            for chunk in drafts.chunks($crate::store::sql::INSERT_CHUNK) {
                let mut insert = sqlx::QueryBuilder::<$db>::new(
                    "INSERT INTO job_logs (trigger_id, job_id, app, handler, params, trigger_type, \
                     shard_index, shard_total, attempt, scheduled_at_ms, fire_at_ms, route_strategy, \
                     block_strategy, timeout_ms, state, owner_node, lease_until_ms, created_at_ms, \
                     glue_type, glue_source, glue_updated_at_ms, route_partitions) ",
                );
                insert.push_values(chunk, |mut values, fire| {
                    values
                        .push_bind(fire.trigger_id.as_str().to_owned())
                        .push_bind(fire.job_id.get())
                        .push_bind(fire.app.as_str().to_owned())
                        .push_bind(fire.handler.clone())
                        .push_bind(fire.params.clone())
                        .push_bind(fire.trigger_type.as_str())
                        .push_bind(i64::from(fire.shard_index))
                        .push_bind(i64::from(fire.shard_total))
                        .push_bind(i64::from(fire.attempt))
                        .push_bind(fire.scheduled_at_ms)
                        .push_bind(fire.fire_at_ms)
                        .push_bind(fire.route_strategy.as_str())
                        .push_bind(fire.block_strategy.as_str())
                        .push_bind(fire.timeout_ms)
                        .push_bind(RunState::Scheduled.as_str())
                        .push_bind(node_id.to_owned())
                        .push_bind(fire.fire_at_ms.max(now_ms) + lease_ms)
                        .push_bind(now_ms)
                        .push_bind(fire.glue_type.as_str())
                        .push_bind(fire.glue_source.clone())
                        .push_bind(fire.glue_updated_at_ms)
                        .push_bind(fire.route_partitions.as_deref().map($crate::store::rows::join_list));
                });
                insert.push(" ON CONFLICT (trigger_id) DO NOTHING RETURNING id, trigger_id");
                let rows: Vec<(i64, String)> = insert
                    .build_query_as()
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::query("write pending fires"))?;
                let ids: std::collections::HashMap<String, i64> =
                    rows.into_iter().map(|(id, trigger)| (trigger, id)).collect();
                for fire in chunk {
                    match ids.get(fire.trigger_id.as_str()) {
                        Some(&log_id) => written.push(PendingFire { log_id, ..fire.clone() }),
                        None => existing.push(fire.clone()),
                    }
                }
            }
            Ok((written, existing))
        }
    };
}

pub(crate) use impl_sql_store;

use super::PreReadRequest;
use super::rows::JobRow;
use crate::model::{Job, JobStatus, PendingFire};
use crate::preread::{DueJob, NextFire, plan_job};

/// A job's next-fire bookkeeping after a scan.
pub(crate) struct JobAdvance {
    pub(crate) job_id: i64,
    /// The next fire the scan read: the advance applies only if it is still current.
    pub(crate) read_next_fire_ms: Option<i64>,
    pub(crate) next_fire_ms: Option<i64>,
    pub(crate) last_fire_ms: Option<i64>,
    pub(crate) status: JobStatus,
}

/// Fires and job updates planned from the due rows of one scan.
pub(crate) struct PlannedScan {
    pub(crate) fires: Vec<PendingFire>,
    pub(crate) advances: Vec<JobAdvance>,
}

/// Plans every due row (see [`plan_job`]). A row that cannot be read stops its job, loudly,
/// rather than blocking the scan for every other job.
pub(crate) fn plan_rows(rows: Vec<JobRow>, request: &PreReadRequest) -> PlannedScan {
    let mut scan = PlannedScan {
        fires: Vec::new(),
        advances: Vec::with_capacity(rows.len()),
    };
    for row in rows {
        let row_id = row.id();
        let read_next_fire_ms = row.next_fire_ms();
        let job = match Job::try_from(row) {
            Ok(job) => job,
            Err(error) => {
                tracing::error!(job_id = row_id, %error, "cannot schedule job; stopping it");
                scan.advances.push(JobAdvance {
                    job_id: row_id,
                    read_next_fire_ms,
                    next_fire_ms: None,
                    last_fire_ms: None,
                    status: JobStatus::Stopped,
                });
                continue;
            }
        };
        let Some(next_fire_ms) = job.next_fire_ms else {
            continue;
        };
        let due = DueJob {
            id: job.id,
            schedule: job.spec.schedule.clone(),
            time_zone: job.spec.time_zone,
            misfire_strategy: job.spec.misfire_strategy,
            next_fire_ms,
        };
        let plan = plan_job(&due, request.now_ms, request.window_ms);
        let next_fire_ms = plan.next.at();
        let last_fire_ms = plan.fires.last().map(|fire| fire.scheduled_at_ms);
        scan.fires.extend(plan.fires.iter().map(|fire| PendingFire {
            log_id: 0,
            trigger_id: kadence_schemas::TriggerId::scheduled(job.id, fire.scheduled_at_ms),
            job_id: job.id,
            app: job.spec.app.clone(),
            handler: job.spec.handler.clone(),
            params: job.spec.params.clone(),
            trigger_type: fire.trigger_type,
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            scheduled_at_ms: fire.scheduled_at_ms,
            fire_at_ms: fire.fire_at_ms,
            route_strategy: job.spec.route_strategy,
            block_strategy: job.spec.block_strategy,
            timeout_ms: job.spec.timeout_ms,
            glue_type: job.spec.glue.glue_type,
            glue_source: job.spec.glue.source.clone(),
            glue_updated_at_ms: job.glue_updated_at_ms,
            route_partitions: None,
        }));
        let status = if plan.next == NextFire::Never {
            tracing::info!(job_id = %job.id, "schedule has no future fire; stopping the job");
            JobStatus::Stopped
        } else {
            JobStatus::Running
        };
        scan.advances.push(JobAdvance {
            job_id: job.id.get(),
            read_next_fire_ms,
            next_fire_ms,
            last_fire_ms,
            status,
        });
    }
    scan
}
