//! The abusive requests `hostile-input` sends the API, each of which must get a clear 4xx
//! (a status and a JSON body naming what is wrong) without hurting the node: a body declared
//! 20 MiB long (several times, answered before the rest is sent), nesting far deeper than
//! any job has, invalid UTF-8, params past their limit, thousands of jobs in one request, an
//! id no integer holds. The scheduler's resident memory is read before and after.

use serde_json::json;

use super::api::APP;
use super::stack::Stack;

/// The length the oversized requests declare.
const OVERSIZED: usize = 20 * 1024 * 1024;

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
    ]);
    requests
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
        let clear = (400..500).contains(&status)
            && serde_json::from_str::<serde_json::Value>(&answer).is_ok_and(|body| {
                body["error"]
                    .as_str()
                    .is_some_and(|error| !error.is_empty())
            });
        let shown: String = answer.chars().take(160).collect();
        abuse.answers.push(format!("{what}: {status} {shown}"));
        if clear {
            abuse.refused += 1;
        } else {
            abuse
                .failures
                .push(format!("{what}: answered {status} {shown}"));
        }
    }
    let after = stack.scheduler_rss_mib();
    abuse.memory = format!("{before} MiB → {after} MiB");
    abuse
}
