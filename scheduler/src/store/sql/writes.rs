//! Writes several operations share: job definitions and script versions, fires (written
//! once by trigger id, broadcasts expanded, cancelled ones replaced), cancellations.

/// Generates the shared write helpers in the backend's file.
macro_rules! sql_writes {
    ($store:ty, $db:ty, $dialect:ident) => {

        /// The text of `insert` (an `INSERT` of one row into a table with a generated `id`)
        /// for [`inserted_id`]: ANSI backends return the id (`RETURNING id`), MySQL tells it
        /// after the statement (`LAST_INSERT_ID()`).
        fn returning_id(insert: &str) -> String {
            $crate::store::sql::dialect::dialect!($dialect,
                ansi => format!("{insert} RETURNING id"),
                mysql => $crate::store::sql::dialect::mysql_placeholders(insert),
            )
        }

        /// Runs an insert made with [`returning_id`]; returns the new row's id.
        async fn inserted_id<'q, 'c, E>(
            executor: E,
            insert: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>>,
        ) -> Result<i64, sqlx::Error>
        where
            E: sqlx::Executor<'c, Database = $db>,
        {
            $crate::store::sql::dialect::dialect!($dialect,
                ansi => sqlx::Row::try_get(&insert.fetch_one(executor).await?, 0),
                mysql => {
                    let id = insert.execute(executor).await?.last_insert_id();
                    i64::try_from(id).map_err(|error| sqlx::Error::Decode(Box::new(error)))
                },
            )
        }

        /// Replaces each SHARDING_BROADCAST fire by its shards ([`PendingFire::into_shards`]),
        /// reading the partition counts of the apps concerned in the same transaction.
        async fn expand_broadcasts(
            tx: &mut sqlx::Transaction<'_, $db>,
            drafts: Vec<PendingFire>,
        ) -> Result<Vec<PendingFire>, StoreError> {
            if !drafts.iter().any(|fire| fire.route_strategy == $crate::domain::model::RouteStrategy::ShardingBroadcast) {
                return Ok(drafts);
            }
            let rows: Vec<(String, i64)> = sqlx::query_as(&backend_sql("SELECT name, partitions FROM apps"))
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
            store: &$store,
            tx: &mut sqlx::Transaction<'_, $db>,
            drafts: Vec<PendingFire>,
            node_id: &str,
            lease_ms: i64,
            now_ms: i64,
        ) -> Result<Vec<PendingFire>, StoreError> {
            let drafts = expand_broadcasts(tx, drafts).await?;
            let (mut written, existing) = insert_new_fires(store, tx, drafts, node_id, lease_ms, now_ms).await?;
            if existing.is_empty() {
                return Ok(written);
            }
            let replaced = delete_cancelled_fires(tx, &existing).await?;
            let (again, still_existing): (Vec<PendingFire>, Vec<PendingFire>) = existing
                .into_iter()
                .partition(|fire| replaced.contains(fire.trigger_id.as_str()));
            for fire in &still_existing {
                tracing::warn!(trigger_id = %fire.trigger_id, "fire exists already; not writing it twice");
            }
            let (rewritten, _) = insert_new_fires(store, tx, again, node_id, lease_ms, now_ms).await?;
            written.extend(rewritten);
            Ok(written)
        }

        /// Deletes the cancelled runs among the trigger ids of `fires`; returns their trigger ids.
        async fn delete_cancelled_fires(
            tx: &mut sqlx::Transaction<'_, $db>,
            fires: &[PendingFire],
        ) -> Result<std::collections::HashSet<String>, StoreError> {
            const OPERATION: &str = "replace cancelled fires";
            let mut replaced = std::collections::HashSet::new();
            for chunk in fires.chunks($crate::store::sql::UPDATE_CHUNK) {
                let trigger_ids = || chunk.iter().map(|fire| fire.trigger_id.as_str().to_owned());
                $crate::store::sql::dialect::dialect!($dialect,
                    ansi => {
                        let mut delete = sqlx::QueryBuilder::<$db>::new(
                            "DELETE FROM job_logs WHERE state = 'CANCELLED' AND trigger_id",
                        );
                        $crate::store::sql::push_in_list!(delete, trigger_ids());
                        delete.push(" RETURNING trigger_id");
                        let rows: Vec<(String,)> =
                            delete.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        replaced.extend(rows.into_iter().map(|(trigger,)| trigger));
                    },
                    mysql => {
                        let mut select = sqlx::QueryBuilder::<$db>::new(
                            "SELECT trigger_id FROM job_logs FORCE INDEX (job_logs_trigger) \
                             WHERE state = 'CANCELLED' AND trigger_id",
                        );
                        $crate::store::sql::push_in_list!(select, trigger_ids());
                        select.push(" FOR UPDATE");
                        let rows: Vec<(String,)> =
                            select.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        if !rows.is_empty() {
                            let mut delete = sqlx::QueryBuilder::<$db>::new("DELETE FROM job_logs WHERE trigger_id");
                            $crate::store::sql::push_in_list!(delete, rows.iter().map(|(trigger,)| trigger.clone()));
                            delete.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        }
                        replaced.extend(rows.into_iter().map(|(trigger,)| trigger));
                    },
                );
            }
            Ok(replaced)
        }

        /// The columns of `job_logs` a fire fills, in [`push_fire_values`] order.
        const FIRE_INSERT_COLUMNS: &str = "trigger_id, job_id, app, handler, params, trigger_type, \
             shard_index, shard_total, attempt, scheduled_at_ms, fire_at_ms, route_strategy, \
             block_strategy, timeout_ms, glue_type, glue_source, glue_updated_at_ms, route_partitions, \
             replay_of, operation_id";

        /// Binds what `fire` fills of a `job_logs` row, in [`FIRE_INSERT_COLUMNS`] order.
        fn push_fire_values(values: &mut sqlx::query_builder::Separated<'_, '_, $db, &'static str>, fire: &PendingFire) {
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
                .push_bind(fire.glue_type.as_str())
                .push_bind(fire.glue_source.clone())
                .push_bind(fire.glue_updated_at_ms)
                .push_bind(fire.route_partitions.as_deref().map($crate::store::rows::join_list))
                .push_bind(fire.replay_of.as_ref().map(|id| id.as_str().to_owned()))
                .push_bind(fire.operation_id);
        }

        /// Inserts fires whose trigger ids are new; returns the written ones with their row
        /// ids, and the ones whose trigger id exists already.
        async fn insert_new_fires(
            store: &$store,
            tx: &mut sqlx::Transaction<'_, $db>,
            drafts: Vec<PendingFire>,
            node_id: &str,
            lease_ms: i64,
            now_ms: i64,
        ) -> Result<(Vec<PendingFire>, Vec<PendingFire>), StoreError> {
            let mut written = Vec::with_capacity(drafts.len());
            let mut existing = Vec::new();
            for chunk in drafts.chunks($crate::store::sql::INSERT_CHUNK) {
                let ids = insert_fire_rows(store, tx, chunk, node_id, lease_ms, now_ms).await?;
                for fire in chunk {
                    match ids.get(fire.trigger_id.as_str()) {
                        Some(&log_id) => written.push(PendingFire { log_id, ..fire.clone() }),
                        None => existing.push(fire.clone()),
                    }
                }
            }
            Ok((written, existing))
        }

        /// Inserts the rows of `fires` whose trigger ids are new, as SCHEDULED runs owned by
        /// `node_id`; returns the row id of each written, by trigger id.
        async fn insert_fire_rows(
            store: &$store,
            tx: &mut sqlx::Transaction<'_, $db>,
            fires: &[PendingFire],
            node_id: &str,
            lease_ms: i64,
            now_ms: i64,
        ) -> Result<std::collections::HashMap<String, i64>, StoreError> {
            const OPERATION: &str = "write pending fires";
            // MySQL has no RETURNING: the rows get reserved ids, and the ids that are there
            // afterwards are the rows written (a trigger id that existed kept its row).
            let reserved = $crate::store::sql::dialect::dialect!($dialect,
                ansi => { let _ = store; Vec::<i64>::new() },
                mysql => store.reserve_log_ids_in(tx, fires.len()).await?,
            );
            let mut insert = sqlx::QueryBuilder::<$db>::new(format!(
                "INSERT INTO job_logs ({FIRE_INSERT_COLUMNS}, state, owner_node, lease_until_ms, created_at_ms{}) ",
                if reserved.is_empty() { "" } else { ", id" },
            ));
            insert.push_values(fires.iter().enumerate(), |mut values, (index, fire)| {
                push_fire_values(&mut values, fire);
                values
                    .push_bind(RunState::Scheduled.as_str())
                    .push_bind(node_id.to_owned())
                    .push_bind(fire.fire_at_ms.max(now_ms) + lease_ms)
                    .push_bind(now_ms);
                if let Some(&id) = reserved.get(index) {
                    values.push_bind(id);
                }
            });
            $crate::store::sql::dialect::dialect!($dialect,
                ansi => {
                    insert.push(" ON CONFLICT (trigger_id) DO NOTHING RETURNING id, trigger_id");
                    let rows: Vec<(i64, String)> =
                        insert.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                    Ok(rows.into_iter().map(|(id, trigger)| (trigger, id)).collect())
                },
                mysql => {
                    insert.push(" ON DUPLICATE KEY UPDATE id = id");
                    insert.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                    let mut select = sqlx::QueryBuilder::<$db>::new("SELECT id, trigger_id FROM job_logs WHERE id");
                    $crate::store::sql::push_in_list!(select, reserved.iter().copied());
                    let rows: Vec<(i64, String)> =
                        select.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                    Ok(rows.into_iter().map(|(id, trigger)| (trigger, id)).collect())
                },
            )
        }
    };
}

pub(crate) use sql_writes;
