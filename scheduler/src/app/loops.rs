//! The node's topic readers and monitors: the loops that read what executors publish
//! (beats, results, shadow results, logs, dead-lettered triggers) and the ones that follow a
//! finished run up.

use std::sync::Arc;

use anyhow::Context as _;

use super::{FirePath, Node};
use crate::engine::signer::run_refresh;
use crate::monitors::database_watch::run_database_watch;
use crate::monitors::executor_sweep::run_sweeper;
use crate::monitors::lost_runs::run_lost_run_monitor;
use crate::monitors::{
    alarm::Alarms, follow_up::FollowUp, reports::run_reports, retention::run_retention,
};
use crate::readers::batch::ReaderSources;
use crate::readers::beats::{Beats, BeatsReader};
use crate::readers::dead_letters::DeadLetterReader;
use crate::readers::executor_auth::run_keyring_refresh;
use crate::readers::logs::LogsReader;
use crate::readers::results::ResultsConsumer;
use crate::readers::shadow_results::ShadowResultsReader;

/// Most results the results reader records in one transaction. A batch holds what is ready,
/// so this matters only when results wait: then larger batches mean fewer transactions and
/// round trips per result, and a backlog drains before the run rows' hold ends.
const RESULTS_BATCH_MAX: usize = 5_000;

impl Node {
    /// The readers of the shared topics: beats (with the registry's sweeper and the lost-run
    /// monitor), results on the scheduling pool, log lines, shadow results, dead letters.
    pub(super) async fn spawn_readers(&self) -> anyhow::Result<()> {
        self.spawn_beats().await?;
        let background = &self.pools.background;
        let session_timeout = self.config.kafka.session_timeout;
        let results = ResultsConsumer::new(
            &self.kafka,
            &self.topics,
            session_timeout,
            self.pools.scheduling.clone(),
            self.dead_letters(),
            Arc::clone(&self.keyring),
            RESULTS_BATCH_MAX,
        )?
        .taking_held_runs_from(Arc::clone(&self.held_runs))
        .with_metrics(Arc::clone(&self.metrics))
        .with_tracer(self.tracer.clone());
        self.tasks.spawn(results.run(self.shutdown.clone()));
        let logs = LogsReader::start(
            self.reader_sources(),
            background.clone(),
            self.config.logs.max_lines_per_run,
        )?
        .with_lag_metrics(Arc::clone(&self.metrics))
        .yielding_to(Arc::clone(&self.pressure), Arc::clone(&self.clock));
        self.tasks.spawn(logs.run(self.shutdown.clone()));
        let shadow_results = ShadowResultsReader::start(self.reader_sources(), background.clone())?;
        self.tasks.spawn(shadow_results.run(self.shutdown.clone()));
        let dead_letters = DeadLetterReader::new(
            &self.kafka,
            &self.topics,
            session_timeout,
            Arc::clone(background),
            Arc::clone(&self.clock),
            Arc::clone(&self.keyring),
        )?;
        self.tasks.spawn(dead_letters.run(self.shutdown.clone()));
        Ok(())
    }

    /// What the batch readers are built from.
    fn reader_sources(&self) -> ReaderSources<'_> {
        ReaderSources {
            kafka: &self.kafka,
            topics: &self.topics,
            session_timeout: self.config.kafka.session_timeout,
            dead_letters: self.dead_letters(),
            keyring: Arc::clone(&self.keyring),
        }
    }

    /// The beats reader, which builds the registry, with the registry's sweeper and the
    /// lost-run monitor that judge by it.
    async fn spawn_beats(&self) -> anyhow::Result<()> {
        let background = &self.pools.background;
        let beats_partitions = self
            .admin
            .partition_count(&self.topics.beats())
            .await
            .context("reading the beats topic")?;
        let beats = Beats::new(
            Arc::clone(&self.registry),
            background.clone(),
            Arc::clone(&self.clock),
            Some(Arc::clone(&self.partitions)),
        );
        let beats = BeatsReader::start(self.reader_sources(), beats_partitions, beats)?;
        self.tasks.spawn(beats.run(self.shutdown.clone()));
        let registry_config = &self.config.registry;
        self.tasks.spawn(run_sweeper(
            background.clone(),
            registry_config.clone(),
            Arc::clone(&self.clock),
            self.shutdown.clone(),
        ));
        self.tasks.spawn(run_lost_run_monitor(
            Arc::clone(background),
            registry_config.clone(),
            Arc::clone(&self.clock),
            Arc::clone(&self.metrics),
            self.shutdown.clone(),
        ));
        Ok(())
    }

    /// What follows a finished run, on the background pool: retries, alarms and children,
    /// daily reports, retention; the signing key's refresh; and the database watch.
    pub(super) fn spawn_monitors(&self, fire_path: &FirePath) -> anyhow::Result<()> {
        let background = &self.pools.background;
        self.tasks.spawn(run_database_watch(
            Arc::clone(background),
            Arc::clone(&self.database),
            Arc::clone(&self.clock),
            self.shutdown.clone(),
        ));
        self.tasks.spawn(run_keyring_refresh(
            Arc::clone(&self.keyring),
            self.config.executor_auth.key_refresh_interval,
            self.shutdown.clone(),
        ));
        self.tasks.spawn(run_refresh(
            Arc::clone(self.signed.signer()),
            Arc::clone(background) as Arc<dyn crate::store::SigningKeys>,
            self.config.signing.key_refresh_interval,
            self.shutdown.clone(),
        ));
        let monitors = &self.config.monitors;
        let alarms =
            Arc::new(Alarms::from_config(&self.config.alarm).context("setting up alarms")?);
        let follow_up = FollowUp::new(
            Arc::clone(background),
            alarms,
            fire_path.intake.using(Arc::clone(background)),
            monitors.clone(),
        );
        self.tasks
            .spawn(follow_up.run(Arc::clone(&self.clock), self.shutdown.clone()));
        self.tasks.spawn(run_reports(
            background.clone(),
            monitors.report_interval,
            self.config.retention.clone(),
            (Arc::clone(&self.clock), Arc::clone(&self.pressure)),
            self.shutdown.clone(),
        ));
        self.tasks.spawn(run_retention(
            Arc::clone(background),
            self.config.retention.clone(),
            (Arc::clone(&self.clock), Arc::clone(&self.pressure)),
            self.shutdown.clone(),
        ));
        Ok(())
    }
}
