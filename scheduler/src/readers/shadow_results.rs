//! The shadow results reader: executors started as shadows (the SDK's
//! `ExecutorBuilder::shadow`, the Python executor's `shadow=True`) publish their results to
//! `{prefix}.shadow-results` (see `schemas/PROTOCOL.md`). The [`ShadowResultsReader`] stores
//! them in `shadow_results` (the first per trigger id wins) and never touches a production
//! run: a shadow result completes nothing, retries nothing, raises no alarm and fires no
//! child. The diff report against production is [`crate::operations::replay::shadow`].
//!
//! It is a batch reader ([`crate::readers::batch`]) in its own group, `{prefix}.scheduler.shadow`; records that do not decode,
//! or are not signed by an executor key of their `app` (see [`crate::readers::executor_auth`]),
//! go to the DLQ like any other.

use std::sync::Arc;

use kadence_schemas::{ResultRecord, Topics};
use rdkafka::message::OwnedMessage;

use crate::readers::batch::{
    Applied, BatchReader, Offsets, ReaderError, ReaderSources, RecordReader, Signed, decode_value,
};
use crate::store::{Replays, ShadowResult, StoreError};

/// Reads `{prefix}.shadow-results` in group `{prefix}.scheduler.shadow` into the store.
pub type ShadowResultsReader = BatchReader<ShadowResults>;

impl ShadowResultsReader {
    /// Joins the group and subscribes to the shadow results topic.
    pub fn start(
        sources: ReaderSources<'_>,
        store: Arc<dyn Replays>,
    ) -> Result<ShadowResultsReader, ReaderError> {
        let offsets = Offsets::Committed {
            group_suffix: "shadow",
        };
        BatchReader::open(sources, offsets, ShadowResults { store })
    }
}

/// The shadow results reader's own part: reading results as production's are read, and
/// storing them apart.
pub struct ShadowResults {
    store: Arc<dyn Replays>,
}

impl RecordReader for ShadowResults {
    type Record = ShadowResult;
    const NAME: &'static str = "shadow-results";
    const RECORD: &'static str = "shadow result record";

    fn topic(topics: &Topics) -> String {
        topics.shadow_results()
    }

    fn decode(&self, message: &OwnedMessage) -> Result<ShadowResult, String> {
        let record: ResultRecord = decode_value(message, Self::RECORD)?;
        // The checks and the bounded message of a production result, so that both sides of
        // the report were read the same way.
        let (app, job_id) = (record.app.clone(), record.job_id);
        let completion = crate::readers::results::checked_completion(record)?;
        Ok(ShadowResult {
            trigger_id: completion.trigger_id,
            app,
            job_id,
            executor_id: completion.executor_id,
            code: completion.code,
            message: completion.message,
            started_at_ms: completion.started_at_ms,
            finished_at_ms: completion.finished_at_ms,
        })
    }

    fn app_of(result: &ShadowResult) -> Option<&str> {
        Some(result.app.as_str())
    }

    /// Stores the results, the first per trigger id winning.
    async fn apply(&mut self, records: Vec<Signed<ShadowResult>>) -> Result<Applied, StoreError> {
        let results: Vec<ShadowResult> = records.into_iter().map(|signed| signed.record).collect();
        Ok(Applied {
            count: self.store.record_shadow_results(&results).await?,
            ..Applied::default()
        })
    }
}
