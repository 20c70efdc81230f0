//! The [`AuditTrail`](crate::store::AuditTrail) implementation: table `audit_log`, the same
//! SQL on both backends.

/// Implements [`AuditTrail`](crate::store::AuditTrail) for a backend type with a `pool`
/// field.
macro_rules! impl_sql_audit {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod audit {
            use kadence_schemas::AppName;

            use super::*;
            use $crate::domain::model::{AuditEntry, NewAuditEntry};
            use $crate::store::{AuditFilter, AuditTrail};

            type AuditRow = (i64, i64, Option<i64>, String, String, String, Option<String>, i64, Option<String>);

            fn entry_from(row: AuditRow) -> Result<AuditEntry, StoreError> {
                let (id, at_ms, user_id, user_name, action, target, app, status, details) = row;
                let corrupt = |reason: String| StoreError::CorruptRow {
                    what: format!("audit entry {id}"),
                    reason,
                };
                Ok(AuditEntry {
                    id,
                    entry: NewAuditEntry {
                        at_ms,
                        user_id,
                        user_name,
                        action,
                        target,
                        app: app
                            .map(|app| AppName::parse(&app))
                            .transpose()
                            .map_err(|error| corrupt(error.to_string()))?,
                        status: u16::try_from(status).map_err(|error| corrupt(error.to_string()))?,
                        details: details
                            .map(|text| serde_json::from_str(&text))
                            .transpose()
                            .map_err(|error| corrupt(error.to_string()))?,
                    },
                })
            }

            #[async_trait::async_trait]
            impl AuditTrail for $store {
                async fn record_audit(&self, entry: &NewAuditEntry) -> Result<i64, StoreError> {
                    let sql = returning_id(
                        "INSERT INTO audit_log (at_ms, user_id, user_name, action, target, app, status, details) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    );
                    let insert = sqlx::query(&sql)
                        .bind(entry.at_ms)
                        .bind(entry.user_id)
                        .bind(&entry.user_name)
                        .bind(&entry.action)
                        .bind(&entry.target)
                        .bind(entry.app.as_ref().map(|app| app.as_str().to_owned()))
                        .bind(i64::from(entry.status))
                        .bind(entry.details.as_ref().map(|details| details.to_string()));
                    inserted_id(&self.pool, insert)
                        .await
                        .map_err(StoreError::query("record an audit entry"))
                }

                async fn set_audit_details(
                    &self,
                    id: i64,
                    details: &serde_json::Value,
                ) -> Result<bool, StoreError> {
                    let done = sqlx::query(&backend_sql("UPDATE audit_log SET details = $1 WHERE id = $2"))
                        .bind(details.to_string())
                        .bind(id)
                        .execute(&self.pool)
                        .await
                        .map_err(StoreError::query("update an audit entry's details"))?;
                    Ok(done.rows_affected() > 0)
                }

                async fn list_audit(
                    &self,
                    filter: &AuditFilter,
                    page: &PageRequest<i64>,
                ) -> Result<Vec<AuditEntry>, StoreError> {
                    let mut query = sqlx::QueryBuilder::<$db>::new(
                        "SELECT id, at_ms, user_id, user_name, action, target, app, status, details \
                         FROM audit_log WHERE true",
                    );
                    $crate::store::sql::push_app_scope!(query, "app", filter.apps.as_deref());
                    if let Some(user) = &filter.user_name {
                        query.push(" AND user_name = ").push_bind(user.clone());
                    }
                    if let Some(target) = &filter.target {
                        let below = format!("{}/%", target.trim_end_matches('/'));
                        query
                            .push(" AND (target = ")
                            .push_bind(target.clone())
                            .push(" OR target LIKE ")
                            .push_bind(below)
                            .push(")");
                    }
                    if let Some(from_ms) = filter.from_ms {
                        query.push(" AND at_ms >= ").push_bind(from_ms);
                    }
                    if let Some(to_ms) = filter.to_ms {
                        query.push(" AND at_ms < ").push_bind(to_ms);
                    }
                    if let Some(after) = page.after {
                        query.push(" AND id < ").push_bind(after);
                    }
                    query.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(page.limit));
                    let rows: Vec<AuditRow> = query
                        .build_query_as()
                        .fetch_all(&self.pool)
                        .await
                        .map_err(StoreError::query("list the audit trail"))?;
                    rows.into_iter().map(entry_from).collect()
                }

                async fn delete_old_audit(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
                    let done = sqlx::query(
                        // The derived table lets MySQL delete from the table it reads, and
                        // take a LIMIT inside IN.
                        &backend_sql("DELETE FROM audit_log WHERE id IN (SELECT id FROM \
                         (SELECT id FROM audit_log WHERE at_ms < $1 ORDER BY id LIMIT $2) AS old)",)
                    )
                    .bind(before_ms)
                    .bind(i64::from(limit))
                    .execute(&self.pool)
                    .await
                    .map_err(StoreError::query("delete old audit entries"))?;
                    Ok(done.rows_affected())
                }
            }
        }
    };
}
pub(crate) use impl_sql_audit;
