//! The store's `executors` table: the latest beat of each executor, written by the beats
//! reader ([`crate::readers::beats`]), listed by the API and the console, swept by the
//! executor sweep ([`crate::monitors::executor_sweep`]).

use kadence_schemas::AppName;

use crate::domain::model::ExecutorEntry;
use crate::store::{AppScope, PageRequest, StoreError};

/// The executor rows (see the module docs).
#[async_trait::async_trait]
pub trait ExecutorRegistry: Send + Sync {
    /// Records the latest beats of executors (a row per executor; an older beat than the one
    /// stored is ignored), in one transaction.
    async fn upsert_executors(&self, entries: &[ExecutorEntry]) -> Result<(), StoreError>;

    /// The registry's executors, optionally of one app, by app and id.
    async fn list_executors(&self, app: Option<&AppName>)
    -> Result<Vec<ExecutorEntry>, StoreError>;

    /// A page of the registry's executors of `apps`, by app and id; the key is (app,
    /// executor id).
    async fn list_executors_page(
        &self,
        apps: AppScope<'_>,
        page: &PageRequest<(String, String)>,
    ) -> Result<Vec<ExecutorEntry>, StoreError>;

    /// Marks DEAD every executor whose latest beat is older than `stale_before_ms`; returns the
    /// ids it marked (each is marked once, whichever node sweeps first).
    async fn mark_dead_executors(&self, stale_before_ms: i64) -> Result<Vec<String>, StoreError>;

    /// Deletes DEAD executors whose latest beat is older than `dead_before_ms`.
    async fn forget_executors(&self, dead_before_ms: i64) -> Result<u64, StoreError>;
}
