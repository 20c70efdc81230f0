//! What a listing can be narrowed by: [`JobFilter`] for jobs, [`RunFilter`] for runs across
//! jobs, [`AppScope`] for the apps a caller may see, [`PageRequest`] for where a page starts,
//! and [`contains_pattern`], which turns text a user typed into a `LIKE` pattern that
//! matches it literally.

use kadence_schemas::{AppName, JobId};

use super::RunOutcome;
use crate::domain::model::JobStatus;

/// Filters of a job listing. Each one given narrows the listing; none given lists every job
/// of the scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only these apps' jobs (see [`AppScope`](super::AppScope)).
    pub apps: Option<Vec<AppName>>,
    /// Only jobs in this status.
    pub status: Option<JobStatus>,
    /// Only jobs with exactly this handler name.
    pub handler: Option<String>,
    /// Only jobs with exactly this author.
    pub author: Option<String>,
    /// Only jobs whose description (`name`) or handler holds this text, ignoring case, or
    /// whose id it is (when it is a number).
    pub text: Option<String>,
}

/// Filters of a search of runs across jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs in these apps, the apps they ran in (see [`AppScope`](super::AppScope)).
    pub apps: Option<Vec<AppName>>,
    /// Only this job's runs.
    pub job: Option<JobId>,
    /// Only runs with this outcome, counted as the daily reports count: SUCCEEDED (result
    /// 200), FAILED (finished with any other result), UNFINISHED (planned or dispatched, no
    /// result yet). A cancelled fire is none of them; UNKNOWN matches no run.
    pub outcome: Option<RunOutcome>,
    /// Only runs scheduled at or after this, ms.
    pub from_ms: Option<i64>,
    /// Only runs scheduled before this, ms.
    pub to_ms: Option<i64>,
}

/// The escape character of the patterns [`contains_pattern`] makes (`LIKE … ESCAPE '\'`).
pub(crate) const LIKE_ESCAPE: char = '\\';

/// A `LIKE` pattern matching any text that contains `text`: `%` and `_` (and the escape
/// character itself) match only themselves, so what a user types is never a wildcard.
pub(crate) fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for ch in text.chars() {
        if matches!(ch, '%' | '_' | LIKE_ESCAPE) {
            pattern.push(LIKE_ESCAPE);
        }
        pattern.push(ch);
    }
    pattern.push('%');
    pattern
}

/// Where a page of a listing starts and how long it is: keyset pagination, so a page costs
/// the same however deep it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest<K> {
    /// The key of the last item of the previous page; `None` for the first page.
    pub after: Option<K>,
    /// Items at most.
    pub limit: u32,
}

impl<K> PageRequest<K> {
    /// The first `limit` items.
    pub fn first(limit: u32) -> Self {
        PageRequest { after: None, limit }
    }
}

/// The apps a listing may show: `None` for all, `Some` for only these (none if empty).
pub type AppScope<'a> = Option<&'a [AppName]>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_wildcards_match_only_themselves() {
        assert_eq!(contains_pattern("report"), "%report%");
        assert_eq!(contains_pattern("50%_off"), r"%50\%\_off%");
        assert_eq!(contains_pattern(r"a\b"), r"%a\\b%");
        assert_eq!(contains_pattern(""), "%%");
    }
}
