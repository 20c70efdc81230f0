//! The XXL-JOB bridge with real XXL-JOB executors: `kadence bridge xxl-job` as a process of
//! the `kadence` command, in front of the frameless sample executor of
//! `tests/xxl-job-executor` built on xxl-job-core 2.4.2 and on 3.3.2 (every scenario runs at
//! both), against a scheduler in this process (SQLite) and the real broker.
//!
//! The sample's handlers: `ok` (succeeds), `fail` (fails on purpose), `sleep` (params: ms,
//! stops when interrupted), `lines` (params: N lines), `shard` (logs and answers its shard),
//! `echo`. Each scenario has an app of its own, named by the test, whose executors register
//! with the bridge under that name, as XXL-JOB executors register with their admin.
//!
//! What the scenarios show, each at both versions: a cron job firing every second through
//! Kafka, the bridge and the executor, with its results and log lines in Kadence; failures
//! and an unknown handler; a kill and a timeout, each stopping the legacy run; a broadcast
//! over two executors with XXL-JOB's shard numbers; an executor killed mid-run (a lost run);
//! a wrong access token refused on both sides; two bridges sharing the group and the
//! executors; and jobs imported from an XXL-JOB database, a GLUE shell job among them,
//! running unchanged.

mod processes;
mod scenarios;

pub use processes::{BridgeProcess, LegacyExecutor, XxlVersion, post};

/// Declares one test per xxl-job-core version for each scenario (`scenarios::$name`).
macro_rules! at_both_versions {
    ($($name:ident),* $(,)?) => {
        mod v2_4 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::scenarios::$name(super::XxlVersion::V2_4).await;
                }
            )*
        }
        mod v3_3 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::scenarios::$name(super::XxlVersion::V3_3).await;
                }
            )*
        }
    };
}

at_both_versions!(
    a_cron_job_runs_every_second_with_its_log,
    failures_and_unknown_handlers_come_back_as_xxl_job_reports_them,
    a_kill_and_a_timeout_stop_the_legacy_run,
    a_broadcast_runs_once_on_each_executor_with_xxl_jobs_shard_numbers,
    a_run_whose_executor_dies_is_lost,
    a_wrong_access_token_is_refused_on_both_sides,
    two_bridges_split_the_partitions_and_share_the_executors,
    imported_jobs_run_unchanged_through_the_bridge,
    busyover_and_failover_ask_the_executors_as_xxl_job_does,
);
