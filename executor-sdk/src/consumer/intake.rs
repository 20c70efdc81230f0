//! A received record made a trigger ([`read_trigger`]): its signature verified (when the
//! executor trusts scheduler keys) before anything reads it, then decoded (`decode`, typed);
//! or why it cannot be taken, as a reason and the reason's kind (a metric label). What
//! becomes of a record that cannot be taken is the loop's: a dead letter, or on a shadow
//! executor a skip.

use kadence_kafka::{TrustedKeys, VerifyError};
use kadence_schemas::TriggerRecord;
use rdkafka::message::{Message, OwnedMessage};

/// Why a record cannot be taken: the kind of reason (a metric label) and the reason, as a
/// dead letter carries it.
pub(super) type Refusal = (&'static str, String);

/// The trigger in `message`, verified against `trusted` (when it holds any key) and decoded.
pub(super) fn read_trigger(
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
        VerifyError::Malformed { .. } => "malformed_signature",
    }
}
