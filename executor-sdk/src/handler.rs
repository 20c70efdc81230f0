//! Handlers: a registered async fn in its type-erased form ([`HandlerFn`]), its init and
//! destroy hooks ([`Lifecycle`]), and the [`Registry`] that finds the handler of a trigger —
//! by name for BEAN triggers (else the fallback handler, when there is one), the script
//! handler for GLUE_* ones — or says why none runs it.
//!
//! The consumer and the [test worker](crate::testing::TestWorker) both resolve through the
//! registry, so a test sees the same "no handler named …" failure an operator would.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kadence_schemas::{GlueType, TriggerRecord};
use tokio::sync::OnceCell;

use crate::context::{JobContext, JobError, JobResult};
use crate::error::ExecutorError;

/// A registered handler, type-erased.
pub(crate) type HandlerFn = Arc<dyn Fn(JobContext) -> BoxFuture<'static, JobResult> + Send + Sync>;

/// A handler's init or destroy hook, type-erased.
pub(crate) type HookFn = Arc<dyn Fn() -> BoxFuture<'static, Result<(), JobError>> + Send + Sync>;

/// Erases a plain async fn handler.
pub(crate) fn erase<F, Fut>(handler: F) -> HandlerFn
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
{
    Arc::new(move |ctx| handler(ctx).boxed())
}

/// A handler registered with hooks: its destroy hook runs at shutdown if its init ran.
pub(crate) struct Lifecycle {
    pub(crate) name: String,
    pub(crate) initialized: Arc<OnceCell<()>>,
    pub(crate) destroy: HookFn,
}

/// Erases an init or destroy hook.
pub(crate) fn erase_hook<H, Fut>(hook: H) -> HookFn
where
    H: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    Arc::new(move || hook().boxed())
}

/// `handler` behind XXL-JOB's hooks: `init` runs once, before the first run (a failed init
/// fails that run and is tried again on the next); the returned [`Lifecycle`] knows whether
/// it ran, so that `destroy` runs at shutdown only then.
pub(crate) fn with_hooks(
    name: String,
    handler: HandlerFn,
    init: HookFn,
    destroy: HookFn,
) -> (HandlerFn, Lifecycle) {
    let initialized: Arc<OnceCell<()>> = Arc::new(OnceCell::new());
    let once = Arc::clone(&initialized);
    let hooked: HandlerFn = Arc::new(move |ctx| {
        let (once, init, handler) = (Arc::clone(&once), Arc::clone(&init), Arc::clone(&handler));
        async move {
            once.get_or_try_init(|| init())
                .await
                .map_err(|error| JobError::new(format!("init hook failed: {error}")))?;
            handler(ctx).await
        }
        .boxed()
    });
    let lifecycle = Lifecycle {
        name,
        initialized,
        destroy,
    };
    (hooked, lifecycle)
}

/// The handlers of one executor.
pub(crate) struct Registry {
    by_name: HashMap<String, HandlerFn>,
    /// Runs BEAN triggers whose handler has no name here; `None` unless the builder gave one.
    fallback: Option<HandlerFn>,
    /// Runs GLUE_* triggers; `None` when scripts are switched off.
    scripts: Option<HandlerFn>,
    lifecycles: Vec<Lifecycle>,
    /// Named in the messages of refused triggers.
    executor_id: String,
}

impl Registry {
    /// Checks the names (at least one handler or a fallback, none empty, none twice).
    pub(crate) fn new(
        handlers: Vec<(String, HandlerFn)>,
        fallback: Option<HandlerFn>,
        scripts: Option<HandlerFn>,
        lifecycles: Vec<Lifecycle>,
        executor_id: String,
    ) -> Result<Registry, ExecutorError> {
        if handlers.is_empty() && fallback.is_none() {
            return Err(ExecutorError::Config(
                "register at least one handler with .handler(name, fn)".to_owned(),
            ));
        }
        let mut by_name = HashMap::new();
        for (name, handler) in handlers {
            if name.trim().is_empty() {
                return Err(ExecutorError::Config("a handler name is empty".to_owned()));
            }
            if by_name.insert(name.clone(), handler).is_some() {
                return Err(ExecutorError::Config(format!(
                    "handler {name:?} is registered twice"
                )));
            }
        }
        Ok(Registry {
            by_name,
            fallback,
            scripts,
            lifecycles,
            executor_id,
        })
    }

    /// The registered names, ascending.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.by_name.keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// The handler that runs `trigger`, or why none does: the message of the failure result
    /// the trigger gets instead.
    pub(crate) fn resolve(&self, trigger: &TriggerRecord) -> Result<HandlerFn, String> {
        if trigger.glue_type != GlueType::Bean {
            return self.scripts.clone().ok_or_else(|| {
                format!(
                    "executor {} does not run scripts ({}): script handlers are switched off",
                    self.executor_id, trigger.glue_type
                )
            });
        }
        let registered = self.by_name.get(&trigger.handler);
        registered
            .or(self.fallback.as_ref())
            .cloned()
            .ok_or_else(|| {
                format!(
                    "executor {} has no handler named {:?} (it has: {})",
                    self.executor_id,
                    trigger.handler,
                    self.names().join(", ")
                )
            })
    }

    /// Runs the destroy hook of every handler whose init ran; returns their names.
    pub(crate) async fn destroy_initialized(&self) -> Vec<String> {
        let mut destroyed = Vec::new();
        for lifecycle in &self.lifecycles {
            if lifecycle.initialized.initialized() {
                if let Err(error) = (lifecycle.destroy)().await {
                    tracing::warn!(handler = %lifecycle.name, %error, "destroy hook failed");
                }
                destroyed.push(lifecycle.name.clone());
            }
        }
        destroyed
    }
}
