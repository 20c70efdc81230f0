//! The [`Imports`](crate::store::Imports) implementation: table `imported_ids`, and the apps,
//! jobs, script versions, users, grants and reset tokens an import creates; the same SQL on
//! both backends. Kept apart from the tables' own files so that a backend port (MySQL) takes
//! it as one piece.

use std::collections::HashMap;

use kadence_schemas::{AppName, JobId};

use super::backend::{SqlBackend, SqlStore};
use super::statement::{IntoSqlValue as _, Statement};
use crate::domain::model::Glue;
use crate::store::{
    ImportIds, ImportWrite, ImportedId, ImportedJob, ImportedKind, ImportedUser, Imports,
    StoreError,
};

const OPERATION: &str = "write an import";

/// Records that `source`'s `kind` entity `source_id` became `kadence_id`.
async fn remember<B: SqlBackend>(
    tx: &mut B::Connection,
    source: &str,
    (kind, source_id, kadence_id): (ImportedKind, i64, String),
    fingerprint: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    Statement::new(
        "INSERT INTO imported_ids (source, kind, source_id, kadence_id, fingerprint, \
         imported_at_ms) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(source)
    .bind(kind.as_str())
    .bind(source_id)
    .bind(kadence_id)
    .bind(fingerprint)
    .bind(now_ms)
    .execute::<B>(&mut *tx)
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(())
}

/// Inserts a job as `create_job` does, with the import's status, next fire and
/// script versions; its children are set later.
async fn insert_job<B: SqlBackend>(
    tx: &mut B::Connection,
    job: &ImportedJob,
    now_ms: i64,
) -> Result<JobId, StoreError> {
    let state = super::job_writes::JobRowState {
        status: job.status,
        next_fire_ms: job.next_fire_ms,
        glue_updated_at_ms: job.glue_updated_at_ms,
    };
    let id =
        super::job_writes::insert_job_row::<B>(tx, &job.spec, state, now_ms, OPERATION).await?;
    let id = JobId::new(id).map_err(|error| StoreError::CorruptRow {
        what: format!("job {id}"),
        reason: error.to_string(),
    })?;
    for version in &job.glue_versions {
        let glue = Glue {
            glue_type: version.glue_type,
            source: Some(version.source.clone()),
            remark: version.remark.clone(),
        };
        super::job_writes::save_glue_version::<B>(tx, id, &glue, version.created_at_ms).await?;
    }
    Ok(id)
}

/// Gives each job of the write its children, once every job has its id.
async fn link_children<B: SqlBackend>(
    tx: &mut B::Connection,
    write: &ImportWrite,
    ids: &HashMap<i64, JobId>,
) -> Result<(), StoreError> {
    for job in write
        .jobs
        .iter()
        .filter(|job| !job.child_sources.is_empty())
    {
        let mut children = job.spec.child_job_ids.clone();
        children.extend(
            job.child_sources
                .iter()
                .filter_map(|source| ids.get(source)),
        );
        Statement::new("UPDATE jobs SET child_job_ids = $1 WHERE id = $2")
            .bind(crate::store::rows::join_list(&children))
            .bind(ids[&job.source_id].get())
            .execute::<B>(&mut *tx)
            .await
            .map_err(StoreError::query(OPERATION))?;
    }
    Ok(())
}

/// Inserts a user without a password, their grants and their reset token.
async fn insert_user<B: SqlBackend>(
    tx: &mut B::Connection,
    user: &ImportedUser,
    now_ms: i64,
) -> Result<i64, StoreError> {
    // "!" is no Argon2 PHC string, so no password matches it until a reset.
    let insert = Statement::insert_into(
        "users",
        [
            ("name", user.name.as_str().into_sql_value()),
            ("password_hash", "!".into_sql_value()),
            ("role", user.role.as_str().into_sql_value()),
            ("created_at_ms", now_ms.into_sql_value()),
            ("updated_at_ms", now_ms.into_sql_value()),
        ],
    );
    let id = match insert.insert_returning_id::<B>(&mut *tx).await {
        Ok(id) => id,
        Err(sqlx::Error::Database(error)) if error.is_unique_violation() => {
            return Err(StoreError::UserExists(user.name.clone()));
        }
        Err(source) => return Err(StoreError::query(OPERATION)(source)),
    };
    for (app, access) in &user.grants {
        super::job_writes::ensure_app_exists::<B>(tx, app, OPERATION).await?;
        Statement::new("INSERT INTO user_grants (user_id, app, access) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(app.as_str())
            .bind(access.as_str())
            .execute::<B>(&mut *tx)
            .await
            .map_err(StoreError::query(OPERATION))?;
    }
    Statement::new(
        "INSERT INTO password_reset_tokens (user_id, token_hash, issued_by, \
         created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(&user.reset.token_hash)
    .bind(&user.reset.issued_by)
    .bind(now_ms)
    .bind(user.reset.expires_at_ms)
    .execute::<B>(&mut *tx)
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(id)
}

#[async_trait::async_trait]
impl<B: SqlBackend> Imports for SqlStore<B> {
    async fn imported_ids(&self, source: &str) -> Result<Vec<ImportedId>, StoreError> {
        let rows: Vec<(String, i64, String, String, i64)> = Statement::new(
            "SELECT kind, source_id, kadence_id, fingerprint, imported_at_ms \
             FROM imported_ids WHERE source = $1 ORDER BY kind, source_id",
        )
        .bind(source)
        .fetch_all::<B, _>(&mut *self.connection("read imported ids").await?)
        .await
        .map_err(StoreError::query("read imported ids"))?;
        rows.into_iter()
            .map(
                |(kind, source_id, kadence_id, fingerprint, imported_at_ms)| {
                    let kind =
                        kind.parse::<ImportedKind>()
                            .map_err(|error| StoreError::CorruptRow {
                                what: format!("imported id {source_id} of {source}"),
                                reason: error.to_string(),
                            })?;
                    Ok(ImportedId {
                        kind,
                        source_id,
                        kadence_id,
                        fingerprint,
                        imported_at_ms,
                    })
                },
            )
            .collect()
    }

    async fn write_import(
        &self,
        write: &ImportWrite,
        now_ms: i64,
    ) -> Result<ImportIds, StoreError> {
        let mut tx = self.begin_write(OPERATION).await?;
        let source = write.source.as_str();
        for imported in &write.apps {
            let app = &imported.app;
            super::job_writes::insert_app::<B>(&mut *tx, app, OPERATION).await?;
            let key = (ImportedKind::App, imported.source_id, app.name.to_string());
            remember::<B>(&mut tx, source, key, &imported.fingerprint, now_ms).await?;
        }
        let mut ids = ImportIds::default();
        let mut job_ids = HashMap::new();
        for job in &write.jobs {
            let id = insert_job::<B>(&mut tx, job, now_ms).await?;
            let key = (ImportedKind::Job, job.source_id, id.to_string());
            remember::<B>(&mut tx, source, key, &job.fingerprint, now_ms).await?;
            job_ids.insert(job.source_id, id);
            ids.jobs.push((job.source_id, id));
        }
        link_children::<B>(&mut tx, write, &job_ids).await?;
        for user in &write.users {
            let id = insert_user::<B>(&mut tx, user, now_ms).await?;
            let key = (ImportedKind::User, user.source_id, id.to_string());
            remember::<B>(&mut tx, source, key, &user.fingerprint, now_ms).await?;
            ids.users.push((user.source_id, id));
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(ids)
    }

    async fn forget_imported(
        &self,
        source: &str,
        kind: ImportedKind,
        source_id: i64,
    ) -> Result<(), StoreError> {
        Statement::new(
            "DELETE FROM imported_ids WHERE source = $1 AND kind = $2 AND source_id = $3",
        )
        .bind(source)
        .bind(kind.as_str())
        .bind(source_id)
        .execute::<B>(&mut *self.connection("forget an imported id").await?)
        .await
        .map_err(StoreError::query("forget an imported id"))?;
        Ok(())
    }

    async fn remove_app_without_jobs(&self, name: &AppName) -> Result<bool, StoreError> {
        const REMOVE: &str = "remove an imported app";
        let mut tx = self.begin_write(REMOVE).await?;
        let done = Statement::new(
            "DELETE FROM apps WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE app = $2)",
        )
        .bind(name.as_str())
        .bind(name.as_str())
        .execute::<B>(&mut tx)
        .await
        .map_err(StoreError::query(REMOVE))?;
        if done == 0 {
            return Ok(false);
        }
        Statement::new("DELETE FROM user_grants WHERE app = $1")
            .bind(name.as_str())
            .execute::<B>(&mut tx)
            .await
            .map_err(StoreError::query(REMOVE))?;
        tx.commit().await.map_err(StoreError::query(REMOVE))?;
        Ok(true)
    }
}
