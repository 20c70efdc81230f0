//! The `kadence` binary as an operator uses it, against a running scheduler (SQLite, real
//! broker from `KADENCE_TEST_BROKERS`).

use std::sync::Arc;
use std::time::Duration;

use kadence_scheduler::app::Scheduler;
use kadence_scheduler::clock::{Clock as _, SystemClock};
use kadence_scheduler::config::Config;
use kadence_tests::fixtures::{Backend, TestDatabase, brokers, unique};
use secrecy::SecretString;

struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

/// The config directory (where `kadence login` keeps tokens) of the runs of this process.
static CONFIG_DIR: std::sync::LazyLock<tempfile::TempDir> =
    std::sync::LazyLock::new(|| tempfile::tempdir().expect("a temporary directory"));

/// Runs `kadence --api {api} {args}` with the test's config directory.
async fn kadence(api: &str, args: &[&str]) -> Output {
    let config_dir = CONFIG_DIR.path().to_str().unwrap();
    kadence_with(api, args, &[("KADENCE_CONFIG_DIR", config_dir)], None).await
}

/// Runs `kadence --api {api} {args}` with `env` (and no `KADENCE_TOKEN` unless given) and
/// `stdin`.
async fn kadence_with(
    api: &str,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Output {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kadence"))
        .arg("--api")
        .arg(api)
        .args(args)
        .env_remove("KADENCE_TOKEN")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kadence");
    let mut input = child.stdin.take().expect("piped stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .await
        .expect("write stdin");
    drop(input);
    let output = child.wait_with_output().await.expect("run kadence");
    Output {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `kadence --api {api} {args}` with its standard output a pipe whose reader has gone
/// before it writes (as under `| head -1` once `head` has its line).
async fn kadence_into_closed_pipe(api: &str, args: &[&str]) -> Output {
    let config_dir = CONFIG_DIR.path().to_str().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kadence"))
        .arg("--api")
        .arg(api)
        .args(args)
        .env_remove("KADENCE_TOKEN")
        .env("KADENCE_CONFIG_DIR", config_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kadence");
    drop(child.stdout.take());
    let output = child.wait_with_output().await.expect("run kadence");
    Output {
        success: output.status.success(),
        stdout: String::new(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

const ADMIN_PASSWORD: &str = "cli-admin-password";

/// A scheduler on a fresh SQLite database whose first admin has [`ADMIN_PASSWORD`]; the
/// database (dropped with the test), the scheduler and its API's URL.
async fn start_scheduler() -> (TestDatabase, Scheduler, String) {
    let database = TestDatabase::create(Backend::Sqlite).await;
    let mut config = Config::default();
    config.database.url = SecretString::from(database.url.clone());
    config.kafka.brokers = brokers();
    config.kafka.broker_kind = kadence_tests::fixtures::broker_kind();
    config.kafka.topic_prefix = unique("kcli");
    config.kafka.results_partitions = 1;
    config.auth.admin_password = Some(SecretString::from(ADMIN_PASSWORD));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheduler = Scheduler::start(config, listener, Arc::new(SystemClock))
        .await
        .expect("scheduler starts");
    let api = format!("http://{}", scheduler.api_addr());
    (database, scheduler, api)
}

async fn log_in(api: &str) {
    let config_dir = CONFIG_DIR.path().to_str().unwrap();
    let login = kadence_with(
        api,
        &["login", "--user", "admin", "--password-stdin"],
        &[("KADENCE_CONFIG_DIR", config_dir)],
        Some(&format!("{ADMIN_PASSWORD}\n")),
    )
    .await;
    assert!(login.success, "{}", login.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_manage_apps_and_jobs_without_sql() {
    let (_database, scheduler, api) = start_scheduler().await;
    log_in(&api).await;

    let created = kadence(&api, &["app", "add", "clidemo", "--partitions", "2"]).await;
    assert!(created.success, "{}", created.stderr);
    assert_eq!(
        created.stdout.trim(),
        "created app clidemo with 2 partitions"
    );
    let listed = kadence(&api, &["app", "list"]).await;
    assert!(
        listed
            .stdout
            .lines()
            .any(|line| line.starts_with("clidemo ") && line.contains(" 2 ")),
        "{}",
        listed.stdout
    );

    let bad_cron = kadence(
        &api,
        &[
            "job",
            "add",
            "--app",
            "clidemo",
            "--handler",
            "h",
            "--cron",
            "0 61 * * * ?",
        ],
    )
    .await;
    assert!(!bad_cron.success);
    assert!(
        bad_cron
            .stderr
            .contains("invalid cron expression \"0 61 * * * ?\""),
        "{}",
        bad_cron.stderr
    );
    // A schedule that can never fire is refused when the job is saved, not kept silently.
    let never = kadence(
        &api,
        &[
            "job",
            "add",
            "--app",
            "clidemo",
            "--handler",
            "h",
            "--cron",
            "0 0 0 30 2 ?",
        ],
    )
    .await;
    assert!(!never.success);
    assert!(
        never.stderr.contains("\"0 0 0 30 2 ?\" never fires after")
            && never.stderr.contains("(HTTP 400)"),
        "{}",
        never.stderr
    );
    let no_schedule = kadence(&api, &["job", "add", "--app", "clidemo", "--handler", "h"]).await;
    assert!(!no_schedule.success);
    assert!(
        no_schedule.stderr.contains("give a schedule"),
        "{}",
        no_schedule.stderr
    );

    let job = kadence(
        &api,
        &[
            "job",
            "add",
            "--app",
            "clidemo",
            "--handler",
            "h",
            "--manual",
            "--params",
            "own",
        ],
    )
    .await;
    assert!(job.success, "{}", job.stderr);
    assert_eq!(job.stdout.trim(), "created job 1 (STOPPED)");
    let refused = kadence(&api, &["job", "start", "1"]).await;
    assert!(!refused.success);
    assert!(
        refused.stderr.contains("cannot be started"),
        "{}",
        refused.stderr
    );

    let cron = kadence(
        &api,
        &[
            "job",
            "add",
            "--app",
            "clidemo",
            "--handler",
            "h",
            "--cron",
            "0 0 3 ? * MON-FRI",
            "--time-zone",
            "Europe/Berlin",
            // Any case, as the API takes it.
            "--route",
            "consistent_hash",
            "--start",
        ],
    )
    .await;
    assert!(cron.success, "{}", cron.stderr);
    assert!(
        cron.stdout
            .starts_with("created job 2 (RUNNING, next fire "),
        "{}",
        cron.stdout
    );
    let stopped = kadence(&api, &["job", "stop", "2"]).await;
    assert_eq!(stopped.stdout.trim(), "job 2 STOPPED");

    let fired = kadence(&api, &["job", "trigger", "1", "--params", "other"]).await;
    assert!(fired.success, "{}", fired.stderr);
    let trigger_id = fired
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("triggered <id>")
        .to_owned();
    assert!(trigger_id.starts_with("1-u"), "{}", fired.stdout);
    // No executor runs here: the run is written and dispatched, waiting in its partition.
    let mut runs = kadence(&api, &["job", "runs", "1"]).await;
    for _ in 0..50 {
        if runs.stdout.contains("DISPATCHED") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        runs = kadence(&api, &["job", "runs", "1"]).await;
    }
    let row = runs
        .stdout
        .lines()
        .find(|line| line.contains(&trigger_id))
        .expect("run listed");
    assert!(
        row.contains("MANUAL") && row.contains("DISPATCHED"),
        "{row}"
    );
    // Its log is empty (nothing ran it); the log id leads the row.
    let log_id = row.split_whitespace().next().expect("log id");
    let log = kadence(&api, &["job", "log", log_id]).await;
    assert!(log.success, "{}", log.stderr);
    assert_eq!(log.stdout, "");
    let bad_log = kadence(&api, &["job", "log", "424242"]).await;
    assert!(!bad_log.success);
    assert!(
        bad_log.stderr.contains("run 424242 does not exist"),
        "{}",
        bad_log.stderr
    );
    // A full page of runs says it shows the newest only, and how to see older ones.
    let again = kadence(&api, &["job", "trigger", "1"]).await;
    assert!(again.success, "{}", again.stderr);
    let newest = kadence(&api, &["job", "runs", "1", "--limit", "1"]).await;
    assert!(newest.success, "{}", newest.stderr);
    let hint = newest.stdout.lines().last().unwrap_or_default();
    let older = hint
        .strip_prefix("more: these are the newest 1 runs; for older ones: kadence ")
        .unwrap_or_else(|| panic!("a hint under a full page: {}", newest.stdout));
    assert!(!newest.stdout.contains(&trigger_id), "{}", newest.stdout);
    let older: Vec<&str> = older.split_whitespace().collect();
    assert_eq!(&older[..3], ["job", "runs", "1"], "{hint}");
    let older = kadence(&api, &older).await;
    assert!(older.success, "{}", older.stderr);
    assert!(older.stdout.contains(&trigger_id), "{}", older.stdout);
    assert!(
        older
            .stdout
            .contains("more: for older runs: kadence job runs 1 --after "),
        "{}",
        older.stdout
    );
    let all = kadence(&api, &["job", "runs", "1"]).await;
    assert!(
        !all.stdout.contains("more:"),
        "not a full page: {}",
        all.stdout
    );

    // No executor has beaten yet: the listing has its header only.
    let executors = kadence(&api, &["executor", "list", "--app", "clidemo"]).await;
    assert!(executors.success, "{}", executors.stderr);
    assert_eq!(executors.stdout.lines().count(), 1, "{}", executors.stdout);
    assert!(
        executors.stdout.starts_with("EXECUTOR"),
        "{}",
        executors.stdout
    );

    let killed = kadence(&api, &["job", "kill", "1", "--reason", "maintenance"]).await;
    assert!(killed.success, "{}", killed.stderr);
    assert_eq!(killed.stdout.trim(), "kill requested for job 1");
    let missing = kadence(&api, &["job", "kill", "77"]).await;
    assert!(!missing.success);
    assert!(
        missing.stderr.contains("job 77 does not exist"),
        "{}",
        missing.stderr
    );

    let listed = kadence(&api, &["job", "list", "--app", "clidemo"]).await;
    assert_eq!(listed.stdout.lines().count(), 3, "{}", listed.stdout);
    // `kadence job list | head -1`: a reader that went away ends the command quietly.
    for args in [&["job", "list"][..], &["job", "runs", "1"], &["openapi"]] {
        let piped = kadence_into_closed_pipe(&api, args).await;
        assert!(
            piped.success && piped.stderr.is_empty(),
            "{args:?} into a closed pipe: {}",
            piped.stderr
        );
    }
    let unreachable = kadence("http://127.0.0.1:9", &["job", "list"]).await;
    assert!(!unreachable.success);
    assert!(
        unreachable.stderr.contains("cannot reach the Kadence API"),
        "{}",
        unreachable.stderr
    );

    scheduler.stop(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn preview_prints_fire_times_and_names_the_bad_field() {
    let unused_api = "http://127.0.0.1:9";
    let berlin = kadence(
        unused_api,
        &[
            "preview",
            "--cron",
            "0 30 9 ? * MON-FRI",
            "--time-zone",
            "Europe/Berlin",
            "--from",
            "2026-03-27T00:00:00Z",
            "--count",
            "3",
        ],
    )
    .await;
    assert!(berlin.success, "{}", berlin.stderr);
    // Friday before the daylight-saving change, then Monday after it.
    assert_eq!(
        berlin.stdout,
        "2026-03-27T09:30:00+01:00\n2026-03-30T09:30:00+02:00\n2026-03-31T09:30:00+02:00\n"
    );
    let rate = kadence(
        unused_api,
        &[
            "preview",
            "--fix-rate",
            "90",
            "--from",
            "2026-01-01T00:00:00Z",
            "--count",
            "2",
        ],
    )
    .await;
    assert_eq!(
        rate.stdout,
        "2026-01-01T00:01:30+00:00\n2026-01-01T00:03:00+00:00\n"
    );
    let bad = kadence(unused_api, &["preview", "--cron", "0 0 25 * * ?"]).await;
    assert!(!bad.success);
    assert!(
        bad.stderr.contains("field 3 (hour) \"25\" is invalid"),
        "{}",
        bad.stderr
    );
    let bad_from = kadence(
        unused_api,
        &["preview", "--cron", "* * * * * ?", "--from", "yesterday"],
    )
    .await;
    assert!(!bad_from.success);
    assert!(
        bad_from.stderr.contains("not an RFC 3339 instant"),
        "{}",
        bad_from.stderr
    );
    // A schedule that never fires says so and fails, rather than printing nothing.
    let never = kadence(
        unused_api,
        &[
            "preview",
            "--cron",
            "0 0 0 30 2 ?",
            "--from",
            "2026-01-01T00:00:00Z",
        ],
    )
    .await;
    assert!(!never.success);
    assert_eq!(never.stdout, "");
    assert!(
        never
            .stderr
            .starts_with("error: \"0 0 0 30 2 ?\" never fires after 2026-01-01T00:00:00+00:00"),
        "{}",
        never.stderr
    );
    // One that runs out prints what it has, and says it ends there.
    let last = kadence(
        unused_api,
        &[
            "preview",
            "--cron",
            "0 0 0 1 1 ? 2027",
            "--from",
            "2026-01-01T00:00:00Z",
        ],
    )
    .await;
    assert!(last.success, "{}", last.stderr);
    assert_eq!(last.stdout, "2027-01-01T00:00:00+00:00\n");
    assert_eq!(last.stderr, "no fire after 2027-01-01T00:00:00+00:00\n");
    // Quartz's L (Saturday) and L-n, which once fired never and were refused.
    let saturdays = kadence(
        unused_api,
        &[
            "preview",
            "--cron",
            "0 0 12 ? * L",
            "--from",
            "2026-01-01T00:00:00Z",
            "--count",
            "1",
        ],
    )
    .await;
    assert_eq!(saturdays.stdout, "2026-01-03T12:00:00+00:00\n");
    let before_last = kadence(
        unused_api,
        &[
            "preview",
            "--cron",
            "0 15 10 L-2 * ?",
            "--from",
            "2026-02-01T00:00:00Z",
            "--count",
            "1",
        ],
    )
    .await;
    assert_eq!(before_last.stdout, "2026-02-26T10:15:00+00:00\n");
}

/// `kadence job add --help` lists every accepted value of the enumerated flags, taken from the
/// enums themselves, and a value outside them is refused before any request.
#[tokio::test]
async fn job_add_help_lists_every_strategy() {
    use kadence_scheduler::domain::model::RouteStrategy;

    let unused_api = "http://127.0.0.1:9";
    let help = kadence(unused_api, &["job", "add", "--help"]).await;
    assert!(help.success, "{}", help.stderr);
    let route = help
        .stdout
        .split("--route <ROUTE>")
        .nth(1)
        .and_then(|rest| rest.split("--block").next())
        .unwrap_or_else(|| panic!("--route in the help: {}", help.stdout));
    assert_eq!(RouteStrategy::ALL.len(), 10);
    for strategy in RouteStrategy::ALL {
        assert!(route.contains(strategy.as_str()), "{strategy}: {route}");
    }
    for value in ["DISCARD_LATER", "FIRE_ONCE_NOW", "ALL_SHARDS"] {
        assert!(help.stdout.contains(value), "{value}: {}", help.stdout);
    }
    let bad = kadence(
        unused_api,
        &[
            "job",
            "add",
            "--app",
            "a",
            "--handler",
            "h",
            "--manual",
            "--route",
            "NEAREST",
        ],
    )
    .await;
    assert!(!bad.success);
    assert!(
        bad.stderr
            .contains("invalid value 'NEAREST' for '--route <ROUTE>'")
            && bad.stderr.contains("SHARDING_BROADCAST"),
        "{}",
        bad.stderr
    );
}

/// `kadence login` keeps a token readable by its owner only, every subcommand sends it,
/// `KADENCE_TOKEN` takes an API token instead, users and grants are managed from the CLI,
/// and `kadence logout` ends the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_log_in_and_manage_users_and_tokens() {
    use std::os::unix::fs::PermissionsExt as _;

    let (_database, scheduler, api) = start_scheduler().await;
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("kadence");
    let env = [("KADENCE_CONFIG_DIR", dir.to_str().unwrap())];
    let run = |args: &'static [&'static str], stdin: Option<&'static str>| {
        let (api, env) = (api.clone(), env);
        async move { kadence_with(&api, args, &env, stdin).await }
    };

    let anonymous = run(&["app", "list"], None).await;
    assert!(!anonymous.success);
    assert!(
        anonymous.stderr.contains("not logged in to") && anonymous.stderr.contains("kadence login"),
        "{}",
        anonymous.stderr
    );
    let wrong = run(&["login", "--password-stdin"], Some("nope\n")).await;
    assert!(!wrong.success);
    assert!(
        wrong.stderr.contains("wrong user name or password"),
        "{}",
        wrong.stderr
    );
    let login = run(&["login", "--password-stdin"], Some("cli-admin-password\n")).await;
    assert!(login.success, "{}", login.stderr);
    assert!(login.stdout.starts_with("logged in to"), "{}", login.stdout);
    let file = dir.join("credentials.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the token file is its owner's only");

    assert!(
        run(&["app", "add", "ops", "--partitions", "1"], None)
            .await
            .success
    );
    let added = run(
        &["user", "add", "ann", "--password-stdin"],
        Some("ann-password-1\n"),
    )
    .await;
    assert!(added.success, "{}", added.stderr);
    assert_eq!(added.stdout.trim(), "created MEMBER ann");
    let granted = run(&["user", "grant", "ann", "ops", "OPERATE"], None).await;
    assert!(granted.success, "{}", granted.stderr);
    let users = run(&["user", "list"], None).await;
    assert!(
        users
            .stdout
            .lines()
            .any(|line| line.starts_with("ann ") && line.ends_with("ops:OPERATE")),
        "{}",
        users.stdout
    );
    let short = run(
        &["user", "passwd", "ann", "--password-stdin"],
        Some("short\n"),
    )
    .await;
    assert!(
        short.stderr.contains("at least 10 characters"),
        "{}",
        short.stderr
    );

    let token = run(&["token", "create", "pipeline", "--days", "7"], None).await;
    assert!(token.success, "{}", token.stderr);
    let token = token.stdout.trim().to_owned();
    assert!(token.starts_with("kdn_"), "{token}");
    let with_token =
        kadence_with(&api, &["user", "list"], &[("KADENCE_TOKEN", &token)], None).await;
    assert!(
        with_token.success,
        "KADENCE_TOKEN alone is enough: {}",
        with_token.stderr
    );
    let listed = run(&["token", "list", "--user", "admin"], None).await;
    assert!(listed.success, "{}", listed.stderr);
    let pipeline = listed
        .stdout
        .lines()
        .find(|line| line.ends_with(" pipeline"))
        .unwrap_or_else(|| panic!("the admin's tokens list it: {}", listed.stdout));
    let id = pipeline.split_whitespace().next().unwrap();
    let revoke = ["token", "revoke", id, "--user", "admin"];
    let revoked = kadence_with(&api, &revoke, &env, None).await;
    assert!(revoked.success, "{}", revoked.stderr);
    let refused = kadence_with(&api, &["user", "list"], &[("KADENCE_TOKEN", &token)], None).await;
    assert!(
        !refused.success && refused.stderr.contains("401"),
        "a revoked token: {}",
        refused.stderr
    );

    let document = run(&["openapi"], None).await;
    assert!(document.success, "{}", document.stderr);
    let document: serde_json::Value = serde_json::from_str(&document.stdout).unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    assert!(document["paths"]["/api/users/{name}/tokens/{id}"]["delete"].is_object());

    let audit = run(
        &["audit", "--user", "admin", "--target", "/api/users"],
        None,
    )
    .await;
    assert!(audit.success, "{}", audit.stderr);
    assert!(
        audit
            .stdout
            .lines()
            .any(|line| line.contains("PUT /api/users/{name}/grants/{app}")
                && line.contains("/api/users/ann/grants/ops")),
        "{}",
        audit.stdout
    );

    // A user's life cycle: a new role, disabled and enabled again, deleted; the only
    // admin's own account refused with the reason.
    let promoted = run(&["user", "role", "ann", "ADMIN"], None).await;
    assert!(promoted.success, "{}", promoted.stderr);
    assert!(
        promoted.stdout.contains("ADMIN    ENABLED"),
        "{}",
        promoted.stdout
    );
    let disabled = run(&["user", "disable", "ann"], None).await;
    assert!(disabled.stdout.contains("DISABLED"), "{}", disabled.stderr);
    let enabled = run(&["user", "enable", "ann"], None).await;
    assert!(enabled.stdout.contains("ENABLED"), "{}", enabled.stderr);
    let deleted = run(&["user", "delete", "ann"], None).await;
    assert!(deleted.success, "{}", deleted.stderr);
    assert_eq!(
        deleted.stdout.trim(),
        "user ann deleted, with their grants and tokens"
    );
    let own = run(&["user", "disable", "admin"], None).await;
    assert!(
        !own.success && own.stderr.contains("last enabled admin"),
        "{}",
        own.stderr
    );

    let logout = run(&["logout"], None).await;
    assert!(logout.success, "{}", logout.stderr);
    let after = run(&["app", "list"], None).await;
    assert!(
        !after.success && after.stderr.contains("not logged in"),
        "{}",
        after.stderr
    );
    scheduler.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_list_rotate_and_retire_signing_keys() {
    let (_database, scheduler, api) = start_scheduler().await;
    // A config directory of its own: `kadence login`s of tests running at once would write
    // the same credentials file.
    let home = tempfile::tempdir().unwrap();
    let env = [("KADENCE_CONFIG_DIR", home.path().to_str().unwrap())];
    let kadence = |api: &str, args: &[&str]| {
        let (api, args) = (
            api.to_owned(),
            args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        );
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kadence_with(&api, &args, &env, None).await
        }
    };
    let login = kadence_with(
        &api,
        &["login", "--password-stdin"],
        &env,
        Some(&format!("{ADMIN_PASSWORD}\n")),
    )
    .await;
    assert!(login.success, "{}", login.stderr);
    // KEY, PUBLIC KEY, CREATED, RETIRED ("-" while active), and "*" on the signing key.
    let keys = |listed: &Output| -> Vec<Vec<String>> {
        listed
            .stdout
            .lines()
            .skip(1)
            .map(|line| line.split_whitespace().map(str::to_owned).collect())
            .collect()
    };

    let listed = kadence(&api, &["key", "list"]).await;
    assert!(listed.success, "{}", listed.stderr);
    assert!(listed.stdout.starts_with("KEY "), "{}", listed.stdout);
    let first = keys(&listed);
    assert_eq!(
        first.len(),
        1,
        "the first start made one key: {}",
        listed.stdout
    );
    let (old_id, old_public) = (first[0][0].clone(), first[0][1].clone());
    assert_eq!(old_id.len(), 16);
    assert!(
        kadence_kafka::PublicKey::parse(&old_public).is_ok(),
        "{old_public}"
    );
    assert_eq!((first[0][3].as_str(), first[0][4].as_str()), ("-", "*"));

    let only = kadence(&api, &["key", "retire", &old_id]).await;
    assert!(!only.success);
    assert!(
        only.stderr.contains("the only active one") && only.stderr.contains("HTTP 409"),
        "{}",
        only.stderr
    );

    let rotated = kadence(&api, &["key", "rotate"]).await;
    assert!(rotated.success, "{}", rotated.stderr);
    assert!(
        rotated
            .stderr
            .contains("add its public key to every executor"),
        "{}",
        rotated.stderr
    );
    let new_id = keys(&rotated)[0][0].clone();
    assert_ne!(new_id, old_id);
    let after = keys(&kadence(&api, &["key", "list"]).await);
    let marks: Vec<(&str, &str)> = after
        .iter()
        .map(|key| (key[0].as_str(), key.last().unwrap().as_str()))
        .collect();
    assert_eq!(marks.len(), 2, "{after:?}");
    assert_eq!(
        marks[0],
        (new_id.as_str(), "*"),
        "the new key signs: {after:?}"
    );
    assert_eq!(after[1][0], old_id);

    let retired = kadence(&api, &["key", "retire", &old_id]).await;
    assert!(retired.success, "{}", retired.stderr);
    assert!(
        retired
            .stdout
            .starts_with(&format!("key {old_id} retired at 20")),
        "{}",
        retired.stdout
    );
    let unknown = kadence(&api, &["key", "retire", "ffffffffffffffff"]).await;
    assert!(
        !unknown.success && unknown.stderr.contains("HTTP 404"),
        "{}",
        unknown.stderr
    );
    scheduler.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_replay_backfill_and_compare_shadows_from_the_command_line() {
    let (_database, scheduler, api) = start_scheduler().await;
    let home = tempfile::tempdir().unwrap();
    let env = [("KADENCE_CONFIG_DIR", home.path().to_str().unwrap())];
    let run = |args: &[&str]| {
        let (api, args) = (
            api.clone(),
            args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        );
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kadence_with(&api, &args, &env, None).await
        }
    };
    let login = kadence_with(
        &api,
        &["login", "--password-stdin"],
        &env,
        Some(&format!("{ADMIN_PASSWORD}\n")),
    )
    .await;
    assert!(login.success, "{}", login.stderr);
    assert!(
        run(&["app", "add", "replayed", "--partitions", "1"])
            .await
            .success
    );
    let added = run(&[
        "job",
        "add",
        "--app",
        "replayed",
        "--handler",
        "h",
        "--cron",
        "* * * * * ?",
        "--start",
    ])
    .await;
    assert!(added.success, "{}", added.stderr);
    let from = SystemClock.now_ms();
    // A started job's first fire is a pre-read window (5 s) away.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let to = SystemClock.now_ms();
    assert!(run(&["job", "stop", "1"]).await.success);
    let (from, to) = (from.to_string(), to.to_string());
    let range = [
        "--app",
        "replayed",
        "--from",
        from.as_str(),
        "--to",
        to.as_str(),
    ];

    let dry = run(&[&["replay"][..], &range, &["--dry-run"]].concat()).await;
    assert!(dry.success, "{}", dry.stderr);
    let count: usize = dry
        .stdout
        .strip_prefix("dry run: ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", dry.stdout));
    assert!(count >= 1, "{}", dry.stdout);
    assert!(dry.stdout.contains("nothing changed"), "{}", dry.stdout);
    let replayed = run(&[&["replay"][..], &range, &["--rate", "1000"]].concat()).await;
    assert!(replayed.success, "{}", replayed.stderr);
    assert!(
        replayed.stdout.starts_with(&format!(
            "replay 1 recorded: {count} triggers into app replayed"
        )),
        "{}",
        replayed.stdout
    );
    let twice = run(&[&["replay"][..], &range].concat()).await;
    assert!(
        !twice.success
            && twice.stderr.contains("replayed before")
            && twice.stderr.contains("HTTP 409"),
        "{}",
        twice.stderr
    );
    let listed = run(&["replay", "list"]).await;
    assert!(
        listed.stdout.lines().any(|line| line.starts_with("1 ")
            && line.contains("REPLAY")
            && line.contains("admin")),
        "{}",
        listed.stdout
    );
    let shown = run(&["replay", "show", "1"]).await;
    assert!(shown.stdout.contains("selection: {"), "{}", shown.stdout);

    let no_range = run(&["replay", "--app", "replayed"]).await;
    assert!(
        !no_range.success && no_range.stderr.contains("choose the range"),
        "{}",
        no_range.stderr
    );
    let bad_offsets = run(&["replay", "--app", "replayed", "--offsets", "0:x-3"]).await;
    assert!(
        !bad_offsets.success && bad_offsets.stderr.contains("PARTITION:FROM-TO"),
        "{}",
        bad_offsets.stderr
    );
    // The range reaches into the last seconds, whose fires may still be on their way.
    let too_recent = run(&[
        "backfill",
        "--job",
        "1",
        "--from",
        &from,
        "--to",
        &to,
        "--dry-run",
    ])
    .await;
    assert!(
        !too_recent.success
            && too_recent.stderr.contains("a backfill fills the past")
            && too_recent.stderr.contains("HTTP 400"),
        "{}",
        too_recent.stderr
    );
    let report = run(&["shadow", "report", "--app", "replayed", "--from", &from]).await;
    assert!(report.success, "{}", report.stderr);
    assert!(
        report
            .stdout
            .starts_with("0 shadow runs compared, 0 disagree"),
        "{}",
        report.stdout
    );
    scheduler.stop(Duration::from_secs(10)).await;
}
