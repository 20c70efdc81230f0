//! Round trips of every record and every malformed input the codec must refuse cleanly.

use kadence_schemas::codec::{HEADER_LEN, decode, encode};
use kadence_schemas::{
    AppName, BlockStrategy, CodecError, ControlCommand, ControlRecord, ExecutorBeat, ExecutorState,
    GlueType, JobId, LogRecord, ResultRecord, TriggerId, TriggerRecord, TriggerType,
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

#[test]
fn every_record_round_trips_with_optional_fields_set_and_unset() {
    for full in [false, true] {
        let record = trigger(full);
        assert_eq!(
            decode::<TriggerRecord>(&encode(&record).unwrap()).unwrap(),
            record
        );
        let record = result(full);
        assert_eq!(
            decode::<ResultRecord>(&encode(&record).unwrap()).unwrap(),
            record
        );
        let record = ControlRecord {
            command: ControlCommand::Kill,
            app: app(),
            job_id: full.then(job),
            trigger_id: full.then(|| TriggerId::scheduled(job(), 1)),
            reason: full.then(|| "operator".to_owned()),
            requested_at_ms: 77,
        };
        assert_eq!(
            decode::<ControlRecord>(&encode(&record).unwrap()).unwrap(),
            record
        );
        let record = ExecutorBeat {
            executor_id: "e1".into(),
            app: app(),
            host: "host".into(),
            version: "0.1.0".into(),
            handlers: if full {
                vec!["a".into(), "b".into()]
            } else {
                vec![]
            },
            owned_partitions: if full { vec![0, 2] } else { vec![] },
            running_jobs: if full { vec![42] } else { vec![] },
            queued_jobs: vec![],
            state: if full {
                ExecutorState::Stopping
            } else {
                ExecutorState::Running
            },
            sent_at_ms: 88,
        };
        assert_eq!(
            decode::<ExecutorBeat>(&encode(&record).unwrap()).unwrap(),
            record
        );
        let record = LogRecord {
            trigger_id: TriggerId::scheduled(job(), 1),
            log_id: 3,
            job_id: job(),
            executor_id: "e1".into(),
            first_line: 11,
            lines: if full {
                vec!["one".into(), "".into()]
            } else {
                vec![]
            },
            emitted_at_ms: 99,
        };
        assert_eq!(
            decode::<LogRecord>(&encode(&record).unwrap()).unwrap(),
            record
        );
    }
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
    assert!(matches!(
        decode::<TriggerRecord>(&unknown),
        Err(CodecError::UnknownSchemaId { id: 999_999 })
    ));
    let result_bytes = encode(&result(false)).unwrap();
    let error = decode::<TriggerRecord>(&result_bytes).unwrap_err();
    assert_eq!(
        error.to_string(),
        "schema id 2001 is a ResultRecord, expected a TriggerRecord"
    );
}

#[test]
fn every_truncation_and_trailing_garbage_fail_cleanly() {
    let bytes = encode(&trigger(true)).unwrap();
    for cut in HEADER_LEN..bytes.len() {
        let error = decode::<TriggerRecord>(&bytes[..cut]).expect_err("truncated record decoded");
        assert!(
            matches!(
                error,
                CodecError::MalformedAvro { .. } | CodecError::InvalidValue { .. }
            ),
            "cut at {cut}: {error}"
        );
    }
    let mut trailing = bytes.clone();
    trailing.extend_from_slice(b"xyz");
    assert!(matches!(
        decode::<TriggerRecord>(&trailing),
        Err(CodecError::TrailingBytes { count: 3, .. })
    ));
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
}

#[test]
fn a_huge_length_prefix_errors_without_allocating_it() {
    // Header of TriggerRecord v1, then a string length of ~2^62 (zig-zag varint).
    let mut bytes = vec![0, 0, 0, 0x03, 0xE9];
    bytes.extend_from_slice(&[0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]);
    let error = decode::<TriggerRecord>(&bytes).unwrap_err();
    assert!(matches!(error, CodecError::MalformedAvro { .. }), "{error}");
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
    let valid = encode(&trigger(true)).unwrap();
    for round in 0..5_000 {
        let mut bytes: Vec<u8> = if round % 2 == 0 {
            // Valid header, random body.
            let mut framed = valid[..HEADER_LEN].to_vec();
            framed.extend((0..(next() % 200)).map(|_| next() as u8));
            framed
        } else {
            // A valid record with a few bytes flipped.
            let mut mutated = valid.clone();
            for _ in 0..(1 + next() % 4) {
                let at = HEADER_LEN + (next() as usize) % (mutated.len() - HEADER_LEN);
                mutated[at] = next() as u8;
            }
            mutated
        };
        bytes.truncate(bytes.len().max(HEADER_LEN));
        let _ = decode::<TriggerRecord>(&bytes);
        let _ = decode::<ResultRecord>(&bytes);
    }
}
