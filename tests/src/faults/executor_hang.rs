//! `executor-hang` (tansu) and `kafka-executor-hang`: one of two executors frozen with
//! SIGSTOP (no heartbeats, no beats, no polls, runs stuck half-way) for longer than its
//! group session (6 s), then thawed with SIGCONT.
//!
//! On Apache Kafka the coordinator evicts the silent member after the session timeout and
//! hands its partitions to the survivor, which runs the triggers not yet committed again; the
//! frozen one's late results when it thaws are repeats under the same id. What must hold
//! there, besides nothing lost: the two executors shared the partitions before the freeze;
//! the survivor came to own every partition during the freeze ("handed over after", from
//! its `owns` lines); and every fire due on the frozen executor's partitions during the
//! freeze (up to [`THAW_MARGIN`] before the thaw) was finished by the survivor before the
//! thaw (from the results topic). Any of these not so fails the scenario.
//!
//! On tansu the partitions are not handed over (see
//! [`Coordinator::Tansu`](super::executor_faults::Coordinator::Tansu)): the frozen
//! executor's triggers wait for it to thaw, and what must hold is that none is lost.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use kadence_schemas::TriggerRecord;

use super::api::PARTITIONS;
use super::executor_faults::Coordinator;
use super::ownership::{log_length, owned, owns_all_within, shared_within};
use super::stack::signal;
use super::steady::{Finished, SteadyLoad, until_mid_run};
use super::{Options, Report, millis_cell};
use crate::now_ms;
use crate::triggers::{Placed, read_placed_records};

/// Fires due this close to the thaw may still be running when it comes: left out of the
/// "done before the thaw" count.
pub const THAW_MARGIN: Duration = Duration::from_secs(2);

/// The executor frozen, and the one that stays.
const FROZEN: usize = 0;
const SURVIVOR: usize = 1;

/// What happened around the freeze, as the executors' `owns` lines tell it.
struct Freeze {
    /// Whether both executors owned partitions, every partition between them, before it.
    shared_before: bool,
    /// The partitions the frozen executor owned when frozen.
    frozen_owned: BTreeSet<i32>,
    /// When it began and ended (ms).
    from_ms: i64,
    thaw_ms: i64,
    /// From the freeze until the survivor owned every partition (Kafka only).
    handed_over_after_ms: Option<i64>,
}

/// Runs the scenario on `brokers` (whose group coordinator is `coordinator`'s).
pub async fn run(brokers: String, options: Options, coordinator: Coordinator) -> Report {
    let scenario = match coordinator {
        Coordinator::Tansu => "executor-hang",
        Coordinator::Kafka { .. } => "kafka-executor-hang",
    };
    let protocol = coordinator.group_protocol();
    let load = SteadyLoad::start(
        (&brokers, coordinator.broker_kind()),
        &options,
        protocol,
        coordinator.route(),
    )
    .await;
    let freeze = freeze_and_thaw(&load, &options, &coordinator).await;
    tokio::time::sleep(options.after).await;
    let finished = load.finish().await;
    let mut columns = finished.columns();
    let mut failures: Vec<String> = coordinator
        .protocol_failure(&load.group())
        .into_iter()
        .collect();
    if let Coordinator::Kafka { .. } = coordinator {
        let (done, due) = done_before_thaw(&load, &finished, &freeze).await;
        columns.push((
            "handed over after",
            millis_cell(freeze.handed_over_after_ms),
        ));
        columns.push((
            "frozen one's fires done before the thaw",
            format!("{done} of {due}"),
        ));
        failures.extend(handover_failures(&freeze, done, due, &options));
    }
    columns.push(finished.recovery_column(freeze.from_ms..freeze.thaw_ms));
    let mut details = finished.details(&load).await;
    details.push(format!(
        "the frozen executor owned partitions {:?} when frozen",
        freeze.frozen_owned
    ));
    Report {
        scenario,
        injected: format!(
            "one of two executors frozen with SIGSTOP for {} s (no heartbeats or beats, runs \
             stuck half-way; session timeout 6 s), then SIGCONT, during {} jobs firing every \
             second (runs of 300 ms)",
            options.outage.as_secs(),
            options.jobs
        ),
        columns,
        lost: finished.outcome.lost(),
        failures,
        details,
    }
    .keeping_logs_on_failure(&load.stack.log_files())
}

/// Waits out the load's `before`, freezes the executor for `outage` and thaws it; on Kafka
/// watches the survivor take the partitions over meanwhile.
async fn freeze_and_thaw(
    load: &SteadyLoad,
    options: &Options,
    coordinator: &Coordinator,
) -> Freeze {
    let started = tokio::time::Instant::now();
    let logs = &load.stack.logs;
    let shared_before = shared_within(
        &[logs[FROZEN].as_path(), logs[SURVIVOR].as_path()],
        options.before,
    )
    .await;
    tokio::time::sleep_until(started + options.before).await;
    until_mid_run().await;
    let survivor_seen = log_length(&logs[SURVIVOR]);
    let frozen_owned = owned(&logs[FROZEN], 0);
    let pid = load.stack.executor_pid(FROZEN);
    signal(pid, "STOP");
    let from_ms = now_ms();
    let thaw_at = tokio::time::Instant::now() + options.outage;
    eprintln!(
        "{} group: executor {FROZEN} (partitions {frozen_owned:?}) frozen for {:?}",
        coordinator.group_protocol().name(),
        options.outage
    );
    let handed_over_after_ms = match coordinator {
        Coordinator::Tansu => None,
        Coordinator::Kafka { .. } => {
            owns_all_within(&logs[SURVIVOR], survivor_seen, options.outage)
                .await
                .map(|at_ms| at_ms - from_ms)
        }
    };
    tokio::time::sleep_until(thaw_at).await;
    signal(pid, "CONT");
    Freeze {
        shared_before,
        frozen_owned,
        from_ms,
        thaw_ms: now_ms(),
        handed_over_after_ms,
    }
}

/// Of the fires due on the frozen executor's partitions from the freeze until
/// [`THAW_MARGIN`] before the thaw: how many the survivor finished before the thaw, and how
/// many there were.
async fn done_before_thaw(
    load: &SteadyLoad,
    finished: &Finished,
    freeze: &Freeze,
) -> (usize, usize) {
    let placed: Vec<Placed<TriggerRecord>> =
        read_placed_records(&load.brokers, &load.trigger_topic(), PARTITIONS).await;
    let margin = i64::try_from(THAW_MARGIN.as_millis()).unwrap_or(0);
    let window = freeze.from_ms..freeze.thaw_ms - margin;
    let due: HashSet<&str> = (placed.iter())
        .filter(|placed| freeze.frozen_owned.contains(&placed.partition))
        .filter(|placed| window.contains(&placed.record.scheduled_at_ms))
        .map(|placed| placed.record.trigger_id.as_str())
        .collect();
    let survivor = format!("faults-executor-{SURVIVOR}");
    let first = finished.first_successes();
    let done = (due.iter())
        .filter(|id| {
            first.get(*id).is_some_and(|result| {
                result.finished_at_ms < freeze.thaw_ms && result.executor_id == survivor
            })
        })
        .count();
    (done, due.len())
}

/// What fails the scenario on Kafka: no group to hand over from, no handover, or fires that
/// waited for the thaw.
fn handover_failures(freeze: &Freeze, done: usize, due: usize, options: &Options) -> Vec<String> {
    let mut failures = Vec::new();
    if !freeze.shared_before {
        failures.push(format!(
            "the two executors did not share the partitions within {} s, before the freeze",
            options.before.as_secs()
        ));
    }
    if freeze.handed_over_after_ms.is_none() {
        failures.push(format!(
            "no handover: the surviving executor never owned every partition during the {} s \
             freeze",
            options.outage.as_secs()
        ));
    }
    if due == 0 {
        failures.push(
            "no fire was due on the frozen executor's partitions during the freeze".to_owned(),
        );
    } else if done < due {
        failures.push(format!(
            "{} of the {due} fires due on the frozen executor's partitions during the freeze \
             were not finished by the survivor before the thaw",
            due - done
        ));
    }
    failures
}
