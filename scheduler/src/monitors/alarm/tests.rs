//! When [`Alarms::send`] answers, under tokio's paused clock: a failure no sooner than the
//! delivery's time is up, however it failed; a success at once; channels side by side.

use kadence_schemas::{AppName, JobId};
use tokio::time::Instant;

use super::*;
use crate::domain::model::{JobStatus, NewJob};
use crate::domain::schedule::ScheduleSpec;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A channel that answers after `after` (never, with `None`): an HTTP 500 if it `fails`.
struct Scripted {
    name: &'static str,
    after: Option<Duration>,
    fails: bool,
}

impl Scripted {
    fn new(name: &'static str, after: Option<Duration>, fails: bool) -> Box<Scripted> {
        Box::new(Scripted { name, after, fails })
    }
}

#[async_trait::async_trait]
impl AlarmChannel for Scripted {
    fn name(&self) -> &'static str {
        self.name
    }

    fn wants(&self, _job: &Job) -> bool {
        true
    }

    async fn send(&self, _job: &Job, _alarm: &Alarm) -> Result<(), AlarmError> {
        match self.after {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
        if self.fails {
            Err(AlarmError::WebhookStatus(
                reqwest::StatusCode::INTERNAL_SERVER_ERROR,
            ))
        } else {
            Ok(())
        }
    }
}

fn job() -> Job {
    let app = AppName::parse("billing").unwrap();
    Job {
        id: JobId::new(7).unwrap(),
        spec: NewJob::new(app, "nightly export", ScheduleSpec::None, "export"),
        status: JobStatus::Stopped,
        last_fire_ms: None,
        next_fire_ms: None,
        created_at_ms: 0,
        updated_at_ms: 0,
        glue_updated_at_ms: None,
    }
}

fn alarm() -> Alarm {
    Alarm {
        kind: "run_failed".to_owned(),
        job_id: 7,
        job_name: "nightly export".to_owned(),
        app: "billing".to_owned(),
        author: String::new(),
        trigger_id: "7-1000".to_owned(),
        log_id: 1,
        first_log_id: 1,
        attempt: 0,
        retries_left: 0,
        trigger_type: "MANUAL".to_owned(),
        scheduled_at: rfc3339(1_000),
        finished_at: None,
        code: 500,
        message: None,
        executor_id: None,
    }
}

/// How long `alarms.send` took (on the paused clock) and what it answered.
async fn timed(alarms: &Alarms) -> (Duration, AlarmDelivery) {
    let began = Instant::now();
    let delivery = alarms.send(&job(), &alarm()).await;
    (began.elapsed(), delivery)
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_answered_when_the_time_is_up_however_soon_it_failed() {
    for after in [
        Duration::ZERO,
        Duration::from_millis(30),
        Duration::from_secs(9),
    ] {
        let alarms = Alarms::new(vec![Scripted::new("webhook", Some(after), true)], TIMEOUT);
        let (took, delivery) = timed(&alarms).await;
        assert_eq!(delivery.status, AlarmStatus::Failed);
        assert_eq!(took, TIMEOUT, "failed after {after:?}");
    }
    let silent = Alarms::new(vec![Scripted::new("webhook", None, false)], TIMEOUT);
    let (took, delivery) = timed(&silent).await;
    assert_eq!((took, delivery.status), (TIMEOUT, AlarmStatus::Failed));
    assert!(
        matches!(delivery.outcomes[..], [("webhook", Err(AlarmError::TimedOut(t)))] if t == TIMEOUT),
        "{delivery:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_success_is_answered_at_once_and_no_target_needs_nothing() {
    let quick = Duration::from_millis(40);
    let alarms = Alarms::new(vec![Scripted::new("webhook", Some(quick), false)], TIMEOUT);
    let (took, delivery) = timed(&alarms).await;
    assert_eq!((took, delivery.status), (quick, AlarmStatus::Sent));

    let none = Alarms::new(Vec::new(), TIMEOUT);
    let (took, delivery) = timed(&none).await;
    assert_eq!(
        (took, delivery.status),
        (Duration::ZERO, AlarmStatus::NotNeeded)
    );
}

#[tokio::test(start_paused = true)]
async fn channels_are_tried_side_by_side_within_one_timeout() {
    // 8 s each: one after the other, the webhook would be cut off at 10 s before it answered.
    let email = Scripted::new("email", Some(Duration::from_secs(8)), false);
    let webhook = Scripted::new("webhook", Some(Duration::from_secs(8)), true);
    let alarms = Alarms::new(vec![email, webhook], TIMEOUT);
    let (took, delivery) = timed(&alarms).await;
    assert_eq!((took, delivery.status), (TIMEOUT, AlarmStatus::Failed));
    assert!(
        matches!(
            delivery.outcomes[..],
            [
                ("email", Ok(())),
                ("webhook", Err(AlarmError::WebhookStatus(_)))
            ]
        ),
        "{delivery:?}"
    );
}
