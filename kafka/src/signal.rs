//! The process's shutdown signal, as a future to hand to an executor's `run`
//! or to the scheduler's `serve` (or to any other service's graceful stop).

/// Completes when the process is asked to stop: SIGTERM or SIGINT (Ctrl-C) on Unix, Ctrl-C
/// elsewhere.
///
/// Pass it to `Executor::run` so that a stop drains: the executor
/// stops taking triggers, lets the running handlers finish (up to the drain timeout),
/// publishes their results, commits and leaves its group.
///
/// SIGTERM matters as much as Ctrl-C: it is what Kubernetes sends to a pod it stops and what
/// systemd sends to a service, and its default action ends the process at once — mid-run, with
/// no result and the offsets uncommitted, so the group redelivers the trigger to another
/// executor. Waiting only for Ctrl-C leaves exactly that default in place.
///
/// The handlers are installed when the future is first polled (`Executor::run` polls it from
/// its start); a signal that comes before that still has its default action.
///
/// If a handler cannot be installed (rare: the OS refuses it), the failure is logged and the
/// future waits for the signals it could install; if none could be installed, it never
/// completes, rather than stopping a healthy executor.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(
                %error,
                "cannot listen for Ctrl-C; Ctrl-C will end the process without a drain"
            );
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let terminate = async {
            match signal(SignalKind::terminate()) {
                Ok(mut terminate) => {
                    terminate.recv().await;
                }
                Err(error) => {
                    tracing::error!(
                        %error,
                        "cannot listen for SIGTERM; SIGTERM will end the process without a drain"
                    );
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            () = interrupt => tracing::info!("SIGINT received; stopping gracefully"),
            () = terminate => tracing::info!("SIGTERM received; stopping gracefully"),
        }
    }
    #[cfg(not(unix))]
    {
        interrupt.await;
        tracing::info!("Ctrl-C received; stopping gracefully");
    }
}
