//! A received record made a trigger ([`read_trigger`]): its signature verified (when the
//! executor trusts scheduler keys) before anything reads it, then decoded (`decode`, typed),
//! then held to its validity window (a trigger received after its `expires_at_ms` is a copy
//! or waited too long, and never runs); or why it cannot be taken, as a reason and the
//! reason's kind (a metric label). What
//! becomes of a record that cannot be taken is the loop's: a dead letter, or on a shadow
//! executor a skip.

use kadence_kafka::{TrustedKeys, VerifyError};
use kadence_schemas::TriggerRecord;
use rdkafka::message::{Message, OwnedMessage};

/// Why a record cannot be taken: the kind of reason (a metric label) and the reason, as a
/// dead letter carries it.
pub(super) type Refusal = (&'static str, String);

/// The trigger in `message`, verified against `trusted` (when it holds any key), decoded, and
/// still valid at `now_ms`.
pub(super) fn read_trigger(
    trusted: &TrustedKeys,
    message: &OwnedMessage,
    now_ms: i64,
) -> Result<TriggerRecord, Refusal> {
    let trigger = verified_and_decoded(trusted, message)?;
    match trigger.expires_at_ms {
        Some(expires_at_ms) if trigger.expired_at(now_ms) => {
            Err(("expired", expired_reason(&trigger, expires_at_ms, now_ms)))
        }
        _ => Ok(trigger),
    }
}

/// The dead letter's reason for a trigger received past its validity (`schemas/PROTOCOL.md`
/// section 4 fixes its opening words, which every SDK writes alike).
fn expired_reason(trigger: &TriggerRecord, expires_at_ms: i64, now_ms: i64) -> String {
    format!(
        "expired trigger record: {} was valid until {expires_at_ms} (ms since the epoch) and \
         arrived {} ms later; a copy, or a trigger that waited in its topic past its validity",
        trigger.trigger_id,
        now_ms - expires_at_ms
    )
}

fn verified_and_decoded(
    trusted: &TrustedKeys,
    message: &OwnedMessage,
) -> Result<TriggerRecord, Refusal> {
    if !trusted.is_empty()
        && let Err(error) = trusted.verify_message(message)
    {
        return Err((
            refusal_kind(&error),
            format!("refused trigger record: {error}"),
        ));
    }
    match message.payload() {
        None => Err(("no_value", "trigger record has no value".to_owned())),
        Some(bytes) => crate::decode::decode_trigger(bytes).map_err(|error| {
            (
                "undecodable",
                format!("undecodable trigger record: {error}"),
            )
        }),
    }
}

/// The kind of a signature refusal, as a metric label.
pub(super) fn refusal_kind(error: &VerifyError) -> &'static str {
    match error {
        VerifyError::Unsigned => "unsigned",
        VerifyError::UnknownKey { .. } => "unknown_key",
        VerifyError::BadSignature { .. } => "bad_signature",
        VerifyError::BadProof { .. } => "bad_proof",
        VerifyError::Malformed { .. } => "malformed_signature",
    }
}

#[cfg(test)]
mod tests {
    use kadence_schemas::codec;
    use rdkafka::Timestamp;

    use super::*;
    use crate::context::tests_support::trigger_record;

    fn received(trigger: &TriggerRecord) -> OwnedMessage {
        let payload = codec::encode(trigger).unwrap();
        OwnedMessage::new(
            Some(payload),
            None,
            "p.triggers.demo".into(),
            Timestamp::NotAvailable,
            0,
            7,
            None,
        )
    }

    #[test]
    fn a_trigger_is_taken_until_its_window_ends_and_refused_as_expired_after() {
        let unverified = TrustedKeys::new([]);
        let windowed = TriggerRecord {
            expires_at_ms: Some(5_000),
            ..trigger_record()
        };
        let message = received(&windowed);
        assert_eq!(
            read_trigger(&unverified, &message, 5_000),
            Ok(windowed.clone())
        );
        let (kind, reason) = read_trigger(&unverified, &message, 5_250).unwrap_err();
        assert_eq!(kind, "expired");
        assert_eq!(
            reason,
            "expired trigger record: 1-1000 was valid until 5000 (ms since the epoch) and \
             arrived 250 ms later; a copy, or a trigger that waited in its topic past its validity"
        );
        let unwindowed = received(&trigger_record());
        assert!(
            read_trigger(&unverified, &unwindowed, i64::MAX).is_ok(),
            "no window"
        );
    }
}
