//! A trigger's way through the bridge: the handler the executor SDK runs for every trigger
//! (BEAN of any handler name, and GLUE_* when scripts are switched on) hands it to a legacy
//! executor and turns what comes back into the run's log and result.
//!
//! 1. **Where.** A trigger from partition `p` goes to the live executor the bridge assigned
//!    `p` to (`legacy::split`): the scheduler's routing strategy chose `p`. A FAILOVER or
//!    BUSYOVER trigger (its `kadence.route` header says so) is then chosen again as XXL-JOB
//!    chooses at the moment of the trigger: the first executor, in address order, that
//!    answers `beat`, or reports the job idle on `idleBeat`. With no live
//!    executor the trigger waits, as it would in its partition with no Kadence executor (its
//!    timeout, a KILL or the drain still end it); an executor that cannot be reached at all
//!    leaves routing and the next one is tried, since the run did not start.
//!    A broadcast shard goes to the executors XXL-JOB would give that shard: executor `i` of
//!    the `E` live ones (address order) runs shard `i` of `E`, and Kadence's shard `k` of `N`
//!    (one per partition) carries the executors with `i mod N = k`. So every executor runs
//!    once, with XXL-JOB's index and total; a shard with no executor (more partitions than
//!    executors) ends at once, saying so in its log.
//! 2. **Hand over.** `run` with the TriggerParam the trigger implies (`trigger_param`), the
//!    log id of `runs::xxl_log_id`, waiting for its callback first so a quick run's callback
//!    cannot come before the wait.
//! 3. **Follow.** Every poll interval the run's new log lines (`log` from the next line) go to
//!    the run's Kadence log. The callback ends it: its last lines, then the result (200
//!    success, anything else a failure with the executor's message). An executor that answers
//!    nothing for `lost_after` lost the run: it fails saying so (XXL-JOB's lost-run result,
//!    sooner), and the job's retries take it from there.
//! 4. **Stop.** A timeout, a KILL, COVER_EARLY, a hand-back or the drain deadline drops the
//!    handler; dropping a run still handed over sends `kill` for its job to its executor, as
//!    XXL-JOB's kill and timeout do.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kadence_executor::{JobContext, JobError, JobResult, OwnedPartitions};
use kadence_schemas::{BlockStrategy, GlueType, TriggerRecord};
use tokio::sync::oneshot;

use crate::client::{CallError, ExecutorClient};
use crate::legacy::{Address, LegacyExecutors, split};
use crate::runs::{Callback, PendingRuns, xxl_log_id};
use crate::wire::{LogParam, SUCCESS, TriggerParam};

/// How the forwarder follows runs.
#[derive(Debug, Clone, Copy)]
pub struct FollowSettings {
    /// How often a running run's new log lines are fetched.
    pub log_poll: Duration,
    /// How long an executor may answer nothing before its run counts as lost.
    pub lost_after: Duration,
}

/// Hands triggers to legacy executors (see the module docs).
pub struct Forwarder {
    pub(crate) legacy: Arc<LegacyExecutors>,
    pub(crate) runs: Arc<PendingRuns>,
    pub(crate) client: ExecutorClient,
    /// The bridge's partitions, known once its executor is built.
    pub(crate) partitions: Arc<OnceLock<OwnedPartitions>>,
    pub(crate) follow: FollowSettings,
}

/// One shard of a broadcast as XXL-JOB numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct XxlShard {
    index: i32,
    total: i32,
}

const NOT_BROADCAST: XxlShard = XxlShard { index: 0, total: 1 };

/// A run handed to a legacy executor and not yet called back.
struct HandedOver {
    address: Address,
    xxl_log_id: i64,
    log_date_time: i64,
    callback: oneshot::Receiver<Callback>,
    /// Kills the run if the handler is dropped before it ends.
    guard: KillOnDrop,
}

impl Forwarder {
    /// The handler: runs `ctx`'s trigger on a legacy executor.
    pub async fn forward(self: Arc<Self>, ctx: JobContext) -> JobResult {
        let job_id = i32::try_from(ctx.job_id().get()).map_err(|_| {
            JobError::new(format!(
                "job {} cannot run on an XXL-JOB executor, whose job ids are 32-bit",
                ctx.job_id()
            ))
        })?;
        if ctx.shard_total() > 1 {
            return self.broadcast(&ctx, job_id).await;
        }
        loop {
            let owner = self.wait_for_owner(&ctx).await;
            let address = match ctx.route_strategy() {
                Some(strategy) => self.probe(&ctx, strategy, job_id, owner).await,
                None => owner,
            };
            match self
                .hand_over(&ctx, &address, job_id, NOT_BROADCAST, 0)
                .await
            {
                Ok(run) => return self.follow(&ctx, run).await,
                Err(Refusal::Unreachable(error)) => {
                    ctx.log(format!("[bridge] {error}; trying another executor"));
                    self.legacy.answered(&address, false);
                }
                Err(Refusal::Refused(message)) => return Err(JobError::new(message)),
            }
        }
    }

    /// A broadcast shard: its XXL-JOB shards, each on its executor, all followed together.
    async fn broadcast(&self, ctx: &JobContext, job_id: i32) -> JobResult {
        let live = self.legacy.live(now_ms());
        let (shard, shards) = (ctx.shard_index() as usize, ctx.shard_total() as usize);
        let total = i32::try_from(live.len()).unwrap_or(i32::MAX);
        let mine: Vec<(usize, &Address)> = (live.iter().enumerate())
            .filter(|(index, _)| index % shards == shard)
            .collect();
        if mine.is_empty() {
            ctx.log(format!(
                "[bridge] no XXL-JOB executor takes shard {shard} of {shards}: {} are live, and \
                 XXL-JOB runs a broadcast once on each",
                live.len()
            ));
            return Ok(());
        }
        let runs = mine
            .into_iter()
            .enumerate()
            .map(|(fan_out, (index, address))| {
                let xxl = XxlShard {
                    index: i32::try_from(index).unwrap_or(i32::MAX),
                    total,
                };
                let fan_out = u16::try_from(fan_out).unwrap_or(u16::MAX);
                async move {
                    match self.hand_over(ctx, address, job_id, xxl, fan_out).await {
                        Ok(run) => self.follow(ctx, run).await,
                        Err(refusal) => Err(JobError::new(refusal.to_string())),
                    }
                }
            });
        let outcomes = futures::future::join_all(runs).await;
        let failures: Vec<String> = (outcomes.into_iter())
            .filter_map(|outcome| outcome.err().map(|error| error.message().to_owned()))
            .collect();
        match failures.is_empty() {
            true => Ok(()),
            false => Err(JobError::new(failures.join("; "))),
        }
    }

    /// XXL-JOB's FAILOVER and BUSYOVER at the moment of the hand-over: the first live
    /// executor, in address order, whose `beat` (FAILOVER) or `idleBeat` for the job
    /// (BUSYOVER) answers with success; `owner`, the partition's executor, when none does
    /// (all busy: the run queues there under its block strategy, where XXL-JOB would fail
    /// the trigger).
    async fn probe(
        &self,
        ctx: &JobContext,
        strategy: &str,
        job_id: i32,
        owner: Address,
    ) -> Address {
        for address in self.legacy.live(now_ms()) {
            let answer = match strategy {
                "BUSYOVER" => self.client.idle_beat(&address, job_id).await,
                _ => self.client.beat(&address).await,
            };
            match answer {
                Ok(answer) if answer.is_success() => return address,
                Ok(answer) => ctx.log(format!(
                    "[bridge] {strategy}: {address} answered {}",
                    answer
                        .msg
                        .unwrap_or_else(|| format!("code {}", answer.code))
                )),
                Err(error) => ctx.log(format!("[bridge] {strategy}: {error}")),
            }
        }
        owner
    }

    /// The executor the trigger's partition is assigned to, once there is one.
    async fn wait_for_owner(&self, ctx: &JobContext) -> Address {
        let mut changes = self.legacy.subscribe();
        let mut said = false;
        loop {
            let live = self.legacy.live(now_ms());
            let owned = (self.partitions.get())
                .map(OwnedPartitions::current)
                .unwrap_or_default();
            if let Some(address) = assigned(ctx.partition(), &owned, &live) {
                return address;
            }
            if !said {
                ctx.log(format!(
                    "[bridge] waiting for an XXL-JOB executor of app {} to register",
                    ctx.trigger().app
                ));
                said = true;
            }
            // Registrations wake the wait; the partitions it also depends on change rarely.
            let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
        }
    }

    /// Calls `run` on `address`, waiting for the callback first.
    async fn hand_over(
        &self,
        ctx: &JobContext,
        address: &str,
        job_id: i32,
        shard: XxlShard,
        fan_out: u16,
    ) -> Result<HandedOver, Refusal> {
        let xxl_log_id = xxl_log_id(ctx.log_id(), fan_out);
        // The emission time, not now: a redelivery of the record handed over again names the
        // same log file (the executor files logs by this date) as the first hand-over.
        let log_date_time = ctx.trigger().emitted_at_ms;
        let param = trigger_param(ctx.trigger(), job_id, xxl_log_id, log_date_time, shard);
        let run = HandedOver {
            address: address.to_owned(),
            xxl_log_id,
            log_date_time,
            callback: self.runs.expect(xxl_log_id, address, ctx.job_id().get()),
            guard: KillOnDrop {
                client: self.client.clone(),
                runs: Arc::clone(&self.runs),
                address: address.to_owned(),
                job_id,
                xxl_log_id,
                armed: true,
            },
        };
        let answer = match self.client.run(address, &param).await {
            Ok(answer) => answer,
            Err(error @ CallError::Unreachable { .. }) => {
                run.guard.disarm();
                return Err(Refusal::Unreachable(error));
            }
            // Reached but unanswered: it may run, so it is followed like any other.
            Err(error) => {
                ctx.log(format!(
                    "[bridge] {error}; following the run in case it started"
                ));
                return Ok(run);
            }
        };
        let message = answer.msg.unwrap_or_default();
        if answer.code == SUCCESS {
            let shard_note = match shard == NOT_BROADCAST {
                true => String::new(),
                false => format!(" as shard {} of {}", shard.index, shard.total),
            };
            ctx.log(format!(
                "[bridge] handed to the XXL-JOB executor at {address}{shard_note} (log id \
                 {xxl_log_id})"
            ));
            Ok(run)
        } else if message.starts_with("repeate trigger job") {
            // The same trigger, handed over again (its first bridge died), still queued there
            // under the same log id: that run's callback is the one this run waits for.
            ctx.log(format!(
                "[bridge] the XXL-JOB executor at {address} already holds this run (log id \
                 {xxl_log_id}); following it"
            ));
            Ok(run)
        } else {
            run.guard.disarm();
            Err(Refusal::Refused(format!(
                "the XXL-JOB executor at {address} refused the run: {message}"
            )))
        }
    }

    /// Ships the run's log lines until its callback, or until its executor is lost.
    async fn follow(&self, ctx: &JobContext, mut run: HandedOver) -> JobResult {
        let mut next_line = 1;
        let mut answered_at = Instant::now();
        let mut poll = tokio::time::interval(self.follow.log_poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                callback = &mut run.callback => {
                    let _ = self.ship_lines(ctx, &run, &mut next_line).await;
                    run.guard.disarm();
                    return match callback {
                        Ok(callback) => outcome(&run.address, callback),
                        Err(_) => Err(JobError::new(format!(
                            "the bridge stopped waiting for the run at {} (log id {}): it was \
                             handed over again",
                            run.address, run.xxl_log_id
                        ))),
                    };
                }
                _ = poll.tick() => match self.ship_lines(ctx, &run, &mut next_line).await {
                    Ok(()) => answered_at = Instant::now(),
                    Err(error) if answered_at.elapsed() >= self.follow.lost_after => {
                        self.runs.forget(run.xxl_log_id);
                        run.guard.disarm();
                        return Err(JobError::new(format!(
                            "lost run: the XXL-JOB executor at {} has answered nothing for {} s \
                             while running it ({error})",
                            run.address,
                            self.follow.lost_after.as_secs()
                        )));
                    }
                    Err(_) => {}
                },
            }
        }
    }

    /// Fetches the run's lines from `next_line` on into its Kadence log.
    async fn ship_lines(
        &self,
        ctx: &JobContext,
        run: &HandedOver,
        next_line: &mut i32,
    ) -> Result<(), CallError> {
        let param = LogParam {
            log_date_tim: run.log_date_time,
            log_id: run.xxl_log_id,
            from_line_num: *next_line,
        };
        let answer = self.client.log(&run.address, param).await?;
        let Some(log) = answer.content.filter(|_| answer.code == SUCCESS) else {
            return Ok(());
        };
        // No file yet (the run has not logged) reads as line 0.
        if log.to_line_num < *next_line {
            return Ok(());
        }
        let content = log.log_content.unwrap_or_default();
        for line in content.lines() {
            ctx.log(line);
        }
        *next_line = log.to_line_num + 1;
        Ok(())
    }
}

/// The executor `partition` is assigned to among `live`: its range's owner, or while the
/// bridge's own partitions are changing (the trigger came from a partition the bridge no
/// longer lists) the one it would get by position.
fn assigned(partition: i32, owned: &[i32], live: &[Address]) -> Option<Address> {
    if live.is_empty() {
        return None;
    }
    let owner = split(owned, live)
        .into_iter()
        .find(|(_, partitions)| partitions.contains(&partition));
    let by_position = || live[partition.unsigned_abs() as usize % live.len()].clone();
    Some(owner.map_or_else(by_position, |(address, _)| address))
}

/// Why a run was not handed over.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    /// Nothing answered at the address: the run did not start there.
    #[error(transparent)]
    Unreachable(CallError),
    /// The executor answered `run` with a failure (unknown handler, DISCARD_LATER, …).
    #[error("{0}")]
    Refused(String),
}

/// The result a callback gives.
fn outcome(address: &str, callback: Callback) -> JobResult {
    if callback.code == SUCCESS {
        return Ok(());
    }
    let message = callback.msg.filter(|msg| !msg.trim().is_empty());
    Err(JobError::new(match message {
        Some(message) => message,
        None => format!(
            "the XXL-JOB executor at {address} reported code {} without a message",
            callback.code
        ),
    }))
}

/// The TriggerParam XXL-JOB's admin would send for `trigger`.
fn trigger_param(
    trigger: &TriggerRecord,
    job_id: i32,
    xxl_log_id: i64,
    log_date_time: i64,
    shard: XxlShard,
) -> TriggerParam {
    let (handler, glue_type) = match trigger.glue_type {
        GlueType::Bean => (trigger.handler.clone(), "BEAN".to_owned()),
        script => (String::new(), script.to_string()),
    };
    TriggerParam {
        job_id,
        executor_handler: handler,
        executor_params: trigger.params.clone(),
        executor_block_strategy: block_strategy(trigger.block_strategy).to_owned(),
        // XXL-JOB counts whole seconds; the executor SDK's own timeout ends the run to the
        // millisecond first, and kills it here.
        executor_timeout: i32::try_from(trigger.timeout_ms.max(0).unsigned_abs().div_ceil(1_000))
            .unwrap_or(i32::MAX),
        log_id: xxl_log_id,
        log_date_time,
        glue_type,
        glue_source: trigger.glue_source.clone().unwrap_or_default(),
        glue_updatetime: trigger.glue_updated_at_ms.unwrap_or(0),
        broadcast_index: shard.index,
        broadcast_total: shard.total,
    }
}

/// XXL-JOB's name of a block strategy. CONCURRENT has none: an XXL-JOB executor runs one run
/// of a job at a time, so concurrent runs queue there as SERIAL_EXECUTION.
fn block_strategy(strategy: BlockStrategy) -> &'static str {
    match strategy {
        BlockStrategy::SerialExecution | BlockStrategy::Concurrent => "SERIAL_EXECUTION",
        BlockStrategy::DiscardLater => "DISCARD_LATER",
        BlockStrategy::CoverEarly => "COVER_EARLY",
    }
}

/// Sends `kill` for a run whose handler was dropped before the run ended (timeout, KILL,
/// COVER_EARLY, hand-back, drain deadline), and stops waiting for its callback.
struct KillOnDrop {
    client: ExecutorClient,
    runs: Arc<PendingRuns>,
    address: Address,
    job_id: i32,
    xxl_log_id: i64,
    armed: bool,
}

impl KillOnDrop {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.runs.forget(self.xxl_log_id);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (client, address, job_id) = (self.client.clone(), self.address.clone(), self.job_id);
        runtime.spawn(async move {
            match client.kill(&address, job_id).await {
                Ok(answer) if answer.is_success() => {
                    tracing::info!(%address, job_id, "killed a run on its XXL-JOB executor");
                }
                Ok(answer) => tracing::info!(%address, job_id, msg = ?answer.msg,
                    "the XXL-JOB executor refused to kill a run (it had ended?)"),
                Err(error) => tracing::warn!(%error, job_id, "cannot kill a run"),
            }
        });
    }
}

/// Now, ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use kadence_executor::testing::TestWorker;

    use super::*;

    #[test]
    fn the_trigger_param_is_what_xxl_jobs_admin_sends() {
        let trigger = TestWorker::trigger("demoJobHandler")
            .params("a=1")
            .timeout(Duration::from_millis(2_500))
            .job(42)
            .record();
        let param = trigger_param(&trigger, 42, 9, 1_000, XxlShard { index: 1, total: 3 });
        assert_eq!(
            serde_json::to_value(&param).unwrap(),
            serde_json::json!({
                "jobId": 42, "executorHandler": "demoJobHandler", "executorParams": "a=1",
                "executorBlockStrategy": "SERIAL_EXECUTION", "executorTimeout": 3,
                "logId": 9, "logDateTime": 1000, "glueType": "BEAN", "glueSource": "",
                "glueUpdatetime": 0, "broadcastIndex": 1, "broadcastTotal": 3
            })
        );
        let script = TestWorker::trigger("")
            .script(GlueType::GlueShell, "echo hi")
            .record();
        let param = trigger_param(&script, 1, 1, 1, NOT_BROADCAST);
        assert_eq!(
            (param.glue_type.as_str(), param.executor_handler.as_str()),
            ("GLUE_SHELL", "")
        );
        assert_eq!(param.glue_source, "echo hi");
    }

    #[test]
    fn a_trigger_goes_to_the_owner_of_its_partition() {
        let live = vec!["http://a/".to_owned(), "http://b/".to_owned()];
        assert_eq!(
            assigned(3, &[0, 1, 2, 3], &live).as_deref(),
            Some("http://b/")
        );
        assert_eq!(
            assigned(0, &[0, 1, 2, 3], &live).as_deref(),
            Some("http://a/")
        );
        // A partition the bridge no longer lists still finds an executor.
        assert_eq!(assigned(5, &[0], &live).as_deref(), Some("http://b/"));
        assert_eq!(assigned(0, &[0], &[]), None);
    }

    #[test]
    fn a_callback_becomes_the_runs_result() {
        let ok = Callback {
            code: 200,
            msg: Some("ok".into()),
        };
        assert_eq!(outcome("http://a/", ok), Ok(()));
        let failed = Callback {
            code: 500,
            msg: Some("failed on purpose".into()),
        };
        assert_eq!(
            outcome("http://a/", failed).unwrap_err().message(),
            "failed on purpose"
        );
        let bare = Callback {
            code: 502,
            msg: None,
        };
        assert_eq!(
            outcome("http://a/", bare).unwrap_err().message(),
            "the XXL-JOB executor at http://a/ reported code 502 without a message"
        );
    }
}
