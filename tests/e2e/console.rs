//! The web console in a real headless Chromium against a real scheduler, broker and
//! executor: an operator logs in, is shown the bad field of a cron expression, sees the next
//! fires of a good one, starts the job, watches its runs appear, follows a running job's log
//! as lines arrive, kills the run, stops the job and switches to Chinese; a `view` member, in
//! a browser whose language is Chinese, finds the console in Chinese, no write controls, and
//! the API refusing the writes they forge. The node serves a book, and a page's help link
//! opens its section. A screenshot of every page is saved (`browser::artifacts_dir`).
//!
//! One store (SQLite): what is under test is the console; the API it calls is tested on
//! both stores by the other suites.

use std::time::Duration;

use kadence_executor::{JobContext, JobError, JobResult};
use serde_json::{Value, json};

use crate::book::TestBook;
use crate::browser::Browser;
use crate::helpers::{TEST_ADMIN_PASSWORD, TestApp, spawn_app_with};
use kadence_tests::fixtures::{Backend, wait_for};

/// Logs "tick 1", "tick 2", … every 300 ms for a minute, or until it is killed.
async fn ticker(ctx: JobContext) -> JobResult {
    for tick in 1..=200 {
        ctx.log(format!("tick {tick}"));
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(300)) => {}
            _ = ctx.cancelled() => return Err(JobError::new("killed from the console")),
        }
    }
    Ok(())
}

async fn an_operator_and_a_viewer_use_the_console_in_a_real_browser(backend: Backend) {
    let book = TestBook::new();
    let mut app = spawn_app_with(backend, |config| config.api.book_dir = Some(book.dir())).await;
    app.create_app("web", 2).await;
    app.start_executor_with("web", |builder| builder.handler("ticker", ticker));
    let script_job = script_job_with_two_versions(&app).await;
    app.add_member("viewer", &[("web", "VIEW")]).await;
    let base = app.api_url().to_owned();

    let browser = Browser::start("en-US").await;
    browser.goto(&base).await;
    log_in(&browser, "admin", TEST_ADMIN_PASSWORD).await;
    browser.find("#dashboard-cards").await;
    the_help_opens_the_book(&browser, &base).await;

    let job = create_job_through_the_form(&browser, &app, &base).await;
    let log_id = watch_runs_appear(&browser, &base, job).await;
    follow_the_log_and_kill(&browser, &app, &base, job, log_id).await;

    browser.goto(&format!("{base}/#/jobs?app=web")).await;
    browser
        .click(&format!("tr[data-job=\"{job}\"] [data-action=\"stop\"]"))
        .await;
    browser
        .find(&format!("tr[data-job=\"{job}\"] [data-action=\"start\"]"))
        .await;
    let (_, stopped) = app
        .call(reqwest::Method::GET, &format!("/api/jobs/{job}"), None)
        .await;
    assert_eq!(
        stopped["status"], "STOPPED",
        "the stop button stopped the job"
    );

    screenshot_every_page(&browser, &base, job, log_id, script_job).await;
    narrow_window_shows_the_menu(&browser, &base).await;

    // Chinese, chosen by the user: the console speaks it and the choice is kept on the account.
    browser.goto(&format!("{base}/#/jobs")).await;
    browser.select("#language", "zh-CN").await;
    browser
        .wait_for_text("nav#nav", "the Chinese menu", |text| {
            text.contains("任务管理")
        })
        .await;
    browser
        .wait_for_text("h1", "the Chinese title", |text| text.contains("任务管理"))
        .await;
    browser.screenshot("jobs-zh-CN").await;
    let (_, me) = app.call(reqwest::Method::GET, "/api/auth/me", None).await;
    assert_eq!(me["locale"], "zh-CN", "the language is the user's: {me}");
    browser.click("#logout").await;
    browser.find("#login-name").await;
    browser.close().await;

    a_viewer_sees_no_write_controls(&base, job, log_id).await;
    app.shutdown().await;
}

/// The node serves a book: the jobs page's title has its "?", which opens the jobs section
/// of the console's guide in a new tab, and that page is there.
async fn the_help_opens_the_book(browser: &Browser, base: &str) {
    browser.goto(&format!("{base}/#/jobs")).await;
    let help = browser.find("h1 a.help[data-help=\"jobs\"]").await;
    let mut attributes = Vec::new();
    for name in ["href", "target", "aria-label"] {
        attributes.push(help.attr(name).await.unwrap().unwrap_or_default());
    }
    assert_eq!(attributes[0], "/docs/guides/console.html#jobs");
    assert_eq!(attributes[1], "_blank");
    assert!(
        attributes[2].starts_with("Help on this page"),
        "a label in words, not only a question mark: {attributes:?}"
    );
    let opened = browser
        .run(
            "const page = await fetch(document.querySelector('h1 a.help').href);
             return [page.status, (await page.text()).includes('id=\"jobs\"')];",
            Vec::new(),
        )
        .await;
    assert_eq!(
        opened,
        json!([200, true]),
        "the link leads to the served page"
    );
}

pub(crate) async fn log_in(browser: &Browser, name: &str, password: &str) {
    browser.type_into("#login-name", name).await;
    browser.type_into("#login-password", password).await;
    browser.click("#login-submit").await;
    browser.find("#logout").await;
}

/// A GLUE_SHELL job whose script was saved twice (the script page shows its versions).
async fn script_job_with_two_versions(app: &TestApp) -> i64 {
    let job = app
        .create_job(json!({
            "app": "web", "handler": "nightly-report", "schedule_type": "NONE",
            "glue_type": "GLUE_SHELL", "glue_source": "echo first", "glue_remark": "first",
        }))
        .await;
    let (status, body) = app
        .call(
            reqwest::Method::PATCH,
            &format!("/api/jobs/{}", job.id),
            Some(json!({"glue_source": "echo second", "glue_remark": "second"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    job.id
}

/// The job form: a bad cron expression's field is named beside it (live and on saving), a
/// good one's next fires are listed; saved and started.
async fn create_job_through_the_form(browser: &Browser, app: &TestApp, base: &str) -> i64 {
    browser.goto(&format!("{base}/#/jobs")).await;
    browser.click("#new-job").await;
    browser.find("#job-form").await;
    browser.select("#job-app", "web").await;
    browser.type_into("#job-handler", "ticker").await;
    browser
        .type_into("#job-schedule_conf", "0 61 * * * ?")
        .await;
    browser
        .wait_for_text("#schedule-preview-error", "the bad field named", |text| {
            text.contains("minute") && text.contains("61")
        })
        .await;
    browser.click("#job-save").await;
    let beside = "[data-field=\"job-schedule_conf\"] .field-error";
    browser
        .wait_for_text(beside, "the save's error beside the field", |text| {
            text.contains("minute")
        })
        .await;
    browser.screenshot("job-form-error").await;
    browser
        .type_into("#job-schedule_conf", "*/3 * * * * ?")
        .await;
    browser.type_into("#job-time_zone", "Asia/Shanghai").await;
    let started = std::time::Instant::now();
    while browser.all("#schedule-preview li").await.len() != 5 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no preview of the next fires"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let first = browser
        .find("#schedule-preview li")
        .await
        .text()
        .await
        .unwrap();
    assert!(!first.is_empty(), "a fire time is shown");
    browser.screenshot("job-form-preview").await;
    browser.find("#job-start").await.click().await.unwrap();
    browser.click("#job-save").await;
    browser.wait_gone("#job-start").await;
    let (_, jobs) = app
        .call(
            reqwest::Method::GET,
            "/api/jobs?app=web&handler=ticker",
            None,
        )
        .await;
    let job = &jobs["items"][0];
    assert_eq!(job["status"], "RUNNING", "saved and started: {jobs}");
    assert_eq!(job["schedule_conf"], "*/3 * * * * ?");
    assert_eq!(job["time_zone"], "Asia/Shanghai");
    job["id"].as_i64().expect("a job id")
}

/// The runs page fills as the job fires; returns the log id of a run that is going.
async fn watch_runs_appear(browser: &Browser, base: &str, job: i64) -> i64 {
    browser.goto(&format!("{base}/#/runs?job={job}")).await;
    let going = "#runs-table tbody tr[data-outcome=\"DISPATCHED\"]";
    let started = std::time::Instant::now();
    loop {
        if let Some(row) = browser.all(going).await.into_iter().next() {
            let log_id = row
                .attr("data-run")
                .await
                .unwrap()
                .expect("rows carry their run");
            browser.screenshot("runs").await;
            return log_id.parse().expect("a log id");
        }
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "no run of job {job} appeared"
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        browser.click("#refresh-runs").await;
    }
}

/// The run page follows the log while the run goes, and kills it.
async fn follow_the_log_and_kill(
    browser: &Browser,
    app: &TestApp,
    base: &str,
    job: i64,
    log_id: i64,
) {
    browser.goto(&format!("{base}/#/runs/{log_id}")).await;
    let lines = |text: &str| {
        text.lines()
            .filter(|line| line.starts_with("tick "))
            .count()
    };
    let first = browser
        .wait_for_text("#run-log", "log lines", |text| lines(text) >= 2)
        .await;
    let later = browser
        .wait_for_text("#run-log", "more lines arriving", |text| {
            lines(text) >= lines(&first) + 3
        })
        .await;
    assert!(later.contains("tick 1"), "{later}");
    browser.screenshot("run-log").await;
    browser.click("#kill-run").await;
    browser.click("[data-confirm=\"yes\"]").await;
    let run = wait_for(
        Duration::from_secs(30),
        "the killed run's result",
        || async {
            let (_, runs) = app
                .call(reqwest::Method::GET, &format!("/api/jobs/{job}/runs"), None)
                .await;
            runs["items"]
                .as_array()
                .and_then(|runs| runs.iter().find(|run| run["log_id"] == log_id).cloned())
                .filter(|run| run["handle_code"].is_number())
        },
    )
    .await;
    assert_eq!(run["handle_code"], 500, "{run}");
    assert!(
        run["handle_msg"]
            .as_str()
            .unwrap_or_default()
            .contains("killed"),
        "{run}"
    );
    browser.find("h1 .badge.outcome-failed").await;
    browser
        .wait_for_text("#log-state", "the log done", |text| {
            !text.contains("Following")
        })
        .await;
}

/// Every page, as the operator sees it, saved for the record.
async fn screenshot_every_page(
    browser: &Browser,
    base: &str,
    job: i64,
    log_id: i64,
    script_job: i64,
) {
    let pages = [
        ("dashboard", "/#/".to_owned(), "#daily-chart"),
        ("jobs", "/#/jobs".to_owned(), "#jobs-table tbody tr"),
        ("job", format!("/#/jobs/{job}"), "#job-form"),
        (
            "script",
            format!("/#/jobs/{script_job}/script"),
            "[data-version=\"1\"]",
        ),
        ("runs-all", "/#/runs".to_owned(), "#runs-table tbody tr"),
        ("run", format!("/#/runs/{log_id}"), "#run-log"),
        ("executors", "/#/executors".to_owned(), "main table"),
        ("apps", "/#/apps".to_owned(), "main table"),
        ("replays", "/#/replays".to_owned(), "main h1"),
        ("shadow", "/#/shadow".to_owned(), "main h1"),
        ("audit", "/#/audit".to_owned(), "main table tbody tr"),
        ("users", "/#/users".to_owned(), "main table tbody tr"),
        ("tokens", "/#/tokens".to_owned(), "main table tbody tr"),
    ];
    for (name, path, shown) in pages {
        browser.goto(&format!("{base}{path}")).await;
        browser.find(shown).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        browser.screenshot(name).await;
    }
}

/// A narrow window hides the sidebar behind the menu button, which opens it.
async fn narrow_window_shows_the_menu(browser: &Browser, base: &str) {
    browser.resize(420, 860).await;
    browser.goto(&format!("{base}/#/jobs")).await;
    let nav = browser.find("nav#nav").await;
    assert!(
        !nav.is_displayed().await.unwrap(),
        "the sidebar is folded away"
    );
    browser.click("button.menu").await;
    assert!(nav.is_displayed().await.unwrap(), "the menu opens it");
    browser.screenshot("jobs-narrow").await;
    browser.resize(1366, 900).await;
}

/// A VIEW member in a Chinese browser: the console in Chinese, the job and its runs shown,
/// not one control that writes, and the writes they forge refused by the API.
async fn a_viewer_sees_no_write_controls(base: &str, job: i64, log_id: i64) {
    let browser = Browser::start("zh-CN").await;
    browser.goto(base).await;
    browser
        .wait_for_text("#login-submit", "the Chinese login", |text| text == "登录")
        .await;
    log_in(&browser, "viewer", "viewer-password-1").await;
    browser.goto(&format!("{base}/#/jobs")).await;
    browser.find(&format!("tr[data-job=\"{job}\"]")).await;
    assert!(
        browser.all("#new-job").await.is_empty(),
        "no new-job button"
    );
    assert!(
        browser.all("[data-action]").await.is_empty(),
        "no write control on any job"
    );
    browser.screenshot("jobs-viewer-zh-CN").await;
    browser.goto(&format!("{base}/#/runs/{log_id}")).await;
    browser.find("#run-log").await;
    assert!(browser.all("#kill-run").await.is_empty(), "no kill button");
    browser.goto(&format!("{base}/#/jobs/{job}")).await;
    browser.find("#job-form").await;
    assert!(browser.all("#job-save").await.is_empty(), "no save button");
    let forged = browser
        .run(
            "const answers = [];
             for (const headers of [{'X-Requested-With': 'kadence-console'}, {}]) {
               const answer = await fetch(`/api/jobs/${arguments[0]}/start`, {method: 'POST', headers});
               answers.push(answer.status);
             }
             return answers;",
            vec![Value::from(job)],
        )
        .await;
    assert_eq!(
        forged,
        json!([403, 403]),
        "a view member's forged start is refused, and a write without the console's header too"
    );
    browser.close().await;
}

on_sqlite_only!(an_operator_and_a_viewer_use_the_console_in_a_real_browser);
