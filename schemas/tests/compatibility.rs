//! The compatibility harness: every record's current schema must read data written with every
//! released version (BACKWARD_TRANSITIVE), every released version must be in the catalog, and
//! every record and field must be documented. It runs on each change, so a breaking schema edit
//! fails here before it reaches a topic.

use std::collections::HashSet;

use apache_avro::types::{Record, Value};
use apache_avro::{Schema, to_avro_datum};
use kadence_schemas::catalog::{self, CURRENT_SOURCES, check_backward_transitive};
use kadence_schemas::codec::decode;
use kadence_schemas::{ResultRecord, TriggerRecord};

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

#[test]
fn data_written_with_a_released_version_decodes_into_the_current_type() {
    let entry = catalog::schema_for_id(2001).unwrap();
    let mut record = Record::new(&entry.schema).unwrap();
    record.put("trigger_id", "7-1000");
    record.put("log_id", 1i64);
    record.put("job_id", 7i64);
    record.put("app", "demo");
    record.put("executor_id", "e1");
    record.put("code", 200i32);
    record.put("message", Value::Union(0, Box::new(Value::Null)));
    record.put("started_at_ms", 10i64);
    record.put("finished_at_ms", 20i64);
    record.put("attempt", 0i32);
    record.put("retry_after_ms", Value::Union(0, Box::new(Value::Null)));
    let mut framed = vec![0];
    framed.extend_from_slice(&entry.id.to_be_bytes());
    framed.extend(to_avro_datum(&entry.schema, record).unwrap());
    let decoded: ResultRecord = decode(&framed).unwrap();
    assert_eq!(decoded.trigger_id.as_str(), "7-1000");
    assert_eq!(decoded.code, 200);
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
    // Decoding still goes through the current type.
    let _ = decode::<TriggerRecord>(&[]).unwrap_err();
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
}
