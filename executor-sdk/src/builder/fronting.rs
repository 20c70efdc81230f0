//! Settings for an executor that hands triggers on to others instead of running them itself,
//! as the XXL-JOB bridge hands them to legacy executors: a fallback handler for every BEAN
//! name, a runner for script triggers in place of the local interpreters, and a
//! [`BeatPlan`] whose beats name the executors it fronts.

use std::future::Future;
use std::sync::Arc;

use super::ExecutorBuilder;
use crate::beats::BeatPlan;
use crate::context::{JobContext, JobResult};
use crate::handler::{self, HandlerFn};
use crate::script::script_handler;

impl ExecutorBuilder {
    /// Runs every BEAN trigger whose handler name no [`handler`](Self::handler) registered,
    /// instead of failing it with "no handler named …". For an executor that hands triggers
    /// on to others rather than running them itself (the XXL-JOB bridge, whose legacy
    /// executors hold the handlers); an executor of ordinary handlers should let an unknown
    /// name fail, so that a typo in a job's handler shows on its run. With a fallback, no
    /// named handler is required.
    pub fn fallback_handler<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        self.fallback_handler = Some(handler::erase(handler));
        self
    }

    /// Runs script triggers (GLUE_*) with `runner` instead of running their source on this
    /// host: for an executor that hands them on to others (the XXL-JOB bridge hands them to
    /// its legacy executors, which run GLUE jobs themselves). It switches
    /// [`scripts`](Self::scripts) on, with the same rule: at least one
    /// [`trusted_key`](Self::trusted_key), or
    /// [`allow_unverified_scripts`](Self::allow_unverified_scripts). No script directory is
    /// made, since nothing is written here.
    pub fn script_runner<F, Fut>(mut self, runner: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        self.scripts = true;
        self.script_runner = Some(handler::erase(runner));
        self
    }

    /// Sends the beats `plan` makes of this executor's own beat instead of that one (see
    /// [`BeatPlan`]): for an executor that fronts others, whose beats name them. Without a
    /// plan, each beat is the executor's own.
    pub fn beat_plan(mut self, plan: Arc<dyn BeatPlan>) -> Self {
        self.beat_plan = Some(plan);
        self
    }
}

/// What runs script triggers: the builder's runner, else the local interpreters (writing to
/// `script_dir`) when scripts are on, else nothing (they are refused).
pub(super) fn script_handler_of(
    scripts: bool,
    runner: Option<HandlerFn>,
    script_dir: std::path::PathBuf,
) -> Option<HandlerFn> {
    match runner {
        Some(runner) => Some(runner),
        None => scripts.then(|| script_handler(script_dir)),
    }
}
