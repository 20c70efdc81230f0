//! Identifiers parsed at the boundary: a value of these types is valid by construction.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An identifier or name that failed to parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// A job id must be a positive integer.
    #[error("invalid job id {0:?}: use a positive integer")]
    JobId(String),
    /// A trigger id has the wrong shape.
    #[error("invalid trigger id {value:?}: {reason}")]
    TriggerId {
        /// The rejected input.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An app name has the wrong shape.
    #[error("invalid app name {0:?}: use 1 to 64 characters from A-Z a-z 0-9 _ -")]
    AppName(String),
    /// A topic prefix has the wrong shape.
    #[error("invalid topic prefix {0:?}: use 1 to 64 characters from A-Z a-z 0-9 . _ -")]
    TopicPrefix(String),
}

/// A job's id: a positive integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "i64")]
pub struct JobId(i64);

impl JobId {
    /// A job id; it must be positive.
    pub fn new(id: i64) -> Result<JobId, IdError> {
        if id > 0 {
            Ok(JobId(id))
        } else {
            Err(IdError::JobId(id.to_string()))
        }
    }

    /// The number.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl TryFrom<i64> for JobId {
    type Error = IdError;
    fn try_from(id: i64) -> Result<Self, Self::Error> {
        JobId::new(id)
    }
}

impl From<JobId> for i64 {
    fn from(id: JobId) -> i64 {
        id.0
    }
}

impl FromStr for JobId {
    type Err = IdError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.trim()
            .parse::<i64>()
            .ok()
            .and_then(|id| JobId::new(id).ok())
            .ok_or_else(|| IdError::JobId(text.to_owned()))
    }
}

// Display implementations honour width and alignment (`{:<20}`), for tables.
impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The id of one run: deterministic for scheduled fires, so that every party (database,
/// executors, results) recognises the same run.
///
/// | run | id |
/// |---|---|
/// | scheduled fire | `{job_id}-{scheduled_ms}` |
/// | broadcast shard | `{job_id}-{scheduled_ms}-{shard}` |
/// | retry n of a run | `{run id}-r{n}` |
/// | manual, API | `{job_id}-u{uuid v7, 32 hex digits}` |
/// | replay | `{replayed id}-p{replay id}` ([`TriggerId::replay`]) |
/// | backfill | the id the schedule gives the fire (`{job_id}-{scheduled_ms}`) |
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TriggerId(String);

/// Longest accepted trigger id.
const MAX_TRIGGER_ID_LEN: usize = 128;

impl TriggerId {
    /// The id of `job`'s fire scheduled at `scheduled_ms`.
    pub fn scheduled(job: JobId, scheduled_ms: i64) -> TriggerId {
        TriggerId(format!("{job}-{scheduled_ms}"))
    }

    /// Whether this is [`TriggerId::scheduled`]`(job, scheduled_ms)`, found without building
    /// that id (a fire batch asks it of every fire it stores).
    pub fn is_scheduled(&self, job: JobId, scheduled_ms: i64) -> bool {
        let (mut job_text, mut time_text) = (itoa::Buffer::new(), itoa::Buffer::new());
        let (job_text, time_text) = (job_text.format(job.get()), time_text.format(scheduled_ms));
        self.0.len() == job_text.len() + 1 + time_text.len()
            && self.0.starts_with(job_text)
            && self.0.ends_with(time_text)
            && self.0.as_bytes()[job_text.len()] == b'-'
    }

    /// The id of shard `shard` of `job`'s broadcast scheduled at `scheduled_ms`.
    pub fn shard(job: JobId, scheduled_ms: i64, shard: u32) -> TriggerId {
        TriggerId(format!("{job}-{scheduled_ms}-{shard}"))
    }

    /// The id of shard `shard` of this run when it is broadcast: `{id}-{shard}` (for a
    /// scheduled fire the same as [`TriggerId::shard`]).
    pub fn shard_of(&self, shard: u32) -> TriggerId {
        TriggerId(format!("{}-{shard}", self.0))
    }

    /// The id of retry `attempt` of this run.
    pub fn retry(&self, attempt: u32) -> TriggerId {
        TriggerId(format!("{}-r{attempt}", self.0))
    }

    /// A fresh, unique id for a manual or API trigger of `job`.
    pub fn fresh(job: JobId) -> TriggerId {
        TriggerId(format!("{job}-u{}", uuid::Uuid::now_v7().simple()))
    }

    /// The id of this trigger's replay by replay `replay_id`, where it is the `position`-th
    /// trigger replayed: `{id}-p{replay_id}`, which starts with the job id like the original
    /// and differs for each replay of it. An original too long to extend (ids are at most 128
    /// characters) gives `{job}-p{replay_id}-x{position}` instead, unique within the replay.
    pub fn replay(&self, replay_id: i64, position: usize) -> TriggerId {
        let extended = format!("{}-p{replay_id}", self.0);
        if extended.len() <= MAX_TRIGGER_ID_LEN {
            return TriggerId(extended);
        }
        TriggerId(format!("{}-p{replay_id}-x{position}", self.job_id()))
    }

    /// Parses an id received from outside (a record, a request).
    pub fn parse(text: &str) -> Result<TriggerId, IdError> {
        let fail = |reason| IdError::TriggerId {
            value: text.to_owned(),
            reason,
        };
        if text.len() < 3 || text.len() > MAX_TRIGGER_ID_LEN {
            return Err(fail("use 3 to 128 characters"));
        }
        if !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(fail("use only A-Z a-z 0-9 - _"));
        }
        let (job, rest) = text
            .split_once('-')
            .ok_or_else(|| fail("it must start with the job id and a dash"))?;
        if rest.is_empty()
            || job.parse::<JobId>().is_err()
            || !job.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(fail("it must start with the job id and a dash"));
        }
        Ok(TriggerId(text.to_owned()))
    }

    /// The job this run belongs to.
    pub fn job_id(&self) -> JobId {
        let digits = self.0.split('-').next().unwrap_or_default();
        // Parsing guaranteed the prefix is a positive job id.
        JobId(digits.parse().unwrap_or(1))
    }

    /// The scheduled time the id names, when it has the scheduled form `{job}-{ms}` or a
    /// form built on it (`{job}-{ms}-{shard}`, a retry or a replay of one); `None` for a
    /// manual or API trigger's fresh id. Only the id's text: that the run was scheduled then
    /// is for the caller to know.
    pub fn scheduled_ms(&self) -> Option<i64> {
        let time = self.0.split('-').nth(1)?;
        if time.is_empty() || !time.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        time.parse().ok()
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for TriggerId {
    type Err = IdError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        TriggerId::parse(text)
    }
}

impl TryFrom<String> for TriggerId {
    type Error = IdError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        TriggerId::parse(&text)
    }
}

impl From<TriggerId> for String {
    fn from(id: TriggerId) -> String {
        id.0
    }
}

impl AsRef<str> for TriggerId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TriggerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// An executor app's name (XXL-JOB's executor group), part of Kafka topic and group names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AppName(String);

impl AppName {
    /// Parses an app name: 1–64 of `A-Z a-z 0-9 _ -` (dots are left out so that topic names
    /// stay unambiguous: `{prefix}.triggers.{app}`).
    pub fn parse(text: &str) -> Result<AppName, IdError> {
        let valid = (1..=64).contains(&text.len())
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if valid {
            Ok(AppName(text.to_owned()))
        } else {
            Err(IdError::AppName(text.to_owned()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for AppName {
    type Err = IdError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        AppName::parse(text)
    }
}

impl TryFrom<String> for AppName {
    type Error = IdError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        AppName::parse(&text)
    }
}

impl From<AppName> for String {
    fn from(name: AppName) -> String {
        name.0
    }
}

impl fmt::Display for AppName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_positive() {
        assert_eq!(JobId::new(7).unwrap().get(), 7);
        assert!(JobId::new(0).is_err());
        assert!(JobId::new(-3).is_err());
        assert_eq!("42".parse::<JobId>().unwrap().get(), 42);
        assert!("4x".parse::<JobId>().is_err());
    }

    #[test]
    fn the_scheduled_time_is_read_back_from_the_ids_that_name_one() {
        let job = JobId::new(12).unwrap();
        let scheduled = TriggerId::scheduled(job, 1_767_225_600_000);
        assert_eq!(scheduled.scheduled_ms(), Some(1_767_225_600_000));
        assert_eq!(TriggerId::shard(job, 5_000, 3).scheduled_ms(), Some(5_000));
        assert_eq!(scheduled.retry(2).scheduled_ms(), Some(1_767_225_600_000));
        assert_eq!(TriggerId::fresh(job).scheduled_ms(), None);
        assert_eq!(TriggerId::parse("12-p7-x3").unwrap().scheduled_ms(), None);
        assert_eq!(
            TriggerId::parse("12-99999999999999999999")
                .unwrap()
                .scheduled_ms(),
            None
        );
    }

    #[test]
    fn an_id_is_known_as_the_scheduled_form_only_when_it_is_exactly_that() {
        let job = JobId::new(12).unwrap();
        assert!(TriggerId::scheduled(job, 5_000).is_scheduled(job, 5_000));
        assert!(TriggerId::scheduled(job, -7).is_scheduled(job, -7));
        let other_job = JobId::new(1).unwrap();
        let not = [
            (TriggerId::scheduled(job, 5_000), other_job, 5_000),
            (TriggerId::scheduled(job, 5_000), job, 500),
            (TriggerId::scheduled(job, 5_000), job, 50_000),
            (TriggerId::shard(job, 5_000, 3), job, 5_000),
            (TriggerId::scheduled(job, 5_000).retry(1), job, 5_000),
            (TriggerId::parse("012-5000").unwrap(), job, 5_000),
            (TriggerId::parse("12-05000").unwrap(), job, 5_000),
            (TriggerId::fresh(job), job, 5_000),
        ];
        for (id, job, at_ms) in not {
            assert!(!id.is_scheduled(job, at_ms), "{id} is not {job}-{at_ms}");
        }
    }

    #[test]
    fn deterministic_trigger_ids() {
        let job = JobId::new(12).unwrap();
        let scheduled = TriggerId::scheduled(job, 1_767_225_600_000);
        assert_eq!(scheduled.as_str(), "12-1767225600000");
        assert_eq!(TriggerId::shard(job, 5_000, 3).as_str(), "12-5000-3");
        assert_eq!(
            TriggerId::scheduled(job, 5_000).shard_of(3),
            TriggerId::shard(job, 5_000, 3)
        );
        assert_eq!(scheduled.retry(2).as_str(), "12-1767225600000-r2");
        let fresh = TriggerId::fresh(job);
        assert!(
            fresh.as_str().starts_with("12-u") && fresh.as_str().len() == 36,
            "{fresh}"
        );
        assert_ne!(fresh, TriggerId::fresh(job));
        for id in [&scheduled, &fresh] {
            let parsed = TriggerId::parse(id.as_str()).unwrap();
            assert_eq!(&parsed, id);
            assert_eq!(parsed.job_id(), job);
        }
    }

    #[test]
    fn a_replay_id_extends_the_original_or_falls_back_within_the_length_limit() {
        let original = TriggerId::scheduled(JobId::new(42).unwrap(), 1_767_225_600_000);
        let replay = original.replay(7, 0);
        assert_eq!(replay.as_str(), "42-1767225600000-p7");
        assert_eq!(TriggerId::parse(replay.as_str()), Ok(replay.clone()));
        assert_eq!(original.replay(7, 0), replay, "deterministic");
        assert_ne!(original.replay(8, 0), replay, "another replay, another id");
        let long = TriggerId::parse(&format!("42-{}", "a".repeat(125))).unwrap();
        let fallback = long.replay(7, 3);
        assert_eq!(fallback.as_str(), "42-p7-x3");
        assert_eq!(fallback.job_id(), JobId::new(42).unwrap());
    }

    #[test]
    fn malformed_trigger_ids_are_refused() {
        for bad in [
            "",
            "12",
            "12-",
            "-5",
            "0-5",
            "x-5",
            "12-5 6",
            "12-5/6",
            &"1-".repeat(100),
        ] {
            assert!(TriggerId::parse(bad).is_err(), "{bad:?} accepted");
        }
        let error = TriggerId::parse("abc-1").unwrap_err().to_string();
        assert!(error.contains("must start with the job id"), "{error}");
    }

    #[test]
    fn every_constructor_parses_back_with_its_job() {
        let job = JobId::new(9_007).unwrap();
        let scheduled = TriggerId::scheduled(job, 1_767_225_600_000);
        for id in [
            scheduled.clone(),
            TriggerId::shard(job, 1_767_225_600_000, 15),
            scheduled.retry(3),
            TriggerId::shard(job, 5, 0).retry(1),
            TriggerId::fresh(job),
            TriggerId::fresh(job).retry(2),
        ] {
            let text: String = id.clone().into();
            assert_eq!(text.parse::<TriggerId>().unwrap(), id);
            assert_eq!(TriggerId::try_from(text).unwrap(), id);
            assert_eq!(id.job_id(), job);
            assert_eq!(id.to_string(), id.as_ref());
        }
        assert_eq!(job.to_string(), "9007");
        assert_eq!(
            TriggerId::parse("00012-x").unwrap().job_id(),
            JobId::new(12).unwrap()
        );
    }

    #[test]
    fn trigger_id_limits() {
        let longest = format!("1-{}", "a".repeat(126));
        assert!(TriggerId::parse(&longest).is_ok());
        assert!(TriggerId::parse(&format!("{longest}a")).is_err());
        assert!(TriggerId::parse("1-a").is_ok());
        for bad in ["+1-a", "1_-a", "99999999999999999999-1", "1-ü"] {
            assert!(TriggerId::parse(bad).is_err(), "{bad:?} accepted");
        }
        let error = TriggerId::parse("12 5").unwrap_err().to_string();
        assert_eq!(
            error,
            "invalid trigger id \"12 5\": use only A-Z a-z 0-9 - _"
        );
    }

    #[test]
    fn ids_are_validated_when_deserialised() {
        // serde_json stands in for any serde format: the checks live in the types.
        let job: JobId = serde_json::from_str("42").unwrap();
        assert_eq!(serde_json::to_string(&job).unwrap(), "42");
        assert!(serde_json::from_str::<JobId>("0").is_err());
        let id: TriggerId = serde_json::from_str("\"42-1000\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"42-1000\"");
        let error = serde_json::from_str::<TriggerId>("\"x-1\"").unwrap_err();
        assert!(error.to_string().contains("invalid trigger id"), "{error}");
        let app: AppName = serde_json::from_str("\"billing\"").unwrap();
        assert_eq!(app.as_str(), "billing");
        assert!(serde_json::from_str::<AppName>("\"a.b\"").is_err());
        assert_eq!(
            JobId::new(0).unwrap_err().to_string(),
            "invalid job id \"0\": use a positive integer"
        );
    }

    #[test]
    fn app_names() {
        let app = AppName::parse("billing-eu_1").unwrap();
        assert_eq!(
            format!("[{app:<14}]"),
            "[billing-eu_1  ]",
            "Display pads for tables"
        );
        for bad in ["", "a.b", "a b", "ü", &"a".repeat(65)] {
            assert!(AppName::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            AppName::parse("a.b").unwrap_err().to_string(),
            "invalid app name \"a.b\": use 1 to 64 characters from A-Z a-z 0-9 _ -"
        );
    }
}
