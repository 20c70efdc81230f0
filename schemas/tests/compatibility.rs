//! The compatibility harness: every record's current schema must read data written with every
//! released version (BACKWARD_TRANSITIVE), every released version must be in the catalog, and
//! every record and field must be documented. It runs on each change, so a breaking schema edit
//! fails here before it reaches a topic.

use std::collections::HashSet;

use apache_avro::types::Value;
use apache_avro::{Schema, to_avro_datum};
use kadence_schemas::catalog::{self, CURRENT_SOURCES, check_backward_transitive};
use kadence_schemas::codec::{decode, encode};
use kadence_schemas::{
    AppName, AvroRecord, BlockStrategy, CodecError, ControlRecord, ExecutorBeat, GlueType, JobId,
    LogRecord, ResultRecord, TriggerId, TriggerRecord, TriggerType,
};

#[test]
fn current_schemas_read_every_released_version() {
    for (record, _) in CURRENT_SOURCES {
        let reader = catalog::current_schema(record).unwrap();
        let mut history: Vec<_> = catalog::entries()
            .iter()
            .filter(|e| e.record == *record)
            .collect();
        history.sort_by_key(|entry| entry.version);
        assert!(!history.is_empty(), "{record} has no released version");
        let writers: Vec<Schema> = history.iter().map(|entry| entry.schema.clone()).collect();
        check_backward_transitive(reader, &writers)
            .unwrap_or_else(|error| panic!("{record}: {error}"));
        let versions: Vec<u32> = history.iter().map(|entry| entry.version).collect();
        assert_eq!(
            versions,
            (1..=history.len() as u32).collect::<Vec<_>>(),
            "{record} versions have gaps"
        );
    }
}

#[test]
fn catalog_ids_are_unique_and_every_frozen_file_is_registered() {
    let ids: HashSet<u32> = catalog::entries().iter().map(|entry| entry.id).collect();
    assert_eq!(ids.len(), catalog::entries().len());
    for entry in catalog::entries() {
        let family = entry.id / 1000;
        assert_eq!(
            entry.id,
            family * 1000 + entry.version,
            "id scheme of {}",
            entry.record
        );
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/avro/history");
    let mut frozen = 0;
    for record_dir in std::fs::read_dir(dir).unwrap() {
        for file in std::fs::read_dir(record_dir.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            assert!(
                catalog::entries().iter().any(|entry| entry.source == text),
                "a frozen schema is not in the catalog"
            );
            frozen += 1;
        }
    }
    assert_eq!(frozen, catalog::entries().len());
}

/// A realistic value for every field any released version has had. A new version's fields
/// must be added here, so that its data is exercised too.
fn sample(field: &str) -> Value {
    let text = |s: &str| Value::String(s.to_owned());
    let some = |value: Value| Value::Union(1, Box::new(value));
    match field {
        "trigger_id" => text("7-1767225600000-r1"),
        "replay_of" => some(text("7-u0190f3c6a8e47c2b9d1e5f6a7b8c9d0e")),
        "log_id" => Value::Long(31),
        "job_id" => Value::Long(7),
        "app" => text("billing"),
        "handler" => text("sendReport"),
        "params" => text("region=eu"),
        "shard_index" => Value::Int(1),
        "shard_total" => Value::Int(4),
        "block_strategy" => Value::Enum(2, "COVER_EARLY".into()),
        "timeout_ms" => Value::Long(60_000),
        "trigger_type" => Value::Enum(5, "RETRY".into()),
        "scheduled_at_ms" | "started_at_ms" | "requested_at_ms" => Value::Long(1_767_225_600_000),
        "emitted_at_ms" | "finished_at_ms" | "sent_at_ms" => Value::Long(1_767_225_601_000),
        "attempt" => Value::Int(1),
        "glue_type" => Value::Enum(1, "GLUE_SHELL".into()),
        "glue_source" => some(text("echo hello")),
        "glue_updated_at_ms" => some(Value::Long(1_767_000_000_000)),
        "expires_at_ms" => some(Value::Long(1_767_229_200_000)),
        "run_started_at_ms" => some(Value::Long(1_767_225_600_002)),
        "executor_id" => text("billing-7f9c-1"),
        "code" => Value::Int(500),
        "message" => some(text("exit status 3")),
        "retry_after_ms" => some(Value::Long(30_000)),
        "command" => Value::Enum(0, "KILL".into()),
        "reason" => some(text("operator request")),
        "host" => text("node-3"),
        "version" => text("0.1.0"),
        "handlers" => Value::Array(vec![text("sendReport")]),
        "owned_partitions" => Value::Array(vec![Value::Int(0), Value::Int(3)]),
        "running_jobs" | "queued_jobs" => Value::Array(vec![Value::Long(7)]),
        "state" => Value::Enum(1, "STOPPING".into()),
        "first_line" => Value::Long(1),
        "lines" => Value::Array(vec![text("hello"), text("")]),
        "features" => Value::Array(vec![text("round-signatures"), text("from-the-future")]),
        other => panic!("no sample value for field {other:?}: add one to sample()"),
    }
}

/// A datum written with `schema`, every field set (or, with `nulls`, every nullable field
/// null).
fn datum_for(schema: &Schema, nulls: bool) -> Vec<u8> {
    let Schema::Record(record) = schema else {
        panic!("catalog schemas are records")
    };
    let fields = record
        .fields
        .iter()
        .map(|field| {
            let value = match sample(&field.name) {
                Value::Union(..) if nulls => Value::Union(0, Box::new(Value::Null)),
                value => value,
            };
            (field.name.clone(), value)
        })
        .collect();
    let value = Value::Record(fields).resolve(schema).unwrap();
    to_avro_datum(schema, value).unwrap()
}

/// Decodes through the public codec into the current type, and checks it encodes again.
fn decode_current(record: &str, framed: &[u8]) -> Result<(), CodecError> {
    fn check<R: AvroRecord + PartialEq + std::fmt::Debug>(framed: &[u8]) -> Result<(), CodecError> {
        let decoded: R = decode(framed)?;
        assert_eq!(decode::<R>(&encode(&decoded)?)?, decoded);
        Ok(())
    }
    match record {
        "TriggerRecord" => check::<TriggerRecord>(framed),
        "ResultRecord" => check::<ResultRecord>(framed),
        "ControlRecord" => check::<ControlRecord>(framed),
        "ExecutorBeat" => check::<ExecutorBeat>(framed),
        "LogRecord" => check::<LogRecord>(framed),
        other => panic!("unknown record family {other}"),
    }
}

#[test]
fn data_written_with_every_released_version_decodes_into_the_current_type() {
    for entry in catalog::entries() {
        for nulls in [false, true] {
            let mut framed = vec![0];
            framed.extend_from_slice(&entry.id.to_be_bytes());
            framed.extend(datum_for(&entry.schema, nulls));
            decode_current(entry.record, &framed).unwrap_or_else(|error| {
                panic!(
                    "{} v{} (nulls: {nulls}): {error}",
                    entry.record, entry.version
                )
            });
        }
    }
    // And the values arrive intact.
    let entry = catalog::schema_for_id(2001).unwrap();
    let mut framed = vec![0, 0, 0, 0x07, 0xD1];
    framed.extend(datum_for(&entry.schema, false));
    let decoded: ResultRecord = decode(&framed).unwrap();
    assert_eq!(decoded.trigger_id.as_str(), "7-1767225600000-r1");
    assert_eq!(decoded.code, 500);
    assert_eq!(decoded.message.as_deref(), Some("exit status 3"));
    assert_eq!(decoded.retry_after_ms, Some(30_000));
}

#[test]
fn the_codec_writes_the_current_schema_under_the_newest_id() {
    for (record, _) in CURRENT_SOURCES {
        let current = catalog::current_schema(record).unwrap();
        let newest = catalog::latest(record).unwrap();
        assert_eq!(
            newest.schema.canonical_form(),
            current.canonical_form(),
            "{record}: the current .avsc differs from its newest frozen version; freeze it as \
             history/<record>/v{}.avsc and give it an id",
            newest.version + 1
        );
    }
    assert_eq!(TriggerRecord::schema_id(), 1003);
    assert_eq!(ResultRecord::schema_id(), 2001);
    assert_eq!(ControlRecord::schema_id(), 3001);
    assert_eq!(ExecutorBeat::schema_id(), 4002);
    assert_eq!(LogRecord::schema_id(), 5002);
}

/// A trigger is written with the oldest version that holds it: every trigger type v1 knows
/// under 1001 (executors built before v2 keep reading them), BACKFILL under 1002; and a v1
/// reader reads the 1001 bytes as they are.
#[test]
fn triggers_are_written_with_v1_unless_they_are_backfills() {
    let v1 = catalog::schema_for_id(1001).unwrap();
    for &trigger_type in TriggerType::ALL {
        let trigger = TriggerRecord {
            trigger_type,
            ..sample_trigger()
        };
        let bytes = encode(&trigger).unwrap();
        let id = u32::from_be_bytes(bytes[1..5].try_into().unwrap());
        if trigger_type == TriggerType::Backfill {
            assert_eq!(id, 1002);
            continue;
        }
        assert_eq!(id, 1001, "{trigger_type}");
        let value =
            apache_avro::from_avro_datum(&v1.schema, &mut &bytes[5..], Some(&v1.schema)).unwrap();
        let Value::Record(fields) = value else {
            panic!("not a record")
        };
        assert_eq!(
            fields[10].1,
            Value::Enum(trigger_type as u32, trigger_type.as_str().to_owned())
        );
        assert_eq!(decode::<TriggerRecord>(&bytes).unwrap(), trigger);
    }
    // v1 cannot carry BACKFILL: a v1 reader refuses the symbol, which is why it needs v2.
    let v2 = catalog::schema_for_id(1002).unwrap();
    assert!(
        apache_avro::schema_compatibility::SchemaCompatibility::can_read(&v2.schema, &v1.schema)
            .is_err()
    );
}

/// A trigger with a validity window is written as v3, whatever its type, and reads back with
/// it; the same trigger without one is written as before (v1, or v2 for a backfill), so
/// executors that predate v3 keep reading every trigger of a scheduler told to write no window.
#[test]
fn triggers_with_a_validity_window_are_written_with_v3() {
    for &trigger_type in TriggerType::ALL {
        let trigger = TriggerRecord {
            trigger_type,
            expires_at_ms: Some(1_767_229_200_000),
            ..sample_trigger()
        };
        let bytes = encode(&trigger).unwrap();
        assert_eq!(bytes[1..5], 1003u32.to_be_bytes(), "{trigger_type}");
        assert_eq!(decode::<TriggerRecord>(&bytes).unwrap(), trigger);
        let without = TriggerRecord {
            expires_at_ms: None,
            ..trigger
        };
        let bytes = encode(&without).unwrap();
        assert_ne!(bytes[1..5], 1003u32.to_be_bytes(), "{trigger_type}");
        assert_eq!(decode::<TriggerRecord>(&bytes).unwrap(), without);
    }
}

#[test]
fn a_trigger_expires_after_its_window_only() {
    let trigger = TriggerRecord {
        expires_at_ms: Some(1_000),
        ..sample_trigger()
    };
    assert!(!trigger.expired_at(1_000));
    assert!(trigger.expired_at(1_001));
    assert!(
        !sample_trigger().expired_at(i64::MAX),
        "no window: never expires"
    );
}

/// Log records are always written as v2 (5002), which names the run they belong to; one
/// written as v1 (5001) by an executor that predates v2 reads with no run start.
#[test]
fn log_records_are_written_with_v2_and_v1_ones_read_with_no_run_start() {
    let record = LogRecord {
        trigger_id: TriggerId::parse("7-1767225600000").unwrap(),
        log_id: 12,
        job_id: JobId::new(7).unwrap(),
        executor_id: "billing-7f9c-1".into(),
        first_line: 1,
        lines: vec!["hello".into()],
        emitted_at_ms: 1_767_225_600_900,
        run_started_at_ms: Some(1_767_225_600_002),
    };
    let bytes = encode(&record).unwrap();
    assert_eq!(bytes[1..5], 5002u32.to_be_bytes());
    assert_eq!(decode::<LogRecord>(&bytes).unwrap(), record);

    let v1 = catalog::schema_for_id(5001).unwrap();
    let mut framed = vec![0];
    framed.extend_from_slice(&5001u32.to_be_bytes());
    framed.extend(datum_for(&v1.schema, false));
    let decoded: LogRecord = decode(&framed).unwrap();
    assert_eq!(decoded.run_started_at_ms, None, "v1 names no run");
    assert_eq!(decoded.lines, ["hello", ""]);
}

/// A beat that lists features is written as v2 (4002) and reads back with them; one that lists
/// none is written as v1 (4001), which schedulers that predate v2 read, and a v1 beat reads
/// with no features.
#[test]
fn beats_with_features_are_written_with_v2_and_others_with_v1() {
    let v1 = catalog::schema_for_id(4001).unwrap();
    let mut framed = vec![0];
    framed.extend_from_slice(&4001u32.to_be_bytes());
    framed.extend(datum_for(&v1.schema, false));
    let without: ExecutorBeat = decode(&framed).unwrap();
    assert!(without.features.is_empty(), "v1 lists no features");
    assert!(!without.has_feature(ExecutorBeat::ROUND_SIGNATURES));
    let bytes = encode(&without).unwrap();
    assert_eq!(bytes, framed, "a beat without features is the v1 datum");

    let with = ExecutorBeat {
        features: vec![ExecutorBeat::ROUND_SIGNATURES.to_owned()],
        ..without
    };
    let bytes = encode(&with).unwrap();
    assert_eq!(bytes[1..5], 4002u32.to_be_bytes());
    let decoded: ExecutorBeat = decode(&bytes).unwrap();
    assert!(decoded.has_feature(ExecutorBeat::ROUND_SIGNATURES));
    assert_eq!(decoded, with);
}

fn sample_trigger() -> TriggerRecord {
    TriggerRecord {
        trigger_id: TriggerId::parse("7-1767225600000").unwrap(),
        log_id: 1,
        job_id: JobId::new(7).unwrap(),
        app: AppName::parse("billing").unwrap(),
        handler: "h".to_owned(),
        params: String::new(),
        shard_index: 0,
        shard_total: 1,
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        trigger_type: TriggerType::Cron,
        scheduled_at_ms: 1_767_225_600_000,
        emitted_at_ms: 1_767_225_600_000,
        attempt: 0,
        glue_type: GlueType::Bean,
        glue_source: None,
        glue_updated_at_ms: None,
        replay_of: None,
        expires_at_ms: None,
    }
}

fn with_extra_field(field: &str) -> Schema {
    let mut json: serde_json::Value = serde_json::from_str(catalog::CURRENT_SOURCES[0].1).unwrap();
    json["fields"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::from_str(field).unwrap());
    Schema::parse_str(&json.to_string()).unwrap()
}

#[test]
fn the_harness_rejects_a_breaking_change_and_accepts_a_compatible_one() {
    let released: Vec<Schema> = catalog::entries()
        .iter()
        .filter(|entry| entry.record == "TriggerRecord")
        .map(|entry| entry.schema.clone())
        .collect();
    let breaking = with_extra_field(r#"{"name": "priority", "type": "int", "doc": "x"}"#);
    let error = check_backward_transitive(&breaking, &released).unwrap_err();
    assert_eq!(error.version, 1);
    assert!(error.reason.contains("priority"), "{error}");
    let compatible = with_extra_field(
        r#"{"name": "priority", "type": ["null", "int"], "default": null, "doc": "x"}"#,
    );
    check_backward_transitive(&compatible, &released).unwrap();
    // A removed enum symbol breaks old data too (REPLAY is in every released version).
    let mut json: serde_json::Value = serde_json::from_str(catalog::CURRENT_SOURCES[0].1).unwrap();
    let field = json["fields"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|field| field["name"] == "trigger_type")
        .unwrap();
    field["type"]["symbols"]
        .as_array_mut()
        .unwrap()
        .retain(|symbol| symbol != "REPLAY");
    let narrowed = Schema::parse_str(&json.to_string()).unwrap();
    let error = check_backward_transitive(&narrowed, &released).unwrap_err();
    assert!(error.to_string().contains("version 1"), "{error}");
}

fn assert_documented(value: &serde_json::Value, path: &str) {
    match value {
        serde_json::Value::Object(map) => {
            let is_named_type = matches!(
                map.get("type").and_then(|t| t.as_str()),
                Some("record" | "enum")
            );
            let is_field = map.contains_key("name") && !is_named_type && path.ends_with("fields");
            if is_named_type || is_field {
                let doc = map.get("doc").and_then(|d| d.as_str()).unwrap_or("");
                assert!(
                    !doc.trim().is_empty(),
                    "{path}: {:?} has no doc",
                    map.get("name")
                );
            }
            for (key, child) in map {
                assert_documented(child, &format!("{path}.{key}"));
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                assert_documented(item, path);
            }
        }
        _ => {}
    }
}

#[test]
fn every_record_enum_and_field_has_a_doc() {
    for (record, source) in CURRENT_SOURCES {
        assert_documented(&serde_json::from_str(source).unwrap(), record);
    }
    for entry in catalog::entries() {
        let path = format!("{} v{}", entry.record, entry.version);
        assert_documented(&serde_json::from_str(entry.source).unwrap(), &path);
    }
}

#[test]
fn a_released_schema_is_found_however_it_is_formatted() {
    for entry in catalog::entries() {
        // Compact, without docs: what a registry client sends is rarely the file's bytes.
        let mut json: serde_json::Value = serde_json::from_str(entry.source).unwrap();
        json.as_object_mut().unwrap().remove("doc");
        let found = catalog::released_version_of(entry.record, &json.to_string()).unwrap();
        assert_eq!(
            found.map(|found| found.id),
            Some(entry.id),
            "{}",
            entry.record
        );
        let elsewhere = catalog::released_version_of("NoSuchRecord", entry.source).unwrap();
        assert!(elsewhere.is_none());
    }
    let error = catalog::released_version_of("TriggerRecord", "{\"type\": \"nonsense\"}");
    assert!(error.is_err(), "{error:?}");
}
