//! How large each text and list a user writes may be: one named [`Limit`] per field the API
//! takes and stores, each with the reason for its size. The API checks them when it reads a
//! request (a 400 naming the field, its size and the limit); the XXL-JOB import checks the
//! rows it maps with the same limits (see [`crate::operations::import`]).
//!
//! Why every field has one: what a user writes is copied far beyond its row. The audit trail
//! keeps a job's definition before and after every edit; every run row copies its job's
//! params and script; trigger records carry them through Kafka, where a record must stay
//! under the topic's `max.message.bytes` (1 MB by default); lists and the console show them
//! on every page. A field without a limit lets one request write megabytes, many times over.
//!
//! How sizes are counted:
//! - text people write and read (names, authors, remarks, titles, cron expressions) in
//!   characters (Unicode scalar values), as people count and as MySQL's `VARCHAR(n)` does;
//! - text machines read (params, scripts, URLs, e-mail addresses) in bytes of UTF-8, the unit
//!   of Kafka's record sizes and of the RFCs that bound addresses;
//! - lists in entries (and each entry by its own limit).
//!
//! No limit is above what its column holds on any backend ([`Limit::max_bytes`] against the
//! MySQL schema is a test below): PostgreSQL's and SQLite's `TEXT` hold any length; MySQL's and
//! MariaDB's `VARCHAR(n)` hold `n` characters, `TEXT` 65 535 bytes, `MEDIUMTEXT` 16 MiB, and a
//! character takes up to 4 bytes (utf8mb4). A value a column would cut or refuse is refused by
//! the API first, with a message, instead of a 500 from the database.
//!
//! Against XXL-JOB's columns (`xxl_job_info`, `xxl_job_group`): its `job_desc` and
//! `executor_handler` are `varchar(255)` (Kadence: the same 255), `author` `varchar(64)`
//! (Kadence 255: owners are often a team with a contact, and every XXL-JOB author fits),
//! `alarm_email` `varchar(255)` for the whole comma-separated list (Kadence: 20 addresses of
//! up to 254 bytes each), `executor_param` `varchar(512)` (Kadence 64 KiB: params feed
//! handlers that XXL-JOB users pass JSON to, and still fit every trigger record),
//! `glue_remark` `varchar(128)` (Kadence 255, a commit subject's room), `glue_source`
//! `mediumtext` (Kadence 256 KiB: scripts travel in every trigger record), `schedule_conf`
//! `varchar(128)` (Kadence 255), `child_jobid` `varchar(255)` (about 40 ids; Kadence 50), and
//! `xxl_job_group.title` `varchar(12)` (Kadence 255). So every XXL-JOB job fits, but for a
//! script over 256 KiB, which the import refuses with the reason.
//!
//! A stored value over its limit (written before the limits, or by hand in the database)
//! still loads, lists and runs; an edit of its job is checked whole, the stored fields merged
//! with the edit's, so it is refused naming that field until the same edit shortens it.

use std::fmt;

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Unicode characters of a text.
    Characters,
    /// Bytes of a text's UTF-8.
    Bytes,
    /// Entries of a list.
    Entries,
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Measure::Characters => "characters",
            Measure::Bytes => "bytes",
            Measure::Entries => "entries",
        })
    }
}

/// The most a field may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The field, as the API's requests name it (`author`).
    pub field: &'static str,
    /// The most it may hold, in `measure`.
    pub max: usize,
    /// What `max` counts.
    pub measure: Measure,
    /// What to do instead, said with a refusal (empty: nothing to add).
    pub advice: &'static str,
}

impl Limit {
    /// At most `max` characters of `field`.
    pub const fn characters(field: &'static str, max: usize) -> Limit {
        Limit {
            field,
            max,
            measure: Measure::Characters,
            advice: "",
        }
    }

    /// At most `max` bytes of `field`'s UTF-8.
    pub const fn bytes(field: &'static str, max: usize) -> Limit {
        Limit {
            field,
            max,
            measure: Measure::Bytes,
            advice: "",
        }
    }

    /// At most `max` entries in the list `field`.
    pub const fn entries(field: &'static str, max: usize) -> Limit {
        Limit {
            field,
            max,
            measure: Measure::Entries,
            advice: "",
        }
    }

    /// The limit, saying `advice` with a refusal.
    pub const fn advising(self, advice: &'static str) -> Limit {
        Limit { advice, ..self }
    }

    /// The same limit, for a field of another name (an enumeration's).
    pub const fn named(self, field: &'static str) -> Limit {
        Limit { field, ..self }
    }

    /// The most bytes a text within the limit takes in UTF-8 (4 per character at most).
    pub const fn max_bytes(&self) -> usize {
        match self.measure {
            Measure::Characters => self.max * 4,
            Measure::Bytes | Measure::Entries => self.max,
        }
    }

    /// `text`'s size in this limit's measure (a list's entry counts as a text).
    pub fn size_of(&self, text: &str) -> usize {
        match self.measure {
            Measure::Characters => text.chars().count(),
            Measure::Bytes | Measure::Entries => text.len(),
        }
    }

    /// Ok if `text` is within the limit.
    pub fn check(&self, text: &str) -> Result<(), OverLimit> {
        // Never more characters than bytes: most texts are judged without counting.
        if text.len() <= self.max {
            return Ok(());
        }
        self.within(self.size_of(text), None)
    }

    /// Ok if `text`, entry `index` of the list this limit is about, is within the limit.
    pub fn check_entry(&self, index: usize, text: &str) -> Result<(), OverLimit> {
        if text.len() <= self.max {
            return Ok(());
        }
        self.within(self.size_of(text), Some(index))
    }

    /// Ok if a list of `count` entries is within the limit.
    pub fn check_count(&self, count: usize) -> Result<(), OverLimit> {
        self.within(count, None)
    }

    fn within(&self, size: usize, entry: Option<usize>) -> Result<(), OverLimit> {
        if size <= self.max {
            Ok(())
        } else {
            Err(OverLimit {
                limit: *self,
                size,
                entry,
            })
        }
    }
}

/// A value over its [`Limit`]: the message names the field, its size and the limit
/// (`author is 400000 characters long; the limit is 255 characters`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct OverLimit {
    /// The limit passed.
    pub limit: Limit,
    /// The value's size, in the limit's measure.
    pub size: usize,
    /// Which entry of the list, for a limit on each entry.
    pub entry: Option<usize>,
}

impl fmt::Display for OverLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Limit {
            field,
            max,
            measure,
            advice,
        } = self.limit;
        match (measure, self.entry) {
            (Measure::Entries, _) => write!(f, "{field} has {} entries", self.size)?,
            (_, Some(entry)) => write!(f, "{field}[{entry}] is {} {measure} long", self.size)?,
            (_, None) => write!(f, "{field} is {} {measure} long", self.size)?,
        }
        write!(f, "; the limit is {max} {measure}")?;
        if !advice.is_empty() {
            write!(f, " ({advice})")?;
        }
        Ok(())
    }
}

/// A job's description (XXL-JOB's `job_desc`, `varchar(255)`): one line in lists.
pub const JOB_NAME: Limit = Limit::characters("name", 255);
/// The handler the executors run (XXL-JOB's `executor_handler`, `varchar(255)`, and the
/// `handler` columns of jobs and runs on MySQL): an identifier, never prose.
pub const HANDLER: Limit = Limit::characters("handler", 255);
/// A job's owner, for people (XXL-JOB: `varchar(64)`; Kadence allows a team and a contact).
/// MySQL's `jobs.author` is `VARCHAR(255)`.
pub const AUTHOR: Limit = Limit::characters("author", 255);
/// The handler's parameters (XXL-JOB: `varchar(512)`). They travel in every trigger record
/// of the job, with its script, and every run row copies them: 64 KiB with the largest
/// script still leaves most of a default 1 MB Kafka record free.
pub const PARAMS: Limit = Limit::bytes("params", 64 * 1024)
    .advising("they travel in every trigger record: pass a reference to large data instead");
/// A cron expression or a number of seconds (XXL-JOB's `schedule_conf`, `varchar(128)`):
/// room for explicit lists of values; parsing and previewing stay cheap.
pub const SCHEDULE_CONF: Limit = Limit::characters("schedule_conf", 255);
/// An IANA time zone name (the longest is about 30 characters; MySQL's column is
/// `VARCHAR(64)`): checked before the name is looked up, so a refusal never echoes megabytes.
pub const TIME_ZONE: Limit = Limit::characters("time_zone", 64);
/// One of a list of names (a strategy, a type, a policy: the longest is 21 characters), checked
/// before it is looked up, for the same reason. Named after its field with [`Limit::named`].
pub const CHOICE: Limit = Limit::characters("choice", 32);
/// Addresses a job's alarms are e-mailed to (XXL-JOB: `varchar(255)` for the whole list,
/// about ten): a team's list address is the way to reach more people.
pub const ALARM_EMAILS: Limit = Limit::entries("alarm_emails", 20)
    .advising("send alarms to a mailing list's address to reach more people");
/// One alarm e-mail address: RFC 5321's longest path (256 octets) without its angle brackets.
pub const ALARM_EMAIL: Limit = Limit::bytes("alarm_emails", 254);
/// A job's alarm webhook URL, as stored (non-ASCII percent-encoded): the length browsers and
/// HTTP servers generally accept for a URL.
pub const ALARM_WEBHOOK: Limit = Limit::bytes("alarm_webhook", 2048)
    .advising("counted as stored, with non-ASCII characters percent-encoded");
/// A script (XXL-JOB: `mediumtext`, 16 MiB). It travels in every trigger record of the job,
/// and every run row keeps a copy; 256 KiB with the largest params still fits a default 1 MB
/// Kafka record with room to spare.
pub const GLUE_SOURCE: Limit = Limit::bytes("glue_source", 256 * 1024)
    .advising("scripts travel in every trigger record: ship large programs to the executors and run them from a short script");
/// A note on a script version (XXL-JOB: `varchar(128)`): a commit subject, not a changelog.
pub const GLUE_REMARK: Limit = Limit::characters("glue_remark", 255);
/// Jobs fired when a job succeeds (XXL-JOB's `child_jobid`, `varchar(255)`: about 40 ids).
/// Each child is a trigger per success, and the cycle check walks them all.
pub const CHILD_JOB_IDS: Limit = Limit::entries("child_job_ids", 50)
    .advising("fire a larger fan-out from one child, e.g. a SHARDING_BROADCAST job");
/// An app's title (XXL-JOB's `xxl_job_group.title`, `varchar(12)`): one line in lists.
pub const APP_TITLE: Limit = Limit::characters("title", 255);
/// An API token's name: says what it is for.
pub const TOKEN_NAME: Limit = Limit::characters("name", 100);
/// Why runs are killed: shown on each killed run and sent to every executor of the app.
pub const KILL_REASON: Limit = Limit::characters("reason", 255);
/// Jobs a replay is narrowed to: an app's triggers of more jobs are replayed unfiltered.
pub const REPLAY_JOB_IDS: Limit = Limit::entries("job_ids", 1000)
    .advising("replay the app's triggers without a job filter, or in several replays");
/// Trigger types a replay is narrowed to: more than there are types, so repeats are refused.
pub const REPLAY_TRIGGER_TYPES: Limit = Limit::entries("trigger_types", 16);
/// Outcomes a replay is narrowed to: more than there are outcomes.
pub const REPLAY_OUTCOMES: Limit = Limit::entries("outcomes", 8);
/// Partitions a replay reads by offsets: an app has at most 1 024, each named once.
pub const REPLAY_OFFSETS: Limit = Limit::entries("offsets", 1024);
/// The name of an XXL-JOB import's source (`xxl-job:host:port/database`; MySQL's
/// `imported_ids.source` is `VARCHAR(255)`).
pub const IMPORT_SOURCE: Limit = Limit::characters("source", 200);

#[cfg(test)]
mod tests;
