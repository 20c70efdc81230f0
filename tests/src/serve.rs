//! `kadence serve` as a child process, as in production: the caller sets its binary and
//! configuration (`KADENCE_…` variables) on a command; it is ready once it prints where its
//! API listens. Its first admin's password is [`TEST_ADMIN_PASSWORD`], for
//! [`login`](crate::session::login).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::session::TEST_ADMIN_PASSWORD;

/// What `kadence serve` prints on stdout, followed by its API's URL, once it listens.
const LISTENING: &str = "Kadence API listening on ";

/// Spawns `command` (a `kadence serve`; killed when the child is dropped) and waits at most a
/// minute for its API; returns the child and the API's URL, e.g. `http://127.0.0.1:41234`.
pub async fn spawn_serve(mut command: Command) -> (Child, String) {
    let mut child = command
        .env("KADENCE_AUTH__ADMIN_PASSWORD", TEST_ADMIN_PASSWORD)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start kadence serve");
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let api = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read its stdout") {
            if let Some(url) = line.strip_prefix(LISTENING) {
                return url.to_owned();
            }
        }
        panic!("kadence serve exited before listening");
    })
    .await
    .expect("kadence serve listens within a minute");
    (child, api)
}
