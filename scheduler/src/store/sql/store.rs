//! The [`Store`] implementation itself, beside its halves: the backend's name, its migrations
//! and the check that the database answers; and the plan hints the fire path's keyed batches
//! run under ([`prefer_keyed_joins`]).

use super::backend::{SqlBackend, SqlStore};
use super::statement::Statement;
use crate::store::{Store, StoreError};

/// Makes the keyed batches of `tx` probe the primary key (see [`SqlBackend::KEYED_JOINS`]).
pub(in crate::store) async fn prefer_keyed_joins<B: SqlBackend>(
    tx: &mut B::Connection,
) -> Result<(), StoreError> {
    if B::KEYED_JOINS.is_empty() {
        return Ok(());
    }
    (Statement::new(B::KEYED_JOINS).execute::<B>(tx).await)
        .map_err(StoreError::query("set the plan hints of a keyed batch"))?;
    Ok(())
}

#[async_trait::async_trait]
impl<B: SqlBackend> Store for SqlStore<B> {
    fn backend(&self) -> &'static str {
        <B as SqlBackend>::NAME
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        B::migrate(self).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        const OPERATION: &str = "check that the database answers";
        (Statement::new("SELECT 1").execute::<B>(&mut *self.connection(OPERATION).await?))
            .await
            .map(|_| ())
            .map_err(StoreError::query(OPERATION))
    }
}
