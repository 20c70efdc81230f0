//! Every text and list the API stores has a limit (`kadence_scheduler::domain::model::limits`): one
//! character, byte or entry over it is a 400 naming the field, its size and the limit; exactly
//! at it is taken and kept whole. Values at the limits are written in four-byte characters
//! where the limit counts characters, so MySQL's `VARCHAR` columns are shown to hold them.
//! An edit's audit entry stays bounded, and a refused one records no value at all. The XXL-JOB
//! import refuses the job over a limit with the reason and imports the rest.
//!
//! On every backend: what is proven is what the columns of each store take.

use kadence_scheduler::domain::model::limits::{
    self, ALARM_EMAIL, ALARM_EMAILS, APP_TITLE, AUTHOR, GLUE_REMARK, GLUE_SOURCE, JOB_NAME, Limit,
    PARAMS,
};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};
use kadence_tests::fixtures::Backend;

/// The app the tests' jobs are in.
const APP: &str = "limits";

/// A character that takes four bytes in UTF-8 (and in MySQL's utf8mb4).
const WIDE: &str = "😀";

/// A script job of [`APP`] with `fields` over its defaults.
fn job(fields: Value) -> Value {
    let mut job = json!({"app": APP, "handler": "ok", "schedule_type": "NONE",
        "glue_type": "GLUE_SHELL", "glue_source": "echo hello"});
    for (key, value) in fields.as_object().expect("fields are an object") {
        job[key] = value.clone();
    }
    job
}

/// `count` distinct alarm addresses.
fn addresses(count: usize) -> Vec<String> {
    (0..count)
        .map(|n| format!("oncall{n}@example.com"))
        .collect()
}

/// Asserts `answer` is a 400 about `limit.field` whose message is `message`.
fn assert_refused(limit: Limit, (status, answer): (u16, Value), message: &str) {
    let shown: String = answer.to_string().chars().take(300).collect();
    assert_eq!(status, 400, "{shown}");
    assert_eq!(answer["field"], json!(limit.field), "{shown}");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(message),
        "{error:?} should start {message:?}"
    );
}

async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    app.call(Method::POST, path, Some(body)).await
}

/// Creates the job `body` describes; answers it as the API shows it.
async fn created(app: &TestApp, body: Value) -> Value {
    let (status, answer) = post(app, "/api/jobs", body).await;
    let shown: String = answer.to_string().chars().take(300).collect();
    assert_eq!(status, 201, "{shown}");
    answer
}

/// One past each limit of the representative fields is refused, exactly at it is kept.
async fn job_fields_over_their_limits_are_refused_and_at_them_kept(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app(APP, 1).await;
    let over = |limit: Limit| WIDE.repeat(limit.max + 1);
    let longest_address = format!("{}@example.com", "x".repeat(ALARM_EMAIL.max - 12));
    let children: Vec<i64> = (1..=51).collect();
    let refusals = [
        (
            AUTHOR,
            json!({"author": "a".repeat(400_000)}),
            "author is 400000 characters long",
        ),
        (
            AUTHOR,
            json!({"author": over(AUTHOR)}),
            "author is 256 characters long",
        ),
        (
            JOB_NAME,
            json!({"name": over(JOB_NAME)}),
            "name is 256 characters long",
        ),
        (
            ALARM_EMAILS,
            json!({"alarm_emails": addresses(3000)}),
            "alarm_emails has 3000 entries",
        ),
        (
            ALARM_EMAILS,
            json!({"alarm_emails": addresses(21)}),
            "alarm_emails has 21 entries",
        ),
        (
            ALARM_EMAIL,
            json!({"alarm_emails": ["a@example.com", format!("x{longest_address}")]}),
            "alarm_emails[1] is 255 bytes long",
        ),
        (
            GLUE_REMARK,
            json!({"glue_remark": "r".repeat(50_000)}),
            "glue_remark is 50000 characters long",
        ),
        (
            GLUE_REMARK,
            json!({"glue_remark": over(GLUE_REMARK)}),
            "glue_remark is 256 characters long",
        ),
        (
            PARAMS,
            json!({"params": "p".repeat(PARAMS.max + 1)}),
            "params is 65537 bytes long",
        ),
        (
            GLUE_SOURCE,
            json!({"glue_source": "s".repeat(GLUE_SOURCE.max + 1)}),
            "glue_source is 262145 bytes long",
        ),
        (
            limits::CHILD_JOB_IDS,
            json!({"child_job_ids": children}),
            "child_job_ids has 51 entries",
        ),
        (
            limits::CHOICE.named("route_strategy"),
            json!({"route_strategy": "R".repeat(100_000)}),
            "route_strategy is 100000 characters long",
        ),
    ];
    for (limit, fields, size) in refusals {
        let answer = post(&app, "/api/jobs", job(fields)).await;
        let message = format!("{size}; the limit is {} {}", limit.max, limit.measure);
        assert_refused(limit, answer, &message);
    }
    assert_eq!(
        app.call(Method::GET, "/api/jobs", None).await.1["items"],
        json!([]),
        "nothing refused was stored"
    );

    let mut emails = addresses(ALARM_EMAILS.max - 1);
    emails.push(longest_address);
    let at_limits = job(json!({
        "author": WIDE.repeat(AUTHOR.max),
        "name": WIDE.repeat(JOB_NAME.max),
        "alarm_emails": emails,
        "glue_remark": WIDE.repeat(GLUE_REMARK.max),
        "params": "p".repeat(PARAMS.max),
        "glue_source": "s".repeat(GLUE_SOURCE.max),
    }));
    let answer = created(&app, at_limits.clone()).await;
    let id = answer["id"].as_i64().unwrap();
    let (status, stored) = app
        .call(Method::GET, &format!("/api/jobs/{id}"), None)
        .await;
    assert_eq!(status, 200);
    for field in [
        "author",
        "name",
        "alarm_emails",
        "glue_remark",
        "params",
        "glue_source",
    ] {
        assert_eq!(stored[field], at_limits[field], "{field} kept whole");
    }
    app.shutdown().await;
}

/// An edit's audit entry holds the definition before and after: with every field within its
/// limit it stays within twice the largest definition; a refused edit records no value.
async fn an_edits_audit_entry_stays_bounded(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app(APP, 1).await;
    let full = job(json!({
        "author": WIDE.repeat(AUTHOR.max),
        "params": "p".repeat(PARAMS.max),
        "glue_source": "s".repeat(GLUE_SOURCE.max),
    }));
    let id = created(&app, full).await["id"].as_i64().unwrap();
    let path = format!("/api/jobs/{id}");
    let (status, answer) = app
        .call(
            Method::PATCH,
            &path,
            Some(json!({"author": "a".repeat(400_000)})),
        )
        .await;
    assert_refused(
        AUTHOR,
        (status, answer),
        "author is 400000 characters long; the limit is 255 characters",
    );
    let (status, answer) = app
        .call(
            Method::PATCH,
            &path,
            Some(json!({"glue_source": "t".repeat(GLUE_SOURCE.max), "author": "someone"})),
        )
        .await;
    assert_eq!(status, 200, "{}", answer["error"]);

    let (status, trail) = app
        .call(Method::GET, &format!("/api/audit?target={path}"), None)
        .await;
    assert_eq!(status, 200);
    let edits: Vec<&Value> = (trail["items"].as_array().unwrap().iter())
        .filter(|entry| entry["action"] == "PATCH /api/jobs/{id}")
        .collect();
    let actions: Vec<&Value> = (trail["items"].as_array().unwrap().iter())
        .map(|entry| &entry["action"])
        .collect();
    assert_eq!(edits.len(), 2, "{actions:?}");
    let refused = edits.iter().find(|entry| entry["status"] == 400).unwrap();
    assert!(
        refused.to_string().len() < 1024,
        "a refused edit records no value: {refused}"
    );
    let saved = edits.iter().find(|entry| entry["status"] == 200).unwrap();
    let details = saved["details"].to_string();
    // Before and after, each with the largest script and params, and little else.
    let bound = 2 * (GLUE_SOURCE.max + PARAMS.max) + 32 * 1024;
    assert!(
        details.len() <= bound,
        "the audit entry of an edit is {} bytes, over {bound}",
        details.len()
    );
    assert_eq!(saved["details"]["after"]["author"], "someone");
    assert_eq!(
        saved["details"]["before"]["author"],
        json!(WIDE.repeat(AUTHOR.max))
    );
    app.shutdown().await;
}

/// Apps, kills, replays, schedule previews and the XXL-JOB import refuse what is over a limit
/// the same way; an app's title at its limit is kept whole.
async fn other_routes_refuse_texts_and_lists_over_their_limits(backend: Backend) {
    let app = spawn_app(backend).await;
    let title = |text: String| json!({"name": "titled", "partitions": 1, "title": text});
    assert_refused(
        APP_TITLE,
        post(&app, "/api/apps", title(WIDE.repeat(APP_TITLE.max + 1))).await,
        "title is 256 characters long; the limit is 255 characters",
    );
    let (status, answer) = post(&app, "/api/apps", title(WIDE.repeat(APP_TITLE.max))).await;
    assert_eq!(status, 201, "{answer}");
    let (_, apps) = app.call(Method::GET, "/api/apps", None).await;
    assert_eq!(apps["items"][0]["title"], json!(WIDE.repeat(APP_TITLE.max)));

    let id = created(
        &app,
        json!({"app": "titled", "handler": "ok", "schedule_type": "NONE"}),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    let kill = format!("/api/jobs/{id}/kill");
    assert_refused(
        limits::KILL_REASON,
        post(&app, &kill, json!({"reason": "r".repeat(256)})).await,
        "reason is 256 characters long; the limit is 255 characters",
    );
    let (status, answer) = post(&app, &kill, json!({"reason": "r".repeat(255)})).await;
    assert_eq!(status, 202, "{answer}");

    let replay = json!({"app": "titled", "from_ms": 1, "to_ms": 2, "dry_run": true,
        "job_ids": (1..=1001).collect::<Vec<i64>>()});
    assert_refused(
        limits::REPLAY_JOB_IDS,
        post(&app, "/api/replays", replay).await,
        "job_ids has 1001 entries; the limit is 1000 entries",
    );
    let preview = format!(
        "/api/schedules/preview?schedule_conf={}",
        "1".repeat(limits::SCHEDULE_CONF.max + 1)
    );
    assert_refused(
        limits::SCHEDULE_CONF,
        app.call(Method::GET, &preview, None).await,
        "schedule_conf is 256 characters long; the limit is 255 characters",
    );

    the_import_refuses_a_job_over_a_limit_and_takes_the_rest(&app).await;
    app.shutdown().await;
}

async fn the_import_refuses_a_job_over_a_limit_and_takes_the_rest(app: &TestApp) {
    let job = |id: i64, author: String| {
        json!({"id": id, "job_group": 1, "job_desc": format!("imported {id}"),
            "author": author, "schedule_type": "NONE", "executor_route_strategy": "FIRST",
            "executor_handler": "ok", "glue_type": "BEAN"})
    };
    let body = json!({"source": "xxl-job:elsewhere:3306/limits",
        "snapshot": {"groups": [{"id": 1, "app_name": "imported"}],
            "jobs": [job(1, "a".repeat(400_000)), job(2, "XXL".to_owned())]}});
    let (status, report) = post(app, "/api/imports/xxl-job", body).await;
    let shown: String = report.to_string().chars().take(500).collect();
    assert_eq!(status, 200, "{shown}");
    let row = |id: i64| {
        (report["rows"].as_array().unwrap().iter())
            .find(|row| row["kind"] == "JOB" && row["source_id"] == id)
            .unwrap_or_else(|| panic!("no row for job {id}: {shown}"))
            .clone()
    };
    let refused = row(1);
    assert_eq!(refused["action"], "REFUSE", "{refused}");
    let reason = refused["reason"].as_str().unwrap();
    assert!(
        reason.contains("author is 400000 characters long; the limit is 255 characters"),
        "{reason}"
    );
    assert_eq!(row(2)["action"], "CREATE");
    let (_, jobs) = app.call(Method::GET, "/api/jobs?app=imported", None).await;
    let names: Vec<&Value> = (jobs["items"].as_array().unwrap().iter())
        .map(|job| &job["name"])
        .collect();
    assert_eq!(names, [&json!("imported 2")]);
}

on_every_backend!(
    job_fields_over_their_limits_are_refused_and_at_them_kept,
    an_edits_audit_entry_stays_bounded,
    other_routes_refuse_texts_and_lists_over_their_limits,
);
