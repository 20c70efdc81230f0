//! XXL-JOB's HTTP protocol, as `xxl-job-core` speaks it (2.4 to 3.4 alike): JSON bodies,
//! POSTed, with the access token in the `XXL-JOB-ACCESS-TOKEN` header, and every answer, even
//! a refusal, HTTP 200 with `{"code": 200, "msg": …, "content": …}` (200 success, 500
//! failure). From 3.0 the payload is called `data` instead of `content`; both are read.
//!
//! Field names are XXL-JOB's own, spelling included (`logDateTim` beside `logDateTime`):
//! its executors read and write them with a JSON library that matches names exactly.

use serde::{Deserialize, Serialize};

/// The header both directions carry the access token in.
pub const ACCESS_TOKEN_HEADER: &str = "XXL-JOB-ACCESS-TOKEN";

/// `ReturnT.SUCCESS_CODE`.
pub const SUCCESS: i32 = 200;
/// `ReturnT.FAIL_CODE`.
pub const FAIL: i32 = 500;

/// Every answer: a code, a message, and for some calls a content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReturnT<T> {
    /// 200 success, 500 failure.
    pub code: i32,
    /// What went wrong, or a note.
    #[serde(default)]
    pub msg: Option<String>,
    /// The answer's payload (a `LogResult` for `log`), when it has one: `content` up to 2.4,
    /// `data` from 3.0.
    #[serde(default = "none", alias = "data")]
    pub content: Option<T>,
}

/// The default of an absent payload. Not `#[serde(default)]`: on a generic field that makes
/// serde demand `T: Default`, which `LogResult` and `String` payloads need not have.
fn none<T>() -> Option<T> {
    None
}

impl<T> ReturnT<T> {
    /// A success with nothing more to say.
    pub fn success() -> ReturnT<T> {
        ReturnT {
            code: SUCCESS,
            msg: None,
            content: None,
        }
    }

    /// A failure saying `msg`.
    pub fn fail(msg: impl Into<String>) -> ReturnT<T> {
        ReturnT {
            code: FAIL,
            msg: Some(msg.into()),
            content: None,
        }
    }

    /// Whether the call succeeded.
    pub fn is_success(&self) -> bool {
        self.code == SUCCESS
    }
}

/// `api/registry` and `api/registryRemove`: an executor of app `registry_key` at
/// `registry_value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryParam {
    /// `EXECUTOR` for executors (XXL-JOB also knows `ADMIN`).
    pub registry_group: String,
    /// The executor's app name (`xxl.job.executor.appname`).
    pub registry_key: String,
    /// The executor's address (`http://10.0.0.5:9999/`).
    pub registry_value: String,
}

/// One finished run in `api/callback` (the body is a list of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandleCallbackParam {
    /// The log id the run was triggered with.
    pub log_id: i64,
    /// The log date the run was triggered with (ms since the epoch).
    #[serde(rename = "logDateTim", default)]
    pub log_date_tim: i64,
    /// 200 success, 500 failure, 502 timeout.
    pub handle_code: i32,
    /// The handler's message, or why it failed.
    #[serde(default)]
    pub handle_msg: Option<String>,
}

/// The body of `run` (`trigger` from xxl-job 3.5): one run of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerParam {
    /// The job (an `int` in XXL-JOB).
    pub job_id: i32,
    /// The `@XxlJob` name of a BEAN job; empty for GLUE jobs.
    pub executor_handler: String,
    /// The job's parameters.
    pub executor_params: String,
    /// `SERIAL_EXECUTION`, `DISCARD_LATER` or `COVER_EARLY`.
    pub executor_block_strategy: String,
    /// Seconds; 0 for none.
    pub executor_timeout: i32,
    /// The run's log id: the name of its log file, and what its callback names.
    pub log_id: i64,
    /// When the run was triggered (ms since the epoch): the date folder of its log file.
    pub log_date_time: i64,
    /// `BEAN`, `GLUE_SHELL`, `GLUE_PYTHON`, `GLUE_NODEJS`, `GLUE_PHP`, `GLUE_POWERSHELL`.
    pub glue_type: String,
    /// The script of a GLUE job.
    pub glue_source: String,
    /// When the script last changed (ms since the epoch): the executor reloads it when this
    /// moves.
    pub glue_updatetime: i64,
    /// The shard of a broadcast, from 0.
    pub broadcast_index: i32,
    /// The number of shards of a broadcast (1 otherwise).
    pub broadcast_total: i32,
}

/// The body of `idleBeat` and `kill`: a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobParam {
    /// The job.
    pub job_id: i32,
}

/// The body of `log`: the lines of a run from a line on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogParam {
    /// The run's log date, as triggered.
    #[serde(rename = "logDateTim")]
    pub log_date_tim: i64,
    /// The run's log id.
    pub log_id: i64,
    /// The first line wanted, from 1.
    pub from_line_num: i32,
}

/// The content of `log`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogResult {
    /// The first line returned.
    pub from_line_num: i32,
    /// The last line returned: up to 2.4 the file's line count, from 3.0 the last line sent
    /// (0 for none). Either way it is below `from_line_num` when nothing is new.
    pub to_line_num: i32,
    /// The lines, each ending in a newline.
    #[serde(default)]
    pub log_content: Option<String>,
    /// Whether the log is complete (the executor never says so; the admin decides).
    #[serde(default)]
    pub is_end: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_use_xxl_jobs_field_names() {
        let callback: Vec<HandleCallbackParam> = serde_json::from_str(
            r#"[{"logId":7,"logDateTim":1700000000000,"handleCode":500,"handleMsg":"boom"}]"#,
        )
        .unwrap();
        assert_eq!(callback[0].log_date_tim, 1_700_000_000_000);
        assert_eq!(callback[0].handle_msg.as_deref(), Some("boom"));
        let log = serde_json::to_value(LogParam {
            log_date_tim: 1,
            log_id: 2,
            from_line_num: 3,
        })
        .unwrap();
        assert_eq!(
            log,
            serde_json::json!({"logDateTim": 1, "logId": 2, "fromLineNum": 3})
        );
        let answer: ReturnT<LogResult> = serde_json::from_str(
            r#"{"code":200,"msg":null,"content":{"fromLineNum":1,"toLineNum":2,"logContent":"a\nb\n","isEnd":false}}"#,
        )
        .unwrap();
        assert_eq!(answer.content.unwrap().to_line_num, 2);
        let three: ReturnT<LogResult> = serde_json::from_str(
            r#"{"code":200,"msg":"Success","data":{"fromLineNum":3,"toLineNum":0,"logContent":"","isEnd":false}}"#,
        )
        .unwrap();
        assert_eq!(three.content.unwrap().from_line_num, 3);
        let bare: ReturnT<LogResult> = serde_json::from_str(r#"{"code":500,"msg":"no"}"#).unwrap();
        assert!(!bare.is_success() && bare.content.is_none());
    }
}
