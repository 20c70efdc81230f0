//! The follow-up monitor's step on both backends, with an injected clock: retries with
//! backoff linked to the first attempt, one alarm per failed attempt, child jobs on success
//! only (and once per fire for ALL_SHARDS), each run followed up once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kadence_scheduler::config::MonitorConfig;
use kadence_scheduler::config::RetentionConfig;
use kadence_scheduler::domain::model::{
    AlarmStatus, ChildTriggerMode, Completion, Job, NewJob, PendingFire, RetryBackoff, RetryPolicy,
    RouteStrategy, Run,
};
use kadence_scheduler::domain::schedule::{MisfireStrategy, ScheduleSpec};
use kadence_scheduler::engine::intake::FireIntake;
use kadence_scheduler::monitors::alarm::{Alarm, AlarmChannel, AlarmError, Alarms};
use kadence_scheduler::monitors::follow_up::{FollowUp, FollowUpSummary};
use kadence_scheduler::monitors::reports::{DAY_MS, day_of, refresh_reports_once};
use kadence_scheduler::monitors::retention::{RetentionSummary, apply_retention_once};
use kadence_scheduler::store::{LogLines, NewFire, PageRequest, Store};
use kadence_schemas::{TriggerId, TriggerType};
use tokio::sync::mpsc;

use super::{T0, demo_app, every_second_job, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

/// How long an alarm's delivery may take, in these tests.
const ALARM_TIMEOUT: Duration = Duration::from_secs(10);

/// Records the alarms of jobs that have a webhook set.
struct Recorder(Arc<Mutex<Vec<Alarm>>>);

#[async_trait::async_trait]
impl AlarmChannel for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn wants(&self, job: &Job) -> bool {
        job.spec.alarm_webhook.is_some()
    }
    async fn send(&self, _job: &Job, alarm: &Alarm) -> Result<(), AlarmError> {
        self.0.lock().unwrap().push(alarm.clone());
        Ok(())
    }
}

pub(super) struct Harness {
    pub(super) store: Arc<dyn Store>,
    pub(super) monitor: FollowUp,
    pub(super) fires: mpsc::Receiver<PendingFire>,
    alarms: Arc<Mutex<Vec<Alarm>>>,
}

pub(super) async fn harness(db: &TestDatabase) -> Harness {
    let alarms = Arc::new(Mutex::new(Vec::new()));
    let recorder = Alarms::new(vec![Box::new(Recorder(Arc::clone(&alarms)))], ALARM_TIMEOUT);
    let mut harness = harness_alarming(db, recorder).await;
    harness.alarms = alarms;
    harness
}

/// A harness whose monitor sends alarms on `alarms`.
async fn harness_alarming(db: &TestDatabase, alarms: Alarms) -> Harness {
    let store = store_on(db).await;
    store.create_app(&demo_app()).await.unwrap();
    let (wheel, fires) = mpsc::channel(100);
    let monitor = FollowUp::new(
        Arc::clone(&store),
        Arc::new(alarms),
        FireIntake::new(
            Arc::clone(&store),
            wheel,
            "node-m".to_owned(),
            Duration::from_secs(10),
        ),
        MonitorConfig::default(),
    );
    Harness {
        store,
        monitor,
        fires,
        alarms: Arc::default(),
    }
}

pub(super) fn manual_job() -> NewJob {
    NewJob {
        schedule: ScheduleSpec::None,
        ..every_second_job(MisfireStrategy::DoNothing)
    }
}

pub(super) async fn trigger(store: &dyn Store, job: &Job, at_ms: i64) -> Vec<PendingFire> {
    store
        .insert_fire(
            job,
            &NewFire {
                trigger_id: TriggerId::fresh(job.id),
                trigger_type: TriggerType::Manual,
                params: "p".to_owned(),
                scheduled_at_ms: at_ms,
                node_id: "node-a".to_owned(),
                lease_until_ms: at_ms + 1_000,
                partitions: None,
            },
        )
        .await
        .unwrap()
}

pub(super) async fn complete(
    store: &dyn Store,
    trigger_id: &TriggerId,
    code: i32,
    at_ms: i64,
    retry_after_ms: Option<i64>,
) {
    store
        .complete_runs(&[Completion {
            app: None,
            trigger_id: trigger_id.clone(),
            executor_id: "exec-1".to_owned(),
            code,
            message: Some(format!("code {code}")),
            started_at_ms: at_ms - 1,
            finished_at_ms: at_ms,
            retry_after_ms,
        }])
        .await
        .unwrap();
}

fn run_of<'a>(runs: &'a [Run], trigger_id: &TriggerId) -> &'a Run {
    runs.iter()
        .find(|run| &run.trigger_id == trigger_id)
        .unwrap()
}

/// A failed run with retries left is re-fired as RETRY after its backoff (or the handler's
/// longer "retry after"), linked to the first attempt; each failed attempt alarms once.
async fn failed_runs_are_retried_with_backoff_and_alarmed_once_each(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let mut h = harness(&db).await;
    let spec = NewJob {
        retry: RetryPolicy {
            count: 2,
            backoff: RetryBackoff::Fixed { delay_ms: 5_000 },
        },
        alarm_webhook: Some("http://alarms.example/hook".to_owned()),
        ..manual_job()
    };
    let job = h.store.create_job(&spec, T0).await.unwrap();
    let first = trigger(h.store.as_ref(), &job, T0).await.remove(0);
    complete(h.store.as_ref(), &first.trigger_id, 500, T0 + 2, None).await;

    let summary = h.monitor.follow_up_once(T0 + 10).await.unwrap();
    assert_eq!(
        summary,
        FollowUpSummary {
            runs: 1,
            retries: 1,
            children: 0,
            alarms_sent: 1,
            alarms_failed: 0
        }
    );
    let retry = h.fires.try_recv().expect("the retry goes to the wheel");
    assert_eq!(retry.trigger_id, first.trigger_id.retry(1));
    assert_eq!(
        (
            retry.trigger_type,
            retry.attempt,
            retry.scheduled_at_ms,
            retry.params.as_str()
        ),
        (TriggerType::Retry, 1, T0 + 10 + 5_000, "p")
    );
    // Followed up once: the next step finds nothing.
    assert_eq!(h.monitor.follow_up_once(T0 + 20).await.unwrap().runs, 0);

    // The retry fails and asks for 9 s, longer than the backoff.
    complete(
        h.store.as_ref(),
        &retry.trigger_id,
        502,
        T0 + 6_000,
        Some(9_000),
    )
    .await;
    h.monitor.follow_up_once(T0 + 6_000).await.unwrap();
    let second = h.fires.try_recv().unwrap();
    assert_eq!(
        (
            second.trigger_id.clone(),
            second.attempt,
            second.scheduled_at_ms
        ),
        (first.trigger_id.retry(2), 2, T0 + 15_000)
    );
    // The last retry succeeds: no more retries, no alarm; a success of a job without
    // children is done as it is recorded, with nothing left to follow up.
    complete(h.store.as_ref(), &second.trigger_id, 200, T0 + 16_000, None).await;
    let summary = h.monitor.follow_up_once(T0 + 16_000).await.unwrap();
    assert_eq!(
        (summary.runs, summary.retries, summary.alarms_sent),
        (0, 0, 0)
    );

    let runs = h
        .store
        .list_runs(job.id, &PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(runs.len(), 3);
    let linked: Vec<(i32, Option<i64>, AlarmStatus)> =
        [&first.trigger_id, &retry.trigger_id, &second.trigger_id]
            .iter()
            .map(|id| {
                let run = run_of(&runs, id);
                (run.attempt, run.first_log_id, run.alarm_status)
            })
            .collect();
    assert_eq!(
        linked,
        vec![
            (0, None, AlarmStatus::Sent),
            (1, Some(first.log_id), AlarmStatus::Sent),
            (2, Some(first.log_id), AlarmStatus::NotNeeded),
        ]
    );
    let alarms = h.alarms.lock().unwrap().clone();
    let told: Vec<(i32, i64, i32)> = alarms
        .iter()
        .map(|a| (a.attempt, a.retries_left, a.code))
        .collect();
    assert_eq!(told, vec![(0, 2, 500), (1, 1, 502)]);
    assert!(
        alarms
            .iter()
            .all(|a| a.first_log_id == first.log_id && a.job_id == job.id.get())
    );
}

/// Child jobs fire as PARENT after a success only; a sharded parent with ALL_SHARDS fires
/// them once, when its last shard succeeded (here on a retry).
async fn children_fire_on_success_only_and_once_per_fire_for_all_shards(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let mut h = harness(&db).await;
    let child = h.store.create_job(&manual_job(), T0).await.unwrap();
    let parent_spec = NewJob {
        child_job_ids: vec![child.id],
        ..manual_job()
    };
    let parent = h.store.create_job(&parent_spec, T0).await.unwrap();
    let failed = trigger(h.store.as_ref(), &parent, T0).await.remove(0);
    complete(h.store.as_ref(), &failed.trigger_id, 500, T0 + 1, None).await;
    assert_eq!(h.monitor.follow_up_once(T0 + 2).await.unwrap().children, 0);
    let succeeded = trigger(h.store.as_ref(), &parent, T0).await.remove(0);
    complete(h.store.as_ref(), &succeeded.trigger_id, 200, T0 + 3, None).await;
    assert_eq!(h.monitor.follow_up_once(T0 + 4).await.unwrap().children, 1);
    let fired = h.fires.try_recv().unwrap();
    assert_eq!(fired.job_id, child.id);
    assert_eq!(fired.trigger_type, TriggerType::Parent);
    assert_eq!(
        fired.trigger_id.as_str(),
        format!("{}-p{}", child.id, succeeded.log_id)
    );

    let broadcast_spec = NewJob {
        route_strategy: RouteStrategy::ShardingBroadcast,
        child_trigger_mode: ChildTriggerMode::AllShards,
        retry: RetryPolicy {
            count: 1,
            backoff: RetryBackoff::None,
        },
        child_job_ids: vec![child.id],
        ..manual_job()
    };
    let broadcast = h.store.create_job(&broadcast_spec, T0).await.unwrap();
    let shards = trigger(h.store.as_ref(), &broadcast, T0).await;
    assert_eq!(shards.len(), 3);
    complete(h.store.as_ref(), &shards[0].trigger_id, 200, T0 + 5, None).await;
    complete(h.store.as_ref(), &shards[1].trigger_id, 200, T0 + 5, None).await;
    complete(h.store.as_ref(), &shards[2].trigger_id, 500, T0 + 5, None).await;
    let summary = h.monitor.follow_up_once(T0 + 6).await.unwrap();
    assert_eq!((summary.runs, summary.children, summary.retries), (3, 0, 1));
    let retry = h.fires.try_recv().unwrap();
    assert_eq!(
        (
            retry.shard_index,
            retry.shard_total,
            retry.route_partitions.clone()
        ),
        (2, 3, Some(vec![2])),
        "a retry re-fires only the failed shard"
    );
    complete(h.store.as_ref(), &retry.trigger_id, 200, T0 + 7, None).await;
    assert_eq!(h.monitor.follow_up_once(T0 + 8).await.unwrap().children, 1);
    let joined = h.fires.try_recv().unwrap();
    let fire_id = shards[0]
        .trigger_id
        .as_str()
        .rsplit_once('-')
        .unwrap()
        .0
        .to_owned();
    assert_eq!(
        joined.trigger_id.as_str(),
        format!("{}-p{fire_id}", child.id)
    );
    assert!(
        h.fires.try_recv().is_err(),
        "the children fired once for the whole fire"
    );
}

/// Two monitors stepping at once (two scheduler nodes) follow each run up once.
async fn each_finished_run_is_followed_up_once_across_nodes(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let h = harness(&db).await;
    let (wheel, _fires) = mpsc::channel(1_000);
    let other = FollowUp::new(
        Arc::clone(&h.store),
        Arc::new(Alarms::new(
            vec![Box::new(Recorder(Arc::clone(&h.alarms)))],
            ALARM_TIMEOUT,
        )),
        FireIntake::new(
            Arc::clone(&h.store),
            wheel,
            "node-n".to_owned(),
            Duration::from_secs(10),
        ),
        MonitorConfig::default(),
    );
    let spec = NewJob {
        alarm_webhook: Some("http://alarms.example/hook".to_owned()),
        ..manual_job()
    };
    let job = h.store.create_job(&spec, T0).await.unwrap();
    for n in 0..40 {
        let fire = trigger(h.store.as_ref(), &job, T0 + n).await.remove(0);
        complete(h.store.as_ref(), &fire.trigger_id, 500, T0 + 100, None).await;
    }
    let (a, b) = tokio::join!(
        h.monitor.follow_up_once(T0 + 200),
        other.follow_up_once(T0 + 200)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let rest = h.monitor.follow_up_once(T0 + 300).await.unwrap();
    assert_eq!(a.runs + b.runs + rest.runs, 40);
    assert_eq!(
        h.alarms.lock().unwrap().len(),
        40,
        "one alarm per failed run"
    );
}

/// Fails the alarms of jobs that have a webhook set once `barrier`'s count of them are being
/// sent at the same time, and counts in `passed` those that got that far: alarms delivered
/// one after the other would each wait there until their time ran out.
struct Rendezvous {
    barrier: Arc<tokio::sync::Barrier>,
    passed: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl AlarmChannel for Rendezvous {
    fn name(&self) -> &'static str {
        "rendezvous"
    }
    fn wants(&self, job: &Job) -> bool {
        job.spec.alarm_webhook.is_some()
    }
    async fn send(&self, _job: &Job, _alarm: &Alarm) -> Result<(), AlarmError> {
        // Bounded, so that a monitor without a deadline of its own fails here, not hangs.
        let alone = tokio::time::timeout(Duration::from_secs(5), self.barrier.wait()).await;
        if alone.is_ok() {
            self.passed.fetch_add(1, Ordering::SeqCst);
        }
        Err(AlarmError::NotConfigured("the receiver is down".to_owned()))
    }
}

/// A step's failed alarms are delivered side by side (one failure's wait holds up no other),
/// and none is written FAILED before the delivery's time is up, though each failed at once.
async fn failed_alarms_are_delivered_side_by_side_and_shown_when_their_time_is_up(
    backend: Backend,
) {
    const RUNS: usize = 3;
    const TIMEOUT: Duration = Duration::from_secs(2);
    let passed = Arc::new(AtomicUsize::new(0));
    let channel = Rendezvous {
        barrier: Arc::new(tokio::sync::Barrier::new(RUNS)),
        passed: Arc::clone(&passed),
    };
    let db = TestDatabase::create(backend).await;
    let alarms = Alarms::new(vec![Box::new(channel)], TIMEOUT);
    let h = harness_alarming(&db, alarms).await;
    let spec = NewJob {
        alarm_webhook: Some("http://alarms.example/hook".to_owned()),
        ..manual_job()
    };
    let job = h.store.create_job(&spec, T0).await.unwrap();
    for n in 0..RUNS as i64 {
        let fire = trigger(h.store.as_ref(), &job, T0 + n).await.remove(0);
        complete(h.store.as_ref(), &fire.trigger_id, 500, T0 + 100, None).await;
    }

    let began = std::time::Instant::now();
    let summary = h.monitor.follow_up_once(T0 + 200).await.unwrap();
    let took = began.elapsed();
    assert_eq!((summary.runs, summary.alarms_failed), (RUNS, RUNS));
    assert_eq!(
        passed.load(Ordering::SeqCst),
        RUNS,
        "every alarm was being sent while the others were"
    );
    assert!(
        took >= TIMEOUT,
        "FAILED written after {took:?}, before {TIMEOUT:?}"
    );
    let runs = h
        .store
        .list_runs(job.id, &PageRequest::first(10))
        .await
        .unwrap();
    assert!(
        runs.iter()
            .all(|run| run.alarm_status == AlarmStatus::Failed),
        "{runs:?}"
    );
}

/// Reports count each day's runs per job; retention deletes finished runs (with their log
/// lines) and reports past the retention, in batches, and never an unfinished run.
async fn reports_count_days_and_retention_deletes_old_rows_in_batches(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let h = harness(&db).await;
    let job = h.store.create_job(&manual_job(), T0).await.unwrap();
    let old = T0 - 40 * DAY_MS;
    let mut fires = Vec::new();
    for at in [T0, T0 + 1, T0 + 2, old, old + 1, old + 2] {
        fires.push(trigger(h.store.as_ref(), &job, at).await.remove(0));
    }
    complete(h.store.as_ref(), &fires[0].trigger_id, 200, T0 + 10, None).await;
    complete(h.store.as_ref(), &fires[1].trigger_id, 500, T0 + 10, None).await;
    complete(h.store.as_ref(), &fires[3].trigger_id, 200, old + 10, None).await;
    complete(h.store.as_ref(), &fires[4].trigger_id, 502, old + 10, None).await;
    h.store
        .append_log_lines(
            &[LogLines {
                log_id: fires[3].log_id,
                run_started_at_ms: T0,
                first_line: 1,
                lines: vec!["old".into()],
            }],
            100,
        )
        .await
        .unwrap();

    refresh_reports_once(h.store.as_ref(), T0 + 3_600_000)
        .await
        .unwrap();
    h.store
        .refresh_reports(day_of(old), day_of(old) + DAY_MS)
        .await
        .unwrap();
    let reports = h
        .store
        .list_reports(day_of(old), T0 + DAY_MS, None, &PageRequest::first(1000))
        .await
        .unwrap();
    let counts: Vec<(i64, i64, i64, i64)> = reports
        .iter()
        .map(|r| (r.day_ms, r.running, r.succeeded, r.failed))
        .collect();
    assert_eq!(counts, vec![(day_of(old), 1, 1, 1), (day_of(T0), 1, 1, 1)]);

    for at_ms in [old, T0] {
        let entry = kadence_scheduler::domain::model::NewAuditEntry {
            at_ms,
            user_id: None,
            user_name: "admin".into(),
            action: "POST /api/jobs".into(),
            target: "/api/jobs".into(),
            app: None,
            status: 201,
            details: None,
        };
        h.store.record_audit(&entry).await.unwrap();
    }
    let config = RetentionConfig {
        days: 30,
        batch_size: 1,
        max_batches: 10,
        ..RetentionConfig::default()
    };
    let summary = apply_retention_once(h.store.as_ref(), &config, T0 + 3_600_000)
        .await
        .unwrap();
    assert_eq!(
        summary,
        RetentionSummary {
            runs: 2,
            reports: 1,
            audit_entries: 1,
            shadow_results: 0,
        }
    );
    let left: Vec<TriggerId> = h
        .store
        .list_runs(job.id, &PageRequest::first(10))
        .await
        .unwrap()
        .into_iter()
        .map(|run| run.trigger_id)
        .collect();
    assert_eq!(left.len(), 4, "recent runs and the unfinished old one stay");
    assert!(left.contains(&fires[5].trigger_id));
    assert!(
        h.store
            .read_log_lines(fires[3].log_id, 1, 10)
            .await
            .unwrap()
            .lines
            .is_empty()
    );
    let reports = h
        .store
        .list_reports(day_of(old), T0 + DAY_MS, None, &PageRequest::first(1000))
        .await
        .unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        apply_retention_once(h.store.as_ref(), &config, T0 + 3_600_000)
            .await
            .unwrap(),
        RetentionSummary::default()
    );
}

on_every_backend!(
    reports_count_days_and_retention_deletes_old_rows_in_batches,
    failed_runs_are_retried_with_backoff_and_alarmed_once_each,
    children_fire_on_success_only_and_once_per_fire_for_all_shards,
    each_finished_run_is_followed_up_once_across_nodes,
    failed_alarms_are_delivered_side_by_side_and_shown_when_their_time_is_up,
);
