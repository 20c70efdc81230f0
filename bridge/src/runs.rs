//! The runs a bridge has handed to legacy executors and waits on, by the XXL-JOB log id they
//! were triggered with: a callback naming that id finishes its run.
//!
//! **Log ids.** XXL-JOB names a run by its log id: the executor's log file and its callback
//! both carry it. The bridge triggers a run under the Kadence run's own log id (the job-log
//! row id of the trigger), so the legacy executor's log files are named as Kadence names the
//! run. The extra runs of a broadcast shard fanned out over more executors than the app has
//! partitions take the same id with the fan-out index in the bits above 48
//! ([`xxl_log_id`]).
//!
//! A trigger handed to a legacy executor a second time (its bridge crashed, the partition
//! moved, and the next owner forwards the redelivery) is triggered under the same log id, so
//! whichever of the two runs calls back first finishes it: the same first-result-wins as
//! Kadence's results.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::legacy::Address;

/// What a callback said about a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callback {
    /// 200 success, 500 failure, 502 timeout.
    pub code: i32,
    /// The handler's message, or why it failed.
    pub msg: Option<String>,
}

/// The XXL-JOB log id of fan-out run `index` (0 for the only or first run) of the Kadence run
/// `log_id` (see the module docs).
pub fn xxl_log_id(log_id: i64, index: u16) -> i64 {
    log_id | (i64::from(index) << 48)
}

/// One run handed over, waiting for its callback.
struct Waiting {
    address: Address,
    job_id: i64,
    callback: oneshot::Sender<Callback>,
}

/// The runs handed over and not yet called back (see the module docs).
#[derive(Default)]
pub struct PendingRuns {
    waiting: Mutex<HashMap<i64, Waiting>>,
}

impl PendingRuns {
    /// Waits for the callback of `xxl_log_id`, a run of `job_id` handed to `address`. A
    /// run already waiting under that id (the same trigger handed over again) is replaced.
    pub fn expect(
        &self,
        xxl_log_id: i64,
        address: &str,
        job_id: i64,
    ) -> oneshot::Receiver<Callback> {
        let (callback, receiver) = oneshot::channel();
        let waiting = Waiting {
            address: address.to_owned(),
            job_id,
            callback,
        };
        (self.waiting.lock().expect("pending runs lock")).insert(xxl_log_id, waiting);
        receiver
    }

    /// Finishes the run `xxl_log_id` with `callback`. Returns whether a run waited for it: a
    /// callback for a run this bridge does not wait on (another bridge's, or one finished
    /// already) returns false.
    pub fn complete(&self, xxl_log_id: i64, callback: Callback) -> bool {
        let waiting = (self.waiting.lock().expect("pending runs lock")).remove(&xxl_log_id);
        match waiting {
            Some(waiting) => waiting.callback.send(callback).is_ok(),
            None => false,
        }
    }

    /// Stops waiting for `xxl_log_id` (the run ended otherwise: killed, timed out, lost).
    pub fn forget(&self, xxl_log_id: i64) {
        (self.waiting.lock().expect("pending runs lock")).remove(&xxl_log_id);
    }

    /// The jobs with a run handed to `address` and not called back, ascending, each once.
    pub fn jobs_running_on(&self, address: &str) -> Vec<i64> {
        let waiting = self.waiting.lock().expect("pending runs lock");
        let mut jobs: Vec<i64> = (waiting.values())
            .filter(|run| run.address == address)
            .map(|run| run.job_id)
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callback_finishes_the_run_waiting_under_its_log_id_once() {
        let runs = PendingRuns::default();
        let mut first = runs.expect(xxl_log_id(41, 0), "http://a/", 7);
        let _second = runs.expect(xxl_log_id(41, 1), "http://b/", 7);
        assert_eq!(runs.jobs_running_on("http://a/"), [7]);
        let done = Callback {
            code: 200,
            msg: None,
        };
        assert!(runs.complete(41, done.clone()));
        assert_eq!(first.try_recv().unwrap(), done);
        assert!(
            !runs.complete(41, done.clone()),
            "only the first callback counts"
        );
        assert!(runs.jobs_running_on("http://a/").is_empty());
        assert_eq!(xxl_log_id(41, 1), 41 + (1 << 48));
        runs.forget(xxl_log_id(41, 1));
        assert!(!runs.complete(xxl_log_id(41, 1), done));
    }
}
