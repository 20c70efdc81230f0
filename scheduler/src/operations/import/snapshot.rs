//! What the CLI reads from an XXL-JOB database and posts: [`XxlSnapshot`], the rows of
//! `xxl_job_group`, `xxl_job_info`, `xxl_job_logglue` and `xxl_job_user` as XXL-JOB stores
//! them (strategy names as strings, lists comma-separated, `DATETIME`s as the server's local
//! time `YYYY-MM-DD HH:MM:SS`), and the [`ImportOptions`] of the command. Passwords and login
//! tokens are never read.
//!
//! Column names moved between versions; the reader (`crate::cli::xxl_reader`) fills one shape
//! from all of them: the group's title is `title` up to 3.4 and `name` from 3.5; the job's
//! description `job_desc` up to 3.4 and `name` from 3.5; before 2.3 a job had only
//! `job_cron` (read as schedule type CRON).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::model::Access;

/// The rows an import reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct XxlSnapshot {
    /// Executor groups (`xxl_job_group`).
    #[serde(default)]
    pub groups: Vec<XxlGroup>,
    /// Jobs (`xxl_job_info`).
    #[serde(default)]
    pub jobs: Vec<XxlJob>,
    /// Script versions (`xxl_job_logglue`): at most the newest 30 per job.
    #[serde(default)]
    pub glue_versions: Vec<XxlGlueVersion>,
    /// Users (`xxl_job_user`), without passwords.
    #[serde(default)]
    pub users: Vec<XxlUser>,
}

/// A row of `xxl_job_group`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct XxlGroup {
    /// `id`.
    pub id: i64,
    /// `app_name`: the executors' AppName.
    pub app_name: String,
    /// `title` (`name` from 3.5).
    #[serde(default)]
    pub title: String,
    /// `address_type`: 0 automatic registration, 1 addresses entered by hand.
    #[serde(default)]
    pub address_type: i64,
    /// `address_list`, comma-separated.
    #[serde(default)]
    pub address_list: Option<String>,
    /// Whether the group has an `access_token` (3.5); the token itself is not read.
    #[serde(default)]
    pub has_access_token: bool,
}

/// A row of `xxl_job_info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct XxlJob {
    /// `id`.
    pub id: i64,
    /// `job_group`: the group's id.
    pub job_group: i64,
    /// `job_desc` (`name` from 3.5).
    #[serde(default)]
    pub job_desc: String,
    /// `author`.
    #[serde(default)]
    pub author: Option<String>,
    /// `alarm_email`, comma-separated.
    #[serde(default)]
    pub alarm_email: Option<String>,
    /// `schedule_type`: CRON, FIX_RATE or NONE.
    #[serde(default)]
    pub schedule_type: Option<String>,
    /// `schedule_conf`: the cron expression or the rate in seconds.
    #[serde(default)]
    pub schedule_conf: Option<String>,
    /// `misfire_strategy`.
    #[serde(default)]
    pub misfire_strategy: Option<String>,
    /// `executor_route_strategy`.
    #[serde(default)]
    pub executor_route_strategy: Option<String>,
    /// `executor_handler`.
    #[serde(default)]
    pub executor_handler: Option<String>,
    /// `executor_param`.
    #[serde(default)]
    pub executor_param: Option<String>,
    /// `executor_block_strategy`.
    #[serde(default)]
    pub executor_block_strategy: Option<String>,
    /// `executor_timeout`, seconds.
    #[serde(default)]
    pub executor_timeout: i64,
    /// `executor_fail_retry_count`.
    #[serde(default)]
    pub executor_fail_retry_count: i64,
    /// `glue_type`.
    #[serde(default)]
    pub glue_type: Option<String>,
    /// `glue_source`.
    #[serde(default)]
    pub glue_source: Option<String>,
    /// `glue_remark`.
    #[serde(default)]
    pub glue_remark: Option<String>,
    /// `glue_updatetime`, the server's local time.
    #[serde(default)]
    pub glue_updatetime: Option<String>,
    /// `child_jobid`, comma-separated job ids.
    #[serde(default)]
    pub child_jobid: Option<String>,
    /// `trigger_status`: 1 running, 0 stopped.
    #[serde(default)]
    pub trigger_status: i64,
    /// How many rows `xxl_job_logglue` has for the job (the snapshot carries 30 at most).
    #[serde(default)]
    pub glue_versions_total: i64,
}

/// A row of `xxl_job_logglue`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct XxlGlueVersion {
    /// `id`: later versions have higher ids.
    pub id: i64,
    /// `job_id`.
    pub job_id: i64,
    /// `glue_type`.
    #[serde(default)]
    pub glue_type: Option<String>,
    /// `glue_source`.
    #[serde(default)]
    pub glue_source: Option<String>,
    /// `glue_remark`.
    #[serde(default)]
    pub glue_remark: String,
    /// `add_time`, the server's local time.
    #[serde(default)]
    pub add_time: Option<String>,
}

/// A row of `xxl_job_user`, without `password` and `token`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct XxlUser {
    /// `id`.
    pub id: i64,
    /// `username`.
    pub username: String,
    /// `role`: 1 admin, 0 normal user.
    pub role: i64,
    /// `permission`: comma-separated group ids a normal user may use.
    #[serde(default)]
    pub permission: Option<String>,
}

/// How the import maps what it cannot take over as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ImportOptions {
    /// Partitions of each new app's trigger topic (1–1024; default 3, see `crate::operations::import`).
    pub partitions: i32,
    /// IANA zone cron expressions and XXL-JOB's local times are read in (default UTC).
    pub time_zone: String,
    /// Jobs RUNNING in XXL-JOB are started (default false: every job is imported STOPPED).
    pub keep_state: bool,
    /// What an XXL-JOB user's permission on a group becomes on its app (default OPERATE).
    pub member_access: Access,
    /// Hours an imported user's reset token stays valid (default 168, a week).
    pub reset_token_hours: u32,
}

/// The default partition count of an imported app.
pub const DEFAULT_PARTITIONS: i32 = 3;
/// The default life of a password reset token, hours.
pub const DEFAULT_RESET_TOKEN_HOURS: u32 = 168;

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            partitions: DEFAULT_PARTITIONS,
            time_zone: "UTC".to_owned(),
            keep_state: false,
            member_access: Access::Operate,
            reset_token_hours: DEFAULT_RESET_TOKEN_HOURS,
        }
    }
}

/// A digest of a source row as serialised (its fields in declaration order): a second run
/// tells from it whether the row changed in XXL-JOB since it was imported.
pub fn fingerprint<T: Serialize>(row: &T) -> String {
    let bytes = serde_json::to_vec(row).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))[..16].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_changes_with_any_field() {
        let user = XxlUser {
            id: 2,
            username: "li".into(),
            role: 0,
            permission: Some("1".into()),
        };
        let same = fingerprint(&user.clone());
        assert_eq!(fingerprint(&user), same);
        let changed = XxlUser {
            permission: Some("1,2".into()),
            ..user
        };
        assert_ne!(fingerprint(&changed), same);
    }
}
