//! The abusive requests `hostile-input` sends the API, each of which must get a clear 4xx
//! (a status and a JSON body naming what is wrong) without hurting the node: a body declared
//! 20 MiB long (several times, answered before the rest is sent), nesting far deeper than
//! any job has, invalid UTF-8, params past their limit, thousands of jobs in one request, an
//! id no integer holds, a job whose alarm webhook is on loopback (a way into the node's own
//! network), a console login sent as `text/plain` (what a cross-site form can send), and jobs
//! whose fields are within the body limit but over their own (an author of 400 000
//! characters, 3 000 alarm addresses, a script remark of 50 KB), which must be refused naming
//! the field and its limit. The scheduler's resident memory is read before and after.
//!
//! Then two floods, each one case: [`FLOOD`] wrong logins of one made-up user (the first few
//! answered 401, the rest 429 with `Retry-After` while the address waits) and [`FLOOD`]
//! writes with a made-up token (401). Each must be refused clearly throughout and stand in
//! the audit trail as one entry per status whose counts add up to the flood (the token known
//! only by its fingerprint), not as an entry per request.
//!
//! Then a slow-loris burst: more connections than the API takes requests at once, each
//! dribbling a login body a byte at a time. A signed-in request during the burst must be
//! answered 200, and every dribbler must be answered: 408 at the body deadline, or turned
//! away at once (429: its address's share of the public routes is taken; 503: their budget).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::api::APP;
use super::stack::Stack;

/// The length the oversized requests declare.
const OVERSIZED: usize = 20 * 1024 * 1024;
/// Requests in each flood.
const FLOOD: usize = 20;
/// Connections in the slow-loris burst: more than the API's whole budget of requests at once
/// (`api.max_concurrent_requests`, 64), which they filled before it had one of its own for
/// the routes anyone may call.
const DRIBBLERS: usize = 70;

/// What the API answered.
pub struct Abuse {
    /// Requests sent.
    pub sent: usize,
    /// Those answered 4xx with an error message.
    pub refused: usize,
    /// Requests answered otherwise.
    pub failures: Vec<String>,
    /// Each request's answer, for the details.
    pub answers: Vec<String>,
    /// The scheduler's resident memory before and after, e.g. "61 MiB → 63 MiB".
    pub memory: String,
    /// What the slow-loris burst got, e.g. "signed-in request 200; dribblers 2 × 408, 68 × 429".
    pub slow_loris: String,
}

/// The requests but the oversized ones: what each is, its path and its body (JSON, or
/// meant to be).
fn requests() -> Vec<(String, &'static str, Vec<u8>)> {
    let job = |params: serde_json::Value| json!({"app": APP, "handler": "noop", "schedule_type": "NONE", "params": params});

    let depth = 100_000;
    let nested = format!(
        r#"{{"app":"{APP}","handler":"noop","params":{}{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let mut requests: Vec<(String, &'static str, Vec<u8>)> = Vec::new();
    let thousands: Vec<serde_json::Value> = (0..5_000).map(|_| job(json!(""))).collect();
    requests.extend([
        (
            format!("{depth} levels of nesting"),
            "/api/jobs",
            nested.into_bytes(),
        ),
        (
            "invalid UTF-8".to_owned(),
            "/api/jobs",
            b"{\"app\":\"\xff\xfe\xfd\",\"handler\":\"noop\"}".to_vec(),
        ),
        (
            "params of 200 KiB".to_owned(),
            "/api/jobs",
            job(json!("P".repeat(200 * 1024))).to_string().into_bytes(),
        ),
        (
            "5 000 jobs in one request".to_owned(),
            "/api/jobs",
            serde_json::to_vec(&thousands).expect("JSON"),
        ),
        (
            "a job id no integer holds".to_owned(),
            "/api/jobs/99999999999999999999999999/trigger",
            b"{}".to_vec(),
        ),
        (
            "a job whose alarm webhook is on loopback".to_owned(),
            "/api/jobs",
            json!({"app": APP, "handler": "noop", "schedule_type": "NONE",
                "alarm_webhook": "http://127.0.0.1:22/"})
            .to_string()
            .into_bytes(),
        ),
    ]);
    requests
}

/// Jobs with a field over its limit, each within the body limit: what each is, the field the
/// refusal must name, and the body.
fn oversized_fields() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let job = |field: &str, value: serde_json::Value| {
        let mut job = json!({"app": APP, "handler": "noop", "schedule_type": "NONE",
            "glue_type": "GLUE_SHELL", "glue_source": "echo hostile"});
        job[field] = value;
        job.to_string().into_bytes()
    };
    let emails: Vec<String> = (0..3_000).map(|n| format!("a{n}@example.com")).collect();
    vec![
        (
            "an author of 400 000 characters",
            "author",
            job("author", json!("a".repeat(400_000))),
        ),
        (
            "3 000 alarm e-mail addresses",
            "alarm_emails",
            job("alarm_emails", json!(emails)),
        ),
        (
            "a script remark of 50 KB",
            "glue_remark",
            job("glue_remark", json!("r".repeat(50_000))),
        ),
    ]
}

/// A 400 naming `field` and its limit.
fn names_the_limit(status: u16, answer: &str, field: &str) -> bool {
    status == 400
        && serde_json::from_str::<serde_json::Value>(answer).is_ok_and(|body| {
            body["field"] == field
                && body["error"]
                    .as_str()
                    .is_some_and(|error| error.contains("; the limit is "))
        })
}

/// Sends every request and judges the answers.
pub async fn abuse_the_api(stack: &Stack) -> Abuse {
    let before = stack.scheduler_rss_mib();
    let mut abuse = Abuse {
        sent: 0,
        refused: 0,
        failures: Vec::new(),
        answers: Vec::new(),
        memory: String::new(),
        slow_loris: String::new(),
    };
    // A body declared 20 MiB long (of which the first 600 KiB are sent, past the 512 KiB
    // limit), five times: refused without the rest being read.
    let start = format!(r#"{{"app":"{APP}","handler":"noop","params":""#);
    let mut sent = start.into_bytes();
    sent.resize(600 * 1024, b'A');
    let oversized = (1..=5).map(|copy| (format!("a 20 MiB body ({copy} of 5)"), None));
    let others = requests()
        .into_iter()
        .map(|(what, path, body)| (what, Some((path, body))));
    for (what, request) in oversized.chain(others) {
        let (status, answer) = match request {
            None => {
                (stack.api)
                    .post_declaring("/api/jobs", OVERSIZED, &sent)
                    .await
            }
            Some((path, body)) => stack.api.post_raw(path, body).await,
        };
        let clear = is_clear_refusal(status, &answer);
        abuse.judge(&what, status, &answer, clear);
    }
    for (what, field, body) in oversized_fields() {
        let (status, answer) = stack.api.post_raw("/api/jobs", body).await;
        let clear = names_the_limit(status, &answer, field);
        abuse.judge(what, status, &answer, clear);
    }
    let login = json!({"name": "admin", "password": "not the password"}).to_string();
    let (status, answer) = (stack.api)
        .post_anonymously("/api/auth/session", "text/plain", login.into_bytes())
        .await;
    let what = "a console login sent as text/plain";
    let clear = status == 415 && is_clear_refusal(status, &answer);
    abuse.judge(what, status, &answer, clear);
    login_flood(stack, &mut abuse).await;
    bad_token_flood(stack, &mut abuse).await;
    slow_loris(stack, &mut abuse).await;
    let after = stack.scheduler_rss_mib();
    abuse.memory = format!("{before} MiB → {after} MiB");
    abuse
}

/// A 4xx whose JSON body says what is wrong.
fn is_clear_refusal(status: u16, answer: &str) -> bool {
    (400..500).contains(&status)
        && serde_json::from_str::<serde_json::Value>(answer).is_ok_and(|body| {
            body["error"]
                .as_str()
                .is_some_and(|error| !error.is_empty())
        })
}

impl Abuse {
    /// Notes `what` was answered `status` with `answer`, refused as it should be if `clear`.
    fn judge(&mut self, what: &str, status: u16, answer: &str, clear: bool) {
        let shown: String = answer.chars().take(160).collect();
        self.note(what, format!("{status} {shown}"), clear);
    }

    /// Notes the case `what` ended as `outcome`, as it should if `clear`.
    fn note(&mut self, what: &str, outcome: String, clear: bool) {
        self.sent += 1;
        if clear {
            self.refused += 1;
        } else {
            self.failures.push(format!("{what}: {outcome}"));
        }
        self.answers.push(format!("{what}: {outcome}"));
    }
}

/// What a flood got: how many of each status, and whether every answer was a clear refusal
/// of an expected status.
fn tally(answers: &[(u16, String)], expected: &[u16]) -> (BTreeMap<u16, usize>, bool) {
    let mut statuses = BTreeMap::<u16, usize>::new();
    let mut clear = true;
    for (status, answer) in answers {
        *statuses.entry(*status).or_default() += 1;
        clear &= expected.contains(status) && is_clear_refusal(*status, answer);
    }
    (statuses, clear)
}

/// The audit entries of `query` that `like` picks, once their counts add up to [`FLOOD`]
/// (counts are brought up to date within a second or so); what there is after 15 s
/// otherwise.
async fn flood_entries(stack: &Stack, query: &str, like: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut entries = Vec::new();
    for _ in 0..30 {
        let page = (stack.api)
            .call(
                reqwest::Method::GET,
                &format!("/api/audit?{query}"),
                Value::Null,
            )
            .await;
        entries = (page["items"].as_array().into_iter().flatten())
            .filter(|entry| like(entry))
            .cloned()
            .collect();
        if counted(&entries) == FLOOD as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    entries
}

/// The refusals `entries` stand for.
fn counted(entries: &[Value]) -> u64 {
    (entries.iter())
        .map(|entry| entry["details"]["count"].as_u64().unwrap_or(0))
        .sum()
}

/// A flood's outcome: its statuses and the entries standing for it; `aggregated` when there
/// is one entry per status and their counts add up to the flood.
fn flood_outcome(statuses: &BTreeMap<u16, usize>, entries: &[Value]) -> (String, bool) {
    let answered: Vec<String> = (statuses.iter())
        .map(|(status, count)| format!("{count} × {status}"))
        .collect();
    let aggregated = entries.len() == statuses.len() && counted(entries) == FLOOD as u64;
    let outcome = format!(
        "{}; {} audit {} counting {}",
        answered.join(", "),
        entries.len(),
        if entries.len() == 1 {
            "entry"
        } else {
            "entries"
        },
        counted(entries)
    );
    (outcome, aggregated)
}

/// [`FLOOD`] wrong logins of a made-up user from one address: refused (401, then 429 while
/// the address waits), and one audit entry per status.
async fn login_flood(stack: &Stack, abuse: &mut Abuse) {
    let name = "mallory";
    let body = json!({"name": name, "password": "not the password"}).to_string();
    let mut answers = Vec::new();
    for _ in 0..FLOOD {
        let answer = (stack.api)
            .post_anonymously(
                "/api/auth/login",
                "application/json",
                body.clone().into_bytes(),
            )
            .await;
        answers.push(answer);
    }
    let (statuses, clear) = tally(&answers, &[401, 429]);
    let entries = flood_entries(stack, &format!("user={name}"), |_| true).await;
    let (outcome, aggregated) = flood_outcome(&statuses, &entries);
    let what = format!("a flood of {FLOOD} wrong logins of one user");
    abuse.note(
        &what,
        outcome,
        clear && statuses.contains_key(&429) && aggregated,
    );
}

/// [`FLOOD`] writes with a made-up token: refused (401), and one audit entry counting them,
/// carrying the token's fingerprint and not the token.
async fn bad_token_flood(stack: &Stack, abuse: &mut Abuse) {
    let token = format!("kdn_{}", "5a".repeat(32));
    let fingerprint = format!(
        "sha256:{}",
        &kadence_scheduler::operations::auth::token_hash(&token)[..12]
    );
    let job = json!({"app": APP, "handler": "noop", "schedule_type": "NONE"}).to_string();
    let mut answers = Vec::new();
    for _ in 0..FLOOD {
        let answer = (stack.api)
            .post_with_token("/api/jobs", &token, job.clone().into_bytes())
            .await;
        answers.push(answer);
    }
    let (statuses, clear) = tally(&answers, &[401]);
    let entries = flood_entries(stack, "target=/api/jobs", |entry| {
        entry["details"]["token"] == fingerprint.as_str()
    })
    .await;
    let (outcome, aggregated) = flood_outcome(&statuses, &entries);
    let secret_kept = !(entries.iter()).any(|entry| entry.to_string().contains("5a5a5a5a"));
    let what = format!("a flood of {FLOOD} writes with a made-up token");
    abuse.note(&what, outcome, clear && aggregated && secret_kept);
}

/// The slow-loris burst (see the module docs).
async fn slow_loris(stack: &Stack, abuse: &mut Abuse) {
    let mut dribblers = JoinSet::new();
    for _ in 0..DRIBBLERS {
        dribblers.spawn(stack.api.dribbler("/api/auth/login", 10_000));
    }
    // Every dribbler has sent its head by then, and the body deadline (5 s) is far off.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let signed_in = stack.api.status_of("/api/auth/me").await;
    let mut statuses = BTreeMap::<u16, usize>::new();
    while let Some(status) = dribblers.join_next().await {
        *statuses.entry(status.unwrap_or(0)).or_default() += 1;
    }
    let answers: Vec<String> = (statuses.iter())
        .map(|(status, count)| format!("{count} × {status}"))
        .collect();
    abuse.slow_loris = format!(
        "signed-in request {signed_in}; dribblers {}",
        answers.join(", ")
    );
    if signed_in != 200 {
        abuse.failures.push(format!(
            "a signed-in request during a slow-loris burst of {DRIBBLERS} login dribblers was \
             answered {signed_in}, not 200"
        ));
    }
    if statuses
        .keys()
        .any(|status| ![408, 429, 503].contains(status))
    {
        abuse.failures.push(format!(
            "the slow-loris dribblers were answered {}, where 408, 429 or 503 was due",
            answers.join(", ")
        ));
    }
}
