//! Round trips of every record and every malformed input the codec must refuse cleanly.

use apache_avro::types::Value;
use kadence_schemas::catalog;
use kadence_schemas::codec::{self, HEADER_LEN, decode, encode};
use kadence_schemas::{
    AppName, AvroRecord, BlockStrategy, CodecError, ControlCommand, ControlRecord, ExecutorBeat,
    ExecutorState, GlueType, JobId, LogRecord, ResultRecord, TriggerId, TriggerRecord, TriggerType,
};

fn job() -> JobId {
    JobId::new(42).unwrap()
}

fn app() -> AppName {
    AppName::parse("billing").unwrap()
}

fn trigger(full: bool) -> TriggerRecord {
    TriggerRecord {
        trigger_id: TriggerId::scheduled(job(), 1_767_225_600_000),
        log_id: 9,
        job_id: job(),
        app: app(),
        handler: "sendReport".into(),
        params: "{\"region\":\"eu\"} ünïcode".into(),
        shard_index: 2,
        shard_total: 6,
        block_strategy: BlockStrategy::CoverEarly,
        timeout_ms: 30_000,
        trigger_type: TriggerType::Misfire,
        scheduled_at_ms: 1_767_225_600_000,
        emitted_at_ms: 1_767_225_600_003,
        attempt: 1,
        glue_type: if full {
            GlueType::GluePython
        } else {
            GlueType::Bean
        },
        glue_source: full.then(|| "print('hi')".to_owned()),
        glue_updated_at_ms: full.then_some(1_700_000_000_000),
        replay_of: full.then(|| TriggerId::fresh(job())),
        expires_at_ms: full.then_some(1_767_229_200_000),
    }
}

fn result(full: bool) -> ResultRecord {
    ResultRecord {
        trigger_id: TriggerId::scheduled(job(), 5_000).retry(1),
        log_id: 10,
        job_id: job(),
        app: app(),
        executor_id: "billing-host-1".into(),
        code: if full { 500 } else { 200 },
        message: full.then(|| "boom".to_owned()),
        started_at_ms: 5_001,
        finished_at_ms: 5_900,
        attempt: 1,
        retry_after_ms: full.then_some(30_000),
    }
}

fn control(full: bool) -> ControlRecord {
    ControlRecord {
        command: ControlCommand::Kill,
        app: app(),
        job_id: full.then(job),
        trigger_id: full.then(|| TriggerId::scheduled(job(), 1_767_225_600_000)),
        reason: full.then(|| "stuck on a database lock".to_owned()),
        requested_at_ms: 1_767_225_660_000,
    }
}

fn beat(full: bool) -> ExecutorBeat {
    ExecutorBeat {
        executor_id: "billing-7f9c-1".into(),
        app: app(),
        host: "node-3.eu-west-1.internal".into(),
        version: "0.1.0".into(),
        handlers: if full {
            vec!["sendReport".into(), "closeBooks".into()]
        } else {
            vec![]
        },
        owned_partitions: if full { vec![0, 2, 5] } else { vec![] },
        running_jobs: if full { vec![42] } else { vec![] },
        queued_jobs: if full { vec![42, 43] } else { vec![] },
        state: if full {
            ExecutorState::Stopping
        } else {
            ExecutorState::Running
        },
        sent_at_ms: 1_767_225_600_500,
        features: if full {
            vec![ExecutorBeat::ROUND_SIGNATURES.into()]
        } else {
            vec![]
        },
    }
}

fn log(full: bool) -> LogRecord {
    LogRecord {
        trigger_id: TriggerId::shard(job(), 1_767_225_600_000, 3),
        log_id: 9,
        job_id: job(),
        executor_id: "billing-7f9c-1".into(),
        first_line: 11,
        lines: if full {
            vec!["starting report for eu".into(), "".into(), "done ✓".into()]
        } else {
            vec![]
        },
        emitted_at_ms: 1_767_225_601_000,
        run_started_at_ms: full.then_some(1_767_225_600_002),
    }
}

/// Decodes as `R`, dropping the value: lets one loop cover every record type.
type Decoder = fn(&[u8]) -> Result<(), CodecError>;

fn decoder<R: AvroRecord>() -> Decoder {
    |bytes| decode::<R>(bytes).map(drop)
}

/// `(record name, encoding, decoder)` of every record, with optional fields set and unset.
fn every_encoding() -> Vec<(&'static str, Vec<u8>, Decoder)> {
    let mut all = Vec::new();
    for full in [false, true] {
        all.push((
            "TriggerRecord",
            encode(&trigger(full)).unwrap(),
            decoder::<TriggerRecord>(),
        ));
        all.push((
            "ResultRecord",
            encode(&result(full)).unwrap(),
            decoder::<ResultRecord>(),
        ));
        all.push((
            "ControlRecord",
            encode(&control(full)).unwrap(),
            decoder::<ControlRecord>(),
        ));
        all.push((
            "ExecutorBeat",
            encode(&beat(full)).unwrap(),
            decoder::<ExecutorBeat>(),
        ));
        all.push((
            "LogRecord",
            encode(&log(full)).unwrap(),
            decoder::<LogRecord>(),
        ));
    }
    all
}

/// The datum apache-avro's generic encoder writes: the record as a `Value` tree, resolved
/// against the writer schema. The codec's direct serializer must write the same bytes.
fn generic_datum<R: AvroRecord>(record: &R) -> Vec<u8> {
    let schema = &record.writer_entry_for().schema;
    let value = apache_avro::to_value(record)
        .and_then(|value| value.resolve(schema))
        .unwrap();
    apache_avro::to_avro_datum(schema, value).unwrap()
}

fn round_trip<R: AvroRecord + PartialEq + std::fmt::Debug>(record: R) {
    let bytes = encode(&record).unwrap();
    assert_eq!(
        &bytes[1..HEADER_LEN],
        &record.writer_entry_for().id.to_be_bytes()
    );
    assert_eq!(
        &bytes[HEADER_LEN..],
        generic_datum(&record).as_slice(),
        "{} written differently from apache-avro's generic encoder: are the struct's fields in \
         the schema's order?",
        R::RECORD
    );
    assert_eq!(decode::<R>(&bytes).unwrap(), record);
}

#[test]
fn every_record_round_trips_with_optional_fields_set_and_unset() {
    for full in [false, true] {
        round_trip(trigger(full));
        round_trip(result(full));
        round_trip(control(full));
        round_trip(beat(full));
        round_trip(log(full));
    }
    // Every enum symbol survives the trip.
    for &trigger_type in TriggerType::ALL {
        round_trip(TriggerRecord {
            trigger_type,
            ..trigger(false)
        });
    }
    for &block_strategy in BlockStrategy::ALL {
        round_trip(TriggerRecord {
            block_strategy,
            ..trigger(false)
        });
    }
    for &glue_type in GlueType::ALL {
        round_trip(TriggerRecord {
            glue_type,
            ..trigger(true)
        });
    }
}

#[test]
fn the_allocation_cap_is_in_force() {
    encode(&trigger(false)).unwrap();
    assert_eq!(codec::limit_allocations(), codec::MAX_ALLOCATION_BYTES);
}

#[test]
fn frames_start_with_magic_byte_and_the_catalog_id() {
    let bytes = encode(&trigger(false)).unwrap();
    assert_eq!(&bytes[..HEADER_LEN], &[0, 0, 0, 0x03, 0xE9]); // id 1001
    let bytes = encode(&result(false)).unwrap();
    assert_eq!(&bytes[..HEADER_LEN], &[0, 0, 0, 0x07, 0xD1]); // id 2001
}

#[test]
fn malformed_frames_are_refused_with_a_clear_error() {
    assert!(matches!(
        decode::<TriggerRecord>(&[]),
        Err(CodecError::Empty)
    ));
    for len in 1..HEADER_LEN {
        let short = vec![0u8; len];
        assert!(
            matches!(decode::<TriggerRecord>(&short), Err(CodecError::TooShort { len: l }) if l == len)
        );
    }
    let json = br#"{"trigger_id":"1-2"}"#;
    let error = decode::<TriggerRecord>(json).unwrap_err();
    assert!(matches!(error, CodecError::WrongMagicByte { found: b'{' }));
    assert_eq!(
        error.to_string(),
        "record is not Confluent-framed Avro: first byte is 0x7b, expected 0x00"
    );
    let mut unknown = encode(&trigger(false)).unwrap();
    unknown[1..5].copy_from_slice(&999_999u32.to_be_bytes());
    let error = decode::<TriggerRecord>(&unknown).unwrap_err();
    assert!(matches!(
        error,
        CodecError::UnknownSchemaId { id: 999_999, .. }
    ));
    // The dead-letter reason names what this reader would have accepted.
    assert_eq!(
        error.to_string(),
        "unknown schema id 999999: this reader accepts TriggerRecord ids 1001, 1002, 1003; the record was \
         written by a newer Kadence (upgrade this reader) or not by Kadence"
    );
    let result_bytes = encode(&result(false)).unwrap();
    let error = decode::<TriggerRecord>(&result_bytes).unwrap_err();
    assert_eq!(
        error.to_string(),
        "schema id 2001 is a ResultRecord, expected a TriggerRecord: the producer wrote to the wrong topic"
    );
}

#[test]
fn every_truncation_and_trailing_garbage_fail_cleanly() {
    for (record, bytes, decode) in every_encoding() {
        assert!(decode(&bytes).is_ok(), "{record}");
        for cut in HEADER_LEN..bytes.len() {
            let error = decode(&bytes[..cut]).expect_err("truncated record decoded");
            assert!(
                matches!(error, CodecError::MalformedAvro { .. })
                    && error.to_string().contains("truncated"),
                "{record} cut at {cut}: {error}"
            );
        }
        let mut trailing = bytes.clone();
        trailing.extend_from_slice(b"xyz");
        let error = decode(&trailing).unwrap_err();
        assert!(
            matches!(error, CodecError::TrailingBytes { count: 3, .. }),
            "{record}: {error}"
        );
    }
}

#[test]
fn an_invalid_value_inside_a_valid_datum_is_refused() {
    // A trigger id that is valid Avro but not a valid Kadence trigger id.
    let mut bytes = encode(&trigger(false)).unwrap();
    let id = TriggerId::scheduled(job(), 1_767_225_600_000);
    let at = bytes
        .windows(id.as_str().len())
        .position(|window| window == id.as_str().as_bytes())
        .unwrap();
    bytes[at] = b'x'; // "x2-…": no longer starts with a job id
    let error = decode::<TriggerRecord>(&bytes).unwrap_err();
    assert!(matches!(error, CodecError::InvalidValue { .. }), "{error}");
    assert!(error.to_string().contains("invalid trigger id"), "{error}");

    // A job id that is a valid Avro long but not a positive Kadence job id.
    let entry = catalog::schema_for_id(ResultRecord::schema_id()).unwrap();
    let mut value = match apache_avro::to_value(result(false)).unwrap() {
        Value::Record(fields) => fields,
        other => panic!("{other:?}"),
    };
    for (name, field) in &mut value {
        if name == "job_id" {
            *field = Value::Long(0);
        }
    }
    let datum = apache_avro::to_avro_datum(
        &entry.schema,
        Value::Record(value).resolve(&entry.schema).unwrap(),
    )
    .unwrap();
    let mut framed = vec![0];
    framed.extend(entry.id.to_be_bytes());
    framed.extend(datum);
    let error = decode::<ResultRecord>(&framed).unwrap_err();
    assert!(matches!(error, CodecError::InvalidValue { .. }), "{error}");
    assert!(error.to_string().contains("invalid job id"), "{error}");
}

/// Avro's zig-zag varint encoding of `value`.
fn varint(value: i64) -> Vec<u8> {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    let mut bytes = Vec::new();
    while raw > 0x7F {
        bytes.push(raw as u8 | 0x80);
        raw >>= 7;
    }
    bytes.push(raw as u8);
    bytes
}

#[test]
fn huge_length_prefixes_error_without_allocating_them() {
    // TriggerRecord's first field is a string; claim ~2^62 bytes, then 10 MiB (under the
    // allocation cap, so only the structural check stands between it and a 10 MiB buffer).
    for claimed in [i64::MAX / 2, 10 << 20] {
        let mut bytes = vec![0, 0, 0, 0x03, 0xE9];
        bytes.extend(varint(claimed));
        bytes.extend_from_slice(b"7-100");
        let error = decode::<TriggerRecord>(&bytes).unwrap_err();
        assert!(matches!(error, CodecError::MalformedAvro { .. }), "{error}");
        assert!(error.to_string().contains("field trigger_id"), "{error}");
    }
    // An ExecutorBeat claiming 16 million handlers in a few bytes: apache-avro alone would
    // reserve 16M × 56 bytes for it before reading the first one.
    let mut bytes = encode(&beat(false)).unwrap()[..HEADER_LEN].to_vec();
    for text in ["e1", "billing", "host", "0.1.0"] {
        bytes.extend(varint(text.len() as i64));
        bytes.extend_from_slice(text.as_bytes());
    }
    bytes.extend(varint(16_000_000));
    bytes.extend_from_slice(&[2, b'x']);
    let error = decode::<ExecutorBeat>(&bytes).unwrap_err();
    assert!(
        error.to_string().contains("field handlers")
            && error.to_string().contains("claims 16000000 items"),
        "{error}"
    );
}

#[test]
fn random_garbage_never_panics() {
    // A small deterministic generator (xorshift) keeps this test reproducible without deps.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let encodings = every_encoding();
    let ids: Vec<u32> = catalog::entries().iter().map(|entry| entry.id).collect();
    for round in 0..6_000 {
        let (_, valid, _) = &encodings[(next() as usize) % encodings.len()];
        let bytes: Vec<u8> = match round % 3 {
            // A catalog id, random body.
            0 => {
                let mut framed = vec![0];
                framed.extend(ids[(next() as usize) % ids.len()].to_be_bytes());
                framed.extend((0..(next() % 200)).map(|_| next() as u8));
                framed
            }
            // A valid record with a few bytes overwritten.
            1 => {
                let mut mutated = valid.clone();
                for _ in 0..(1 + next() % 4) {
                    let at = HEADER_LEN + (next() as usize) % (mutated.len() - HEADER_LEN);
                    mutated[at] = next() as u8;
                }
                mutated
            }
            // Anything at all, usually refused at the frame.
            _ => (0..(next() % 64)).map(|_| next() as u8).collect(),
        };
        for (_, _, decode) in &encodings[..5] {
            let _ = decode(&bytes);
        }
    }
}
