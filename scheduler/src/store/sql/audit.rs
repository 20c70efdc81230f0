//! The [`AuditTrail`] half: table `audit_log`, the same SQL on every backend.

use kadence_schemas::AppName;

use super::backend::{SqlBackend, SqlStore};
use super::statement::{IntoSqlValue as _, Statement};
use crate::domain::model::{AuditEntry, NewAuditEntry};
use crate::store::rows::{AUDIT_COLUMNS, AuditRow};
use crate::store::{AuditFilter, AuditTrail, PageRequest, StoreError};

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
            app: (app.map(|app| AppName::parse(&app)).transpose())
                .map_err(|error| corrupt(error.to_string()))?,
            status: u16::try_from(status).map_err(|error| corrupt(error.to_string()))?,
            details: (details.map(|text| serde_json::from_str(&text)).transpose())
                .map_err(|error| corrupt(error.to_string()))?,
        },
    })
}

#[async_trait::async_trait]
impl<B: SqlBackend> AuditTrail for SqlStore<B> {
    async fn record_audit(&self, entry: &NewAuditEntry) -> Result<i64, StoreError> {
        const OPERATION: &str = "record an audit entry";
        let insert = Statement::insert_into(
            "audit_log",
            [
                ("at_ms", entry.at_ms.into_sql_value()),
                ("user_id", entry.user_id.into_sql_value()),
                ("user_name", entry.user_name.as_str().into_sql_value()),
                ("action", entry.action.as_str().into_sql_value()),
                ("target", entry.target.as_str().into_sql_value()),
                (
                    "app",
                    entry.app.as_ref().map(AppName::as_str).into_sql_value(),
                ),
                ("status", i64::from(entry.status).into_sql_value()),
                (
                    "details",
                    (entry.details.as_ref().map(ToString::to_string)).into_sql_value(),
                ),
            ],
        );
        (insert.insert_returning_id::<B>(&mut *self.connection(OPERATION).await?))
            .await
            .map_err(StoreError::query(OPERATION))
    }

    async fn set_audit_details(
        &self,
        id: i64,
        details: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        const OPERATION: &str = "update an audit entry's details";
        let changed = (Statement::new("UPDATE audit_log SET details = $1 WHERE id = $2")
            .bind(details.to_string())
            .bind(id)
            .execute::<B>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok(changed > 0)
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        page: &PageRequest<i64>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        const OPERATION: &str = "list the audit trail";
        let mut query = Statement::new(format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE true"));
        query.push_app_scope("app", filter.apps.as_deref());
        if let Some(user) = &filter.user_name {
            query.push(" AND user_name = ").push_bind(user);
        }
        if let Some(target) = &filter.target {
            let below = format!("{}/%", target.trim_end_matches('/'));
            query.push(" AND (target = ").push_bind(target);
            query.push(" OR target LIKE ").push_bind(below).push(")");
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
        query
            .push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(page.limit));
        let rows: Vec<AuditRow> = (query
            .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        rows.into_iter().map(entry_from).collect()
    }

    async fn delete_old_audit(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
        const OPERATION: &str = "delete old audit entries";
        // The derived table lets MySQL delete from the table it reads, and take a LIMIT inside
        // IN.
        (Statement::new(
            "DELETE FROM audit_log WHERE id IN (SELECT id FROM \
             (SELECT id FROM audit_log WHERE at_ms < $1 ORDER BY id LIMIT $2) AS old)",
        )
        .bind(before_ms)
        .bind(i64::from(limit))
        .execute::<B>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))
    }
}
