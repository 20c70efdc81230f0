//! The `jobs` table: create, edit, list, start and stop jobs (a stop or a schedule edit
//! cancels the planned fires and records the cancellation), and child links.

/// Generates, in the backend's file, the module `jobs` of functions on `$store` that the
/// [`Store`](crate::store::Store) implementation calls.
macro_rules! sql_jobs {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod jobs {
            use super::*;

            /// Job `id` as `tx` sees it (just written by it: no backend returns the row of
            /// an update in one statement on all three, MySQL having no RETURNING).
            async fn read_job_in(
                tx: &mut sqlx::Transaction<'_, $db>,
                id: i64,
                operation: &'static str,
            ) -> Result<Job, StoreError> {
                let row: JobRow = sqlx::query_as(&backend_sql(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1")))
                    .bind(id)
                    .fetch_one(&mut **tx)
                    .await
                    .map_err(StoreError::query(operation))?;
                Job::try_from(row)
            }

            pub(super) async fn create_job(store: &$store, job: &NewJob, now_ms: i64) -> Result<Job, StoreError> {
                const OPERATION: &str = "create a job";
                let mut tx = store.begin_write(OPERATION).await?;
                let glue_version = job.glue.source.is_some().then_some(now_ms);
                let state = JobRowState { status: JobStatus::Stopped, next_fire_ms: None, glue_updated_at_ms: glue_version };
                let id = insert_job_row(&mut tx, job, state, now_ms, OPERATION).await?;
                let created = read_job_in(&mut tx, id, OPERATION).await?;
                if glue_version.is_some() {
                    save_glue_version(&mut tx, created.id, &job.glue, now_ms).await?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(created)
            }

            pub(super) async fn update_job(
                store: &$store,
                id: JobId,
                job: &NewJob,
                status: JobStatus,
                next_fire_ms: Option<i64>,
                replan: Option<i64>,
                now_ms: i64,
            ) -> Result<JobChange, StoreError> {
                const OPERATION: &str = "update a job";
                let mut tx = store.begin_write(OPERATION).await?;
                ensure_app_exists(&mut tx, &job.app, OPERATION).await?;
                let current: Option<(String, Option<String>, Option<i64>)> = sqlx::query_as(
                    &backend_sql("SELECT glue_type, glue_source, glue_updated_at_ms FROM jobs WHERE id = $1",)
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
                     glue_updated_at_ms = ${} WHERE id = ${}",
                    assignments.join(", "),
                    n + 1,
                    n + 2,
                    n + 3,
                    n + 4,
                    n + 5,
                );
                bind_job_spec(sqlx::query(&backend_sql(&sql)), job)
                    .bind(status.as_str())
                    .bind(next_fire_ms)
                    .bind(now_ms)
                    .bind(glue_version)
                    .bind(id.get())
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                let updated = read_job_in(&mut tx, id.get(), OPERATION).await?;
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
                Ok(JobChange { job: updated, cancelled })
            }

            pub(super) async fn list_jobs(
                store: &$store,
                filter: &$crate::store::JobFilter,
                page: &PageRequest<JobId>,
            ) -> Result<Vec<Job>, StoreError> {
                // Only the filters given become conditions, so each shape of the query has a
                // plan that uses its index (jobs_app_id for the app, the primary key for
                // the page) rather than one generic plan for every combination.
                let mut query = sqlx::QueryBuilder::<$db>::new(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE true"));
                $crate::store::sql::push_app_scope!(query, "app", filter.apps.as_deref());
                if let Some(status) = filter.status {
                    query.push(" AND status = ").push_bind(status.as_str());
                }
                if let Some(handler) = &filter.handler {
                    query.push(" AND handler = ").push_bind(handler.clone());
                }
                if let Some(author) = &filter.author {
                    query.push(" AND author = ").push_bind(author.clone());
                }
                if let Some(text) = &filter.text {
                    // Both backends take LOWER(…) LIKE LOWER(…) with an explicit escape
                    // (SQLite has no default one); SQLite's LOWER folds ASCII letters only.
                    let pattern = $crate::store::filters::contains_pattern(text);
                    query
                        .push(" AND (LOWER(name) LIKE LOWER(")
                        .push_bind(pattern.clone())
                        .push(r") ESCAPE '\' OR LOWER(handler) LIKE LOWER(")
                        .push_bind(pattern)
                        .push(r") ESCAPE '\'");
                    if let Ok(id) = text.trim().parse::<JobId>() {
                        query.push(" OR id = ").push_bind(id.get());
                    }
                    query.push(")");
                }
                if let Some(after) = page.after {
                    query.push(" AND id > ").push_bind(after.get());
                }
                query.push(" ORDER BY id LIMIT ").push_bind(i64::from(page.limit));
                let rows: Vec<JobRow> = query
                    .build_query_as()
                    .fetch_all(&store.pool)
                    .await
                    .map_err(StoreError::query("list jobs"))?;
                convert_all(rows)
            }

            pub(super) async fn child_links(store: &$store, ids: &[JobId]) -> Result<Vec<(JobId, Vec<JobId>)>, StoreError> {
                let mut links = Vec::with_capacity(ids.len());
                for chunk in ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut query = sqlx::QueryBuilder::<$db>::new("SELECT id, child_job_ids FROM jobs WHERE id");
                    $crate::store::sql::push_in_list!(query, chunk.iter().map(|id| id.get()));
                    let rows: Vec<(i64, String)> = query
                        .build_query_as()
                        .fetch_all(&store.pool)
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

            pub(super) async fn set_job_status(
                store: &$store,
                id: JobId,
                status: JobStatus,
                next_fire_ms: Option<i64>,
                cancel_from_ms: i64,
                now_ms: i64,
            ) -> Result<JobChange, StoreError> {
                const OPERATION: &str = "change a job's status";
                let mut tx = store.begin_write(OPERATION).await?;
                let changed = sqlx::query(&backend_sql(
                    "UPDATE jobs SET status = $1, next_fire_ms = $2, updated_at_ms = $3 WHERE id = $4",
                ))
                .bind(status.as_str())
                .bind(next_fire_ms)
                .bind(now_ms)
                .bind(id.get())
                .execute(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                if changed.rows_affected() == 0 {
                    return Err(StoreError::JobNotFound(id));
                }
                let job = read_job_in(&mut tx, id.get(), OPERATION).await?;
                let cancelled = if status == JobStatus::Stopped {
                    cancel_planned_fires(&mut tx, id, "the job was stopped", cancel_from_ms, now_ms).await?
                } else {
                    None
                };
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(JobChange { job, cancelled })
            }

            pub(super) async fn recent_cancellations(
                store: &$store,
                now_ms: i64,
            ) -> Result<Vec<$crate::store::FireCancellation>, StoreError> {
                let rows: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
                    &backend_sql("SELECT job_id, up_to_log_id, from_ms, until_ms FROM fire_cancellations \
                     WHERE until_ms > $1",)
                )
                .bind(now_ms)
                .fetch_all(&store.pool)
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
        }
    };
}

pub(crate) use sql_jobs;
