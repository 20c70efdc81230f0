//! The limits' messages and counting, and that each limit agrees with what depends on it: the
//! database columns, a Kafka record and the console's form (the API's body limit and its
//! OpenAPI document are checked beside the job's request, in `crate::http::api::job_spec`).

use super::*;

#[test]
fn a_text_one_past_its_limit_is_refused_naming_the_field_and_the_limit() {
    let at_limit = "a".repeat(AUTHOR.max);
    assert_eq!(AUTHOR.check(&at_limit), Ok(()));
    let over = AUTHOR.check(&"a".repeat(AUTHOR.max + 1)).unwrap_err();
    assert_eq!(
        over.to_string(),
        "author is 256 characters long; the limit is 255 characters"
    );
    assert_eq!((over.limit, over.size, over.entry), (AUTHOR, 256, None));
    assert_eq!(
        PARAMS
            .check(&"p".repeat(PARAMS.max + 1))
            .unwrap_err()
            .to_string(),
        "params is 65537 bytes long; the limit is 65536 bytes (they travel in every trigger \
         record: pass a reference to large data instead)"
    );
    assert_eq!(PARAMS.check(&"p".repeat(PARAMS.max)), Ok(()));
}

#[test]
fn characters_and_bytes_are_counted_apart() {
    // 255 two-byte characters: 510 bytes, within a limit of 255 characters.
    let accents = "é".repeat(255);
    assert_eq!(JOB_NAME.check(&accents), Ok(()));
    assert_eq!(
        JOB_NAME.check(&format!("{accents}é")).unwrap_err().size,
        256
    );
    // A limit in bytes counts the UTF-8: 128 of them are 256 bytes.
    let email = format!("{}@example.com", "é".repeat(121));
    assert_eq!(email.len(), 254);
    assert_eq!(ALARM_EMAIL.check_entry(0, &email), Ok(()));
    let over = ALARM_EMAIL
        .check_entry(3, &format!("é{email}"))
        .unwrap_err();
    assert_eq!(
        over.to_string(),
        "alarm_emails[3] is 256 bytes long; the limit is 254 bytes"
    );
    assert_eq!(JOB_NAME.max_bytes(), 1020);
    assert_eq!(PARAMS.max_bytes(), 65536);
}

#[test]
fn a_list_is_limited_in_entries() {
    assert_eq!(ALARM_EMAILS.check_count(20), Ok(()));
    assert_eq!(
        ALARM_EMAILS.check_count(3000).unwrap_err().to_string(),
        "alarm_emails has 3000 entries; the limit is 20 entries (send alarms to a mailing \
         list's address to reach more people)"
    );
    assert_eq!(CHILD_JOB_IDS.check_count(50), Ok(()));
    assert!(CHILD_JOB_IDS.check_count(51).is_err());
    let strategy = CHOICE.named("route_strategy");
    assert_eq!(
        strategy.check(&"X".repeat(33)).unwrap_err().to_string(),
        "route_strategy is 33 characters long; the limit is 32 characters"
    );
    assert_eq!(strategy.check("LEAST_FREQUENTLY_USED"), Ok(()));
}

/// What a MySQL column holds, from the schema the store creates: `(characters, bytes)`.
fn mysql_column(table: &str, column: &str) -> (usize, usize) {
    let schema = [
        include_str!("../../../../migrations/mysql/0001_initial.sql"),
        include_str!("../../../../migrations/mysql/0016_imports.sql"),
    ]
    .concat();
    let start = schema
        .find(&format!("CREATE TABLE {table} ("))
        .unwrap_or_else(|| panic!("no table {table}"));
    let body = &schema[start..];
    let body = &body[..body.find(") ENGINE").expect("a table ends")];
    let line = body
        .lines()
        .find(|line| line.split_whitespace().next() == Some(column))
        .unwrap_or_else(|| panic!("no column {table}.{column}"));
    let kind = line.split_whitespace().nth(1).expect("a column has a type");
    let kind = kind.trim_end_matches(',');
    match kind {
        "TEXT" => (usize::MAX, 65_535),
        "MEDIUMTEXT" => (usize::MAX, 16_777_215),
        varchar if varchar.starts_with("VARCHAR(") => {
            let n = varchar["VARCHAR(".len()..varchar.len() - 1]
                .parse()
                .expect("a VARCHAR's length");
            (n, usize::MAX)
        }
        other => panic!("{table}.{column} is {other}, which holds no text"),
    }
}

/// Each text limit holds in each column its field is stored in, on MySQL and MariaDB (the
/// other backends' `TEXT` holds any length): a `VARCHAR(n)` takes `n` characters, a `TEXT`
/// 65 535 bytes, 4 to a character at most.
#[test]
fn every_limit_fits_the_columns_its_field_is_stored_in() {
    let columns: &[(Limit, &[(&str, &str)])] = &[
        (JOB_NAME, &[("jobs", "name")]),
        (HANDLER, &[("jobs", "handler"), ("job_logs", "handler")]),
        (AUTHOR, &[("jobs", "author")]),
        (PARAMS, &[("jobs", "params"), ("job_logs", "params")]),
        (SCHEDULE_CONF, &[("jobs", "schedule_conf")]),
        (TIME_ZONE, &[("jobs", "time_zone")]),
        (ALARM_WEBHOOK, &[("jobs", "alarm_webhook")]),
        (
            GLUE_SOURCE,
            &[
                ("jobs", "glue_source"),
                ("job_glue_versions", "glue_source"),
                ("job_logs", "glue_source"),
            ],
        ),
        (
            GLUE_REMARK,
            &[
                ("jobs", "glue_remark"),
                ("job_glue_versions", "glue_remark"),
            ],
        ),
        (APP_TITLE, &[("apps", "title")]),
        (TOKEN_NAME, &[("auth_tokens", "name")]),
        // A killed run's message is `killed: {reason}`.
        (KILL_REASON, &[("job_logs", "handle_msg")]),
        (IMPORT_SOURCE, &[("imported_ids", "source")]),
    ];
    for (limit, stored_in) in columns {
        for (table, column) in *stored_in {
            let (characters, bytes) = mysql_column(table, column);
            assert!(
                limit.max <= characters && limit.max_bytes() <= bytes,
                "{} ({} {}) does not fit {table}.{column}",
                limit.field,
                limit.max,
                limit.measure
            );
        }
    }
    // Lists are stored comma-separated in one TEXT column.
    let (_, emails) = mysql_column("jobs", "alarm_emails");
    assert!(ALARM_EMAILS.max * (ALARM_EMAIL.max + 1) <= emails);
    let (_, children) = mysql_column("jobs", "child_job_ids");
    let longest_id = i64::MAX.to_string().len() + 1;
    assert!(CHILD_JOB_IDS.max * longest_id <= children);
}

/// Kafka's default `max.message.bytes` (1 MiB and a record batch's 12 bytes of overhead).
const KAFKA_DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;

#[test]
fn a_trigger_record_at_every_limit_fits_a_default_kafka_record() {
    use kadence_schemas::{AppName, GlueType, JobId, TriggerId, TriggerRecord, TriggerType};
    let job = JobId::new(i64::MAX).expect("a job id");
    let trigger = TriggerId::scheduled(job, i64::MAX / 2);
    let record = TriggerRecord {
        trigger_id: trigger.retry(u32::MAX),
        log_id: i64::MAX,
        job_id: job,
        app: AppName::parse(&"a".repeat(64)).expect("the longest app name"),
        handler: "😀".repeat(HANDLER.max),
        params: "p".repeat(PARAMS.max),
        shard_index: i32::MAX,
        shard_total: i32::MAX,
        block_strategy: kadence_schemas::BlockStrategy::SerialExecution,
        timeout_ms: i64::MAX,
        trigger_type: TriggerType::Replay,
        scheduled_at_ms: i64::MAX,
        emitted_at_ms: i64::MAX,
        attempt: i32::MAX,
        glue_type: GlueType::GlueShell,
        glue_source: Some("s".repeat(GLUE_SOURCE.max)),
        glue_updated_at_ms: Some(i64::MAX),
        replay_of: Some(trigger),
        expires_at_ms: Some(i64::MAX),
    };
    let encoded = kadence_schemas::codec::encode(&record).expect("a trigger record encodes");
    // Headers (signature, key id, trace context) and the batch's framing: a few hundred bytes.
    let headroom = 16 * 1024;
    assert!(
        encoded.len() + headroom <= KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
        "a trigger record at every limit is {} bytes: over a default Kafka record",
        encoded.len()
    );
}

/// The console's job form caps its one-line inputs at the limits.
#[test]
fn the_job_forms_inputs_take_what_the_api_takes() {
    let form = include_str!("../../../../console/pages/job_form.js");
    let table = &form[form
        .find("const MAX_LENGTH = {")
        .expect("the form's limits")..];
    let table = &table[..table.find("};").expect("the table ends")];
    for limit in [
        JOB_NAME,
        HANDLER,
        AUTHOR,
        SCHEDULE_CONF,
        TIME_ZONE,
        ALARM_WEBHOOK,
        GLUE_REMARK,
    ] {
        let entry = format!("{}: {},", limit.field, limit.max);
        assert!(
            table.contains(&entry),
            "the job form should cap {} at {}: {table}",
            limit.field,
            limit.max
        );
    }
}
