//! The order of the checks on a received trigger (PROTOCOL.md section 4, step 1): the
//! signature first, over the exact value bytes, then the value's presence, then its framing
//! and decoding. So an unsigned record is refused as unsigned whatever its bytes, a record
//! with one of the two signature headers is malformed, a key id is compared byte for byte (an
//! upper-case id is an unknown key), and a well-signed record that is not a trigger is
//! undecodable. And a dead letter keeps the original record's headers, in their order, before
//! its own (section 8), so a refused trigger still carries the scheduler's signature.

use std::time::Duration;

use kadence_schemas::{codec, headers};
use rdkafka::ClientConfig;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

use super::Implementation;
use super::lifecycle::read_until_quiet;
use crate::helpers::TestApp;
use kadence_tests::fixtures::wait_for;

/// Each case of a record the executor must refuse: the record's key (which names the case in
/// its dead letter), and the reason its dead letter starts with.
const CASES: [(&str, &str); 6] = [
    ("unsigned-empty", "refused trigger record: unsigned record"),
    (
        "unsigned-garbage",
        "refused trigger record: unsigned record",
    ),
    (
        "half-signed",
        "refused trigger record: malformed signature header kadence.signature.key: missing \
         while the other signature header is there",
    ),
    (
        "upper-case-key",
        "refused trigger record: signed by unknown key ",
    ),
    ("signed-empty", "trigger record has no value"),
    (
        "signed-garbage",
        "undecodable trigger record: record is not Confluent-framed Avro: first byte is 0x7b",
    ),
];

/// Each refusal of [`CASES`], with the reason the protocol's order of checks gives; and the
/// dead letter of the well-signed garbage keeps the scheduler's signature and a header of the
/// producer's own, in their order, before the dead letter's headers.
async fn each_check_refuses_in_the_protocols_order(executor: Implementation) {
    let (app, _process, job_id) = super::runs::stage_verifying(executor, "checked").await;
    let topic = format!("{}.triggers.checked", app.prefix);
    let signer = crate::signing::scheduler_key(&app).await;
    let trigger =
        codec::encode(&crate::signing::count_trigger("checked", job_id.get(), 1)).unwrap();
    let garbage = b"{\"not\": \"avro\"}".as_slice();

    produce(&app, &topic, "unsigned-empty", None, None).await;
    produce(&app, &topic, "unsigned-garbage", Some(garbage), None).await;
    let signature = signer.headers(&topic, &trigger);
    let half = OwnedHeaders::new().insert(Header {
        key: headers::SIGNATURE,
        value: header_value(&signature, headers::SIGNATURE),
    });
    produce(&app, &topic, "half-signed", Some(&trigger), Some(half)).await;
    let upper_case_id = signer.key_id().to_uppercase();
    let upper = OwnedHeaders::new()
        .insert(Header {
            key: headers::SIGNATURE_KEY,
            value: Some(upper_case_id.as_str()),
        })
        .insert(Header {
            key: headers::SIGNATURE,
            value: header_value(&signature, headers::SIGNATURE),
        });
    produce(&app, &topic, "upper-case-key", Some(&trigger), Some(upper)).await;
    produce(
        &app,
        &topic,
        "signed-empty",
        None,
        Some(signer.headers(&topic, b"")),
    )
    .await;
    let signed_garbage = signer.headers(&topic, garbage);
    let with_a_header_of_its_own = OwnedHeaders::new()
        .insert(Header {
            key: headers::SIGNATURE_KEY,
            value: header_value(&signed_garbage, headers::SIGNATURE_KEY),
        })
        .insert(Header {
            key: "x-kadence-test",
            value: Some("kept"),
        })
        .insert(Header {
            key: headers::SIGNATURE,
            value: header_value(&signed_garbage, headers::SIGNATURE),
        });
    produce(
        &app,
        &topic,
        "signed-garbage",
        Some(garbage),
        Some(with_a_header_of_its_own),
    )
    .await;

    let letters = dead_letters_by_key(&app, CASES.len()).await;
    for (case, reason) in CASES {
        assert_refused_as(&letters, case, reason);
    }
    let upper = letters
        .iter()
        .find(|letter| letter.key() == Some(b"upper-case-key".as_slice()))
        .unwrap();
    assert!(header_text(upper, headers::DLQ_REASON).contains(&upper_case_id));

    let kept = letters
        .iter()
        .find(|letter| letter.key() == Some(b"signed-garbage".as_slice()))
        .unwrap();
    assert_eq!(kept.payload(), Some(garbage), "the original bytes");
    let names: Vec<&str> = kept
        .headers()
        .map(|all| all.iter().map(|header| header.key).collect())
        .unwrap_or_default();
    assert_eq!(
        names[..7],
        [
            headers::SIGNATURE_KEY,
            "x-kadence-test",
            headers::SIGNATURE,
            headers::DLQ_REASON,
            headers::DLQ_SOURCE_TOPIC,
            headers::DLQ_SOURCE_PARTITION,
            headers::DLQ_SOURCE_OFFSET,
        ],
        "the original's headers in their order, then the dead letter's: {names:?}"
    );
    assert_eq!(
        header_text(kept, headers::SIGNATURE),
        header_text_of(&signed_garbage, headers::SIGNATURE),
        "the scheduler's signature, as it was"
    );
    app.shutdown().await;
}

/// Produces to partition 0 of `topic` a record keyed `key` with `value` (none: a null value)
/// and `headers`.
async fn produce(
    app: &TestApp,
    topic: &str,
    key: &str,
    value: Option<&[u8]>,
    headers: Option<OwnedHeaders>,
) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &app.brokers)
        .create()
        .expect("test producer");
    let mut record = FutureRecord::<str, [u8]>::to(topic).partition(0).key(key);
    if let Some(value) = value {
        record = record.payload(value);
    }
    if let Some(headers) = headers {
        record = record.headers(headers);
    }
    producer
        .send(record, Timeout::After(Duration::from_secs(10)))
        .await
        .map_err(|(error, _)| error)
        .expect("produce");
}

/// Asserts that among `letters` the one keyed `case` gives a reason starting with `reason`.
pub(super) fn assert_refused_as(letters: &[OwnedMessage], case: &str, reason: &str) {
    let letter = letters
        .iter()
        .find(|letter| letter.key() == Some(case.as_bytes()))
        .unwrap_or_else(|| panic!("no dead letter of {case}"));
    let written = header_text(letter, headers::DLQ_REASON);
    assert!(
        written.starts_with(reason),
        "{case}: {written:?} should start with {reason:?}"
    );
}

/// The dead letters on `{prefix}.dlq` once there are `count` of them.
async fn dead_letters_by_key(app: &TestApp, count: usize) -> Vec<OwnedMessage> {
    let topic = format!("{}.dlq", app.prefix);
    wait_for(
        Duration::from_secs(60),
        &format!("{count} dead letters"),
        || async {
            let letters = read_until_quiet(&app.brokers, &topic).await;
            (letters.len() >= count).then_some(letters)
        },
    )
    .await
}

/// The value of the last header `name` among `all`, as the protocol reads headers.
fn header_value<'a>(all: &'a OwnedHeaders, name: &str) -> Option<&'a [u8]> {
    all.iter()
        .filter(|header| header.key == name)
        .last()
        .and_then(|header| header.value)
}

/// [`header_value`] as text.
fn header_text_of(all: &OwnedHeaders, name: &str) -> String {
    String::from_utf8_lossy(header_value(all, name).unwrap_or_default()).into_owned()
}

/// The text of the header `name` of `message`.
fn header_text(message: &OwnedMessage, name: &str) -> String {
    message
        .headers()
        .map(|all| header_text_of(all, name))
        .unwrap_or_default()
}

on_every_executor!(each_check_refuses_in_the_protocols_order);
