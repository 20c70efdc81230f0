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
//! Then a slow-loris burst: more connections than the API takes requests at once, each
//! dribbling a login body a byte at a time. A signed-in request during the burst must be
//! answered 200, and every dribbler must be answered: 408 at the body deadline, or turned
//! away at once (429: its address's share of the public routes is taken; 503: their budget).

use serde_json::json;
use tokio::task::JoinSet;

use super::api::APP;
use super::stack::Stack;

/// The length the oversized requests declare.
const OVERSIZED: usize = 20 * 1024 * 1024;
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
        abuse.sent += 1;
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
        abuse.sent += 1;
        let (status, answer) = stack.api.post_raw("/api/jobs", body).await;
        let clear = names_the_limit(status, &answer, field);
        abuse.judge(what, status, &answer, clear);
    }
    abuse.sent += 1;
    let login = json!({"name": "admin", "password": "not the password"}).to_string();
    let (status, answer) = (stack.api)
        .post_anonymously("/api/auth/session", "text/plain", login.into_bytes())
        .await;
    let what = "a console login sent as text/plain";
    let clear = status == 415 && is_clear_refusal(status, &answer);
    abuse.judge(what, status, &answer, clear);
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
        self.answers.push(format!("{what}: {status} {shown}"));
        if clear {
            self.refused += 1;
        } else {
            self.failures
                .push(format!("{what}: answered {status} {shown}"));
        }
    }
}

/// The slow-loris burst (see the module docs).
async fn slow_loris(stack: &Stack, abuse: &mut Abuse) {
    let mut dribblers = JoinSet::new();
    for _ in 0..DRIBBLERS {
        dribblers.spawn(stack.api.dribbler("/api/auth/login", 10_000));
    }
    // Every dribbler has sent its head by then, and the body deadline (5 s) is far off.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let signed_in = stack.api.status_of("/api/auth/me").await;
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
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
