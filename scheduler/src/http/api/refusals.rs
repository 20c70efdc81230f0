//! Refused attempts in the audit trail: failed and throttled logins, writes refused for
//! credentials that are missing, malformed, unknown, expired or revoked (401), writes with
//! the console's cookie but without its header and console logins without the console's
//! marks (the cross-site refusals, 403 or 415). Someone guessing, replaying an old token or
//! forging requests from another site shows up there, from where and how often.
//!
//! Such refusals come in floods, which must not fill the table. So one entry stands for all
//! the refusals of one route and status, of one user name typed (or one token presented, or
//! none) and one client address, within a minute ([`WINDOW_MS`]) of the first: that first
//! refusal is recorded at once, with `"count": 1` in its details, and the entry's `count`
//! (and `last_at_ms`) are brought up to date as more come, at most once a second
//! ([`FLUSH_AFTER`]) so that a flood does not become a flood of database writes. The next
//! refusal after the minute opens a new entry. A flood of made-up names or tokens from one
//! address gets one entry each for the first [`NAMES_PER_ADDRESS`] in a minute; the rest
//! from that address are counted together in one entry whose user name is `*` and whose
//! details say `"folded": true`. Past [`KEYS_AT_MOST`] open entries (a flood from many
//! addresses) the rest of a route and status are counted together without an address. So
//! whatever is sent, a minute adds a bounded number of entries.
//!
//! An entry's details: `address` (the client, or null), `reason` (the refusal's message),
//! `count`, `last_at_ms` once there is more than one, and for a presented token its
//! `token` fingerprint, `sha256:` and the first 12 hex digits of its SHA-256 (the store
//! keeps tokens as their SHA-256, so an admin can find which revoked token is being
//! replayed; the token itself is never recorded, nor is a password). Counts live in the
//! node's memory: each node of a cluster keeps its own entries, and the counts of the last
//! second before a node stops may be lost.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::ApiState;
use crate::domain::model::NewAuditEntry;
use crate::operations::auth::token_hash;
use crate::store::AuditTrail;

/// How long after its first refusal an entry takes more.
const WINDOW_MS: i64 = 60_000;
/// How long after a refusal the entry it was counted in is updated (with the others that
/// came meanwhile).
const FLUSH_AFTER: Duration = Duration::from_secs(1);
/// Entries of one route, status and address, each for its own user name or token, within a
/// minute; beyond, they are folded into one.
const NAMES_PER_ADDRESS: usize = 10;
/// Open entries tracked at most; beyond, a route's refusals are folded into one entry
/// without an address.
const KEYS_AT_MOST: usize = 4_096;
/// Longest user name and target kept: what was typed may be anything (MySQL's columns hold
/// 255 characters).
const NAME_CHARS: usize = 64;
const TARGET_CHARS: usize = 200;

/// A refused attempt to record.
#[derive(Debug, Clone)]
pub(super) struct Refusal {
    /// The route: method and path template, e.g. `POST /api/jobs`.
    pub(super) action: String,
    /// The path asked for.
    pub(super) target: String,
    /// The answer.
    pub(super) status: StatusCode,
    /// The user name typed, for a login; empty otherwise.
    pub(super) user_name: String,
    /// The token presented, if any (only its fingerprint is kept).
    pub(super) token: Option<String>,
    /// The client.
    pub(super) address: Option<IpAddr>,
    /// Why it was refused: the answer's message.
    pub(super) reason: String,
}

impl Refusal {
    /// A refused login of `name` (failed or throttled).
    pub(super) fn login(
        name: &str,
        address: Option<IpAddr>,
        status: StatusCode,
        reason: &str,
    ) -> Self {
        Refusal {
            action: "POST /api/auth/login".to_owned(),
            target: "/api/auth/login".to_owned(),
            status,
            user_name: name.to_owned(),
            token: None,
            address,
            reason: reason.to_owned(),
        }
    }
}

/// Who a refusal is counted under, besides its route, status and address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Who {
    Named(String),
    Token(String),
    Nobody,
    /// The names and tokens past [`NAMES_PER_ADDRESS`] (or past [`KEYS_AT_MOST`]).
    Many,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    action: String,
    status: u16,
    who: Who,
    address: Option<IpAddr>,
}

/// The entry a run of refusals is counted in.
#[derive(Debug)]
struct Aggregate {
    opened_ms: i64,
    /// The entry as first recorded, with a count of 1.
    entry: NewAuditEntry,
    progress: Mutex<Progress>,
}

#[derive(Debug, Default)]
struct Progress {
    /// The entry's id, once recorded.
    id: Option<i64>,
    count: u64,
    last_ms: i64,
    /// The count the stored entry shows.
    written: u64,
    /// Whether an update is due (a task will write it).
    flushing: bool,
    /// Recording the entry failed: the next refusal opens another.
    abandoned: bool,
}

/// What to do after a refusal was counted.
#[derive(Debug)]
enum Noted {
    /// Record the aggregate's entry: it is the first refusal of its minute.
    Open(Arc<Aggregate>),
    /// Nothing yet: an update is already due, or the entry is being recorded.
    Counted,
    /// Start the task that updates the aggregate's entry.
    Flush(Arc<Aggregate>),
}

/// The open entries of refused attempts of one node.
#[derive(Debug, Default)]
pub struct RefusalTally {
    open: Mutex<HashMap<Key, Arc<Aggregate>>>,
}

/// Records `refusal` in the audit trail, counted into the entry of its kind, user or token
/// and address if one is open (see the module docs).
pub(super) async fn record_refusal(state: &ApiState, refusal: Refusal) {
    match state.refusals.note(&refusal, state.clock.now_ms()) {
        Noted::Counted => {}
        Noted::Flush(aggregate) => spawn_flush(state.store.clone(), aggregate),
        Noted::Open(aggregate) => match state.store.record_audit(&aggregate.entry).await {
            Ok(id) => {
                if aggregate.recorded_as(id) {
                    spawn_flush(state.store.clone(), aggregate);
                }
            }
            Err(error) => {
                aggregate.abandon();
                tracing::error!(%error, entry = ?aggregate.entry, "audit entry not recorded");
            }
        },
    }
}

/// The fingerprint of a token presented: enough to tell tokens apart and to find a stored
/// one (the store keeps their SHA-256), nothing to use one with.
pub(super) fn token_fingerprint(token: &str) -> String {
    format!("sha256:{}", &token_hash(token)[..12])
}

/// Brings the stored count of `aggregate` up to date, a second after the refusal that made
/// it due and again while more come.
fn spawn_flush(store: Arc<dyn AuditTrail>, aggregate: Arc<Aggregate>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(FLUSH_AFTER).await;
            let Some((id, count, details)) = aggregate.due() else {
                return;
            };
            if let Err(error) = store.set_audit_details(id, &details).await {
                tracing::error!(%error, id, ?details, "audit entry's count not updated");
            }
            if !aggregate.written(count) {
                return;
            }
        }
    });
}

impl RefusalTally {
    /// Counts `refusal` at `now_ms` into its open entry, or opens one.
    fn note(&self, refusal: &Refusal, now_ms: i64) -> Noted {
        let mut open = self.lock();
        let mut key = Key {
            action: refusal.action.clone(),
            status: refusal.status.as_u16(),
            who: match (&refusal.token, refusal.user_name.as_str()) {
                (Some(token), _) => Who::Token(token_fingerprint(token)),
                (None, "") => Who::Nobody,
                (None, name) => Who::Named(name.chars().take(NAME_CHARS).collect()),
            },
            address: refusal.address,
        };
        if !open.get(&key).is_some_and(|found| found.is_open(now_ms)) {
            key = room_for(&mut open, key, now_ms);
        }
        if let Some(found) = open.get(&key).filter(|found| found.is_open(now_ms)) {
            return found.count_one(now_ms);
        }
        let aggregate = Arc::new(Aggregate::open(refusal, &key, now_ms));
        open.insert(key, Arc::clone(&aggregate));
        Noted::Open(aggregate)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Arc<Aggregate>>> {
        (self.open.lock()).unwrap_or_else(|poison| poison.into_inner())
    }
}

/// `key`, or the key it is folded into when its address has had its share of names and
/// tokens this minute, or when the tally is full (see the module docs).
fn room_for(open: &mut HashMap<Key, Arc<Aggregate>>, key: Key, now_ms: i64) -> Key {
    if open.len() >= KEYS_AT_MOST {
        open.retain(|_, aggregate| aggregate.is_open(now_ms));
    }
    if open.len() >= KEYS_AT_MOST {
        return Key {
            who: Who::Many,
            address: None,
            ..key
        };
    }
    let same_source = (open.iter())
        .filter(|(other, aggregate)| {
            other.action == key.action
                && other.status == key.status
                && other.address == key.address
                && aggregate.is_open(now_ms)
        })
        .count();
    if same_source >= NAMES_PER_ADDRESS {
        return Key {
            who: Who::Many,
            ..key
        };
    }
    key
}

impl Aggregate {
    fn open(refusal: &Refusal, key: &Key, now_ms: i64) -> Self {
        let mut details = Map::new();
        details.insert("address".to_owned(), json!(key.address));
        details.insert("reason".to_owned(), json!(refusal.reason));
        details.insert("count".to_owned(), json!(1));
        let user_name = match &key.who {
            Who::Named(name) => name.clone(),
            Who::Token(fingerprint) => {
                details.insert("token".to_owned(), json!(fingerprint));
                String::new()
            }
            Who::Nobody => String::new(),
            Who::Many => {
                details.insert("folded".to_owned(), json!(true));
                "*".to_owned()
            }
        };
        Aggregate {
            opened_ms: now_ms,
            entry: NewAuditEntry {
                at_ms: now_ms,
                user_id: None,
                user_name,
                action: refusal.action.clone(),
                target: refusal.target.chars().take(TARGET_CHARS).collect(),
                app: None,
                status: refusal.status.as_u16(),
                details: Some(Value::Object(details)),
            },
            progress: Mutex::new(Progress {
                count: 1,
                last_ms: now_ms,
                written: 1,
                ..Progress::default()
            }),
        }
    }

    fn is_open(&self, now_ms: i64) -> bool {
        now_ms < self.opened_ms.saturating_add(WINDOW_MS) && !self.lock().abandoned
    }

    /// Counts one more refusal.
    fn count_one(self: &Arc<Self>, now_ms: i64) -> Noted {
        let mut progress = self.lock();
        progress.count += 1;
        progress.last_ms = progress.last_ms.max(now_ms);
        if progress.id.is_none() || progress.flushing {
            return Noted::Counted;
        }
        progress.flushing = true;
        Noted::Flush(Arc::clone(self))
    }

    /// Notes the entry was recorded as `id`; true if refusals came meanwhile and an update
    /// is due.
    fn recorded_as(&self, id: i64) -> bool {
        let mut progress = self.lock();
        progress.id = Some(id);
        progress.flushing = progress.count > progress.written;
        progress.flushing
    }

    fn abandon(&self) {
        self.lock().abandoned = true;
    }

    /// The id, count and details to write now.
    fn due(&self) -> Option<(i64, u64, Value)> {
        let progress = self.lock();
        let mut details = self.entry.details.clone().unwrap_or_else(|| json!({}));
        details["count"] = json!(progress.count);
        details["last_at_ms"] = json!(progress.last_ms);
        Some((progress.id?, progress.count, details))
    }

    /// Notes `count` is written; true if more came meanwhile and another update is due.
    fn written(&self, count: u64) -> bool {
        let mut progress = self.lock();
        progress.written = progress.written.max(count);
        progress.flushing = progress.count > progress.written;
        progress.flushing
    }

    fn lock(&self) -> MutexGuard<'_, Progress> {
        (self.progress.lock()).unwrap_or_else(|poison| poison.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad_token(token: &str, address: &str) -> Refusal {
        Refusal {
            action: "POST /api/jobs".to_owned(),
            target: "/api/jobs".to_owned(),
            status: StatusCode::UNAUTHORIZED,
            user_name: String::new(),
            token: Some(token.to_owned()),
            address: Some(address.parse().unwrap()),
            reason: "the token is unknown, expired or revoked".to_owned(),
        }
    }

    fn opened(noted: Noted) -> Arc<Aggregate> {
        match noted {
            Noted::Open(aggregate) => aggregate,
            other => panic!("expected a new entry, got {other:?}"),
        }
    }

    #[test]
    fn a_flood_is_one_entry_a_minute_whose_count_is_updated_at_most_once_at_a_time() {
        let tally = RefusalTally::default();
        let token = "kdn_0000000000000000000000000000000000000000000000000000000000000000";
        let refusal = bad_token(token, "198.51.100.7");
        let first = opened(tally.note(&refusal, 0));
        assert!(
            matches!(tally.note(&refusal, 10), Noted::Counted),
            "while the entry is being recorded, refusals are only counted"
        );
        assert!(
            first.recorded_as(41),
            "one came meanwhile: an update is due"
        );
        for at in 20..40 {
            assert!(matches!(tally.note(&refusal, at), Noted::Counted));
        }
        let (id, count, details) = first.due().unwrap();
        assert_eq!((id, count), (41, 22));
        assert_eq!(details["count"], 22);
        assert_eq!(details["last_at_ms"], 39);
        assert_eq!(details["token"], token_fingerprint(token));
        assert_eq!(details["address"], "198.51.100.7");
        assert!(
            !details.to_string().contains(&token[4..20]),
            "no part of the token: {details}"
        );
        assert!(!first.written(22), "nothing more to write");
        let Noted::Flush(again) = tally.note(&refusal, 50) else {
            panic!("a refusal after the update makes another due");
        };
        assert!(Arc::ptr_eq(&again, &first));
        assert!(matches!(tally.note(&refusal, 59_999), Noted::Counted));
        let next_minute = opened(tally.note(&refusal, 60_000));
        assert_eq!(next_minute.entry.at_ms, 60_000);
        assert_eq!(next_minute.entry.details.as_ref().unwrap()["count"], 1);
    }

    #[test]
    fn entries_are_apart_per_route_status_name_or_token_and_address() {
        let tally = RefusalTally::default();
        let token = bad_token("kdn_a", "198.51.100.7");
        opened(tally.note(&token, 0));
        opened(tally.note(&bad_token("kdn_b", "198.51.100.7"), 0));
        opened(tally.note(&bad_token("kdn_a", "198.51.100.8"), 0));
        let forbidden = Refusal {
            status: StatusCode::FORBIDDEN,
            ..token.clone()
        };
        opened(tally.note(&forbidden, 0));
        let login = Refusal::login("admin", token.address, StatusCode::UNAUTHORIZED, "wrong");
        let entry = opened(tally.note(&login, 0)).entry.clone();
        assert_eq!(entry.user_name, "admin");
        assert_eq!(entry.action, "POST /api/auth/login");
        let throttled = Refusal::login("admin", token.address, StatusCode::TOO_MANY_REQUESTS, "");
        opened(tally.note(&throttled, 0));
        assert!(matches!(tally.note(&login, 1), Noted::Counted));
    }

    #[test]
    fn made_up_names_from_one_address_fold_into_one_entry() {
        let tally = RefusalTally::default();
        let address = Some("203.0.113.9".parse().unwrap());
        let login = |name: &str| Refusal::login(name, address, StatusCode::UNAUTHORIZED, "wrong");
        for n in 0..NAMES_PER_ADDRESS {
            opened(tally.note(&login(&format!("user-{n}")), 0));
        }
        let folded = opened(tally.note(&login("user-x"), 0));
        assert_eq!(folded.entry.user_name, "*");
        assert_eq!(folded.entry.details.as_ref().unwrap()["folded"], true);
        assert_eq!(
            folded.entry.details.as_ref().unwrap()["address"],
            "203.0.113.9"
        );
        assert!(matches!(tally.note(&login("user-y"), 1), Noted::Counted));
        assert_eq!(folded.lock().count, 2);
        let elsewhere = Refusal::login("user-z", None, StatusCode::UNAUTHORIZED, "wrong");
        opened(tally.note(&elsewhere, 1));
        let long = login(&"n".repeat(10_000));
        let after_a_minute = opened(tally.note(&long, 60_000));
        assert_eq!(after_a_minute.entry.user_name.len(), NAME_CHARS);
    }

    #[test]
    fn a_full_tally_drops_closed_entries_then_folds_without_an_address() {
        let tally = RefusalTally::default();
        for n in 0..KEYS_AT_MOST {
            let address = format!("10.{}.{}.1", n / 256, n % 256);
            opened(tally.note(&bad_token("kdn_x", &address), 0));
        }
        let crowded = opened(tally.note(&bad_token("kdn_x", "192.0.2.1"), 1));
        assert_eq!(
            crowded.entry.details.as_ref().unwrap()["address"],
            Value::Null
        );
        assert_eq!(crowded.entry.user_name, "*");
        opened(tally.note(&bad_token("kdn_x", "192.0.2.1"), 60_001));
        assert_eq!(tally.lock().len(), 1, "the closed entries are dropped");
    }

    #[test]
    fn an_entry_that_could_not_be_recorded_gives_way_to_a_new_one() {
        let tally = RefusalTally::default();
        let refusal = bad_token("kdn_x", "192.0.2.1");
        opened(tally.note(&refusal, 0)).abandon();
        opened(tally.note(&refusal, 1));
    }
}
