//! Typed decoding of trigger records, the executor's hot path: [`decode_trigger`].
//!
//! The generic codec (`kadence_schemas::codec::decode`) checks the datum's structure, decodes
//! it into apache-avro's `Value` tree, resolves that against the reader schema and only then
//! builds the struct: a dozen allocations and several passes for a record of some 70 bytes,
//! for every trigger. Here the bytes of the current writer schema (`TriggerRecord` v1, schema
//! id 1001) are read straight into a [`TriggerRecord`], field by field, in one pass.
//!
//! Only a record this reader accepts completely takes that way: the frame's schema id is
//! 1001, every field is well formed, the values pass the same checks the types make
//! (`TriggerId`, `JobId`, `AppName`), and no byte is left over. Anything else — another
//! released version of the schema, another record type, a malformed or truncated datum —
//! goes to the generic decoder, which reads what it can and gives the error message the
//! dead letter carries (`schemas/PROTOCOL.md` section 8). So the fast way changes no verdict
//! and no message; the tests hold it to the generic decoder's results on every record they
//! make and on every one-byte change and cut of them.
//!
//! A new version of `TriggerRecord` needs its reader here (until then its records take the
//! generic way, correctly but slower); a test fails while the newest version has none.

use kadence_schemas::codec::{self, CodecError};
use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerRecord, TriggerType,
};

/// The schema id whose records are read here: `TriggerRecord` v1.
const TYPED_SCHEMA_ID: u32 = 1001;

/// Decodes a framed trigger record: typed when it is a well-formed v1 record, through the
/// generic codec otherwise (other versions, and the error of a record that does not decode).
pub(crate) fn decode_trigger(bytes: &[u8]) -> Result<TriggerRecord, CodecError> {
    if let Ok((TYPED_SCHEMA_ID, datum)) = codec::split_frame(bytes)
        && let Some(trigger) = read_v1(datum)
    {
        return Ok(trigger);
    }
    codec::decode::<TriggerRecord>(bytes)
}

/// A v1 datum read field by field in schema order; `None` on anything unexpected.
fn read_v1(datum: &[u8]) -> Option<TriggerRecord> {
    let mut reader = Reader { bytes: datum };
    let trigger = TriggerRecord {
        trigger_id: TriggerId::try_from(reader.string()?).ok()?,
        log_id: reader.long()?,
        job_id: JobId::new(reader.long()?).ok()?,
        app: AppName::try_from(reader.string()?).ok()?,
        handler: reader.string()?,
        params: reader.string()?,
        shard_index: reader.int()?,
        shard_total: reader.int()?,
        block_strategy: reader.symbol(BlockStrategy::ALL)?,
        timeout_ms: reader.long()?,
        trigger_type: reader.symbol(TriggerType::ALL)?,
        scheduled_at_ms: reader.long()?,
        emitted_at_ms: reader.long()?,
        attempt: reader.int()?,
        glue_type: reader.symbol(GlueType::ALL)?,
        glue_source: reader.optional(Reader::string)?,
        glue_updated_at_ms: reader.optional(Reader::long)?,
        replay_of: match reader.optional(Reader::string)? {
            Some(id) => Some(TriggerId::try_from(id).ok()?),
            None => None,
        },
    };
    reader.bytes.is_empty().then_some(trigger)
}

/// Avro binary primitives over the bytes not read yet.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    /// A zig-zag varint of at most 10 bytes whose value fits 64 bits.
    fn long(&mut self) -> Option<i64> {
        let mut raw = 0u64;
        for group in 0..10 {
            let (&byte, rest) = self.bytes.split_first()?;
            self.bytes = rest;
            // The tenth group holds the 64th bit only.
            if group == 9 && byte > 1 {
                return None;
            }
            raw |= u64::from(byte & 0x7F) << (7 * group);
            if byte & 0x80 == 0 {
                return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        None
    }

    fn int(&mut self) -> Option<i32> {
        i32::try_from(self.long()?).ok()
    }

    /// A length-prefixed UTF-8 string.
    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.long()?).ok()?;
        if len > self.bytes.len() {
            return None;
        }
        let (text, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        String::from_utf8(text.to_vec()).ok()
    }

    /// An enum symbol by its index in `symbols` (the schema's order).
    fn symbol<T: Copy>(&mut self, symbols: &[T]) -> Option<T> {
        let index = usize::try_from(self.int()?).ok()?;
        symbols.get(index).copied()
    }

    /// A `["null", T]` union.
    fn optional<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.long()? {
            0 => Some(None),
            1 => read(self).map(Some),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use kadence_schemas::catalog;

    use super::*;
    use crate::context::tests_support::trigger_record;

    /// Records that use every field: long and empty strings, negative and large numbers,
    /// every symbol, each union branch.
    fn samples() -> Vec<TriggerRecord> {
        let job = JobId::new(9_007_199_254_740_993).unwrap();
        let mut samples = vec![trigger_record()];
        for (n, strategy) in BlockStrategy::ALL.iter().enumerate() {
            let n = n as i64;
            samples.push(TriggerRecord {
                trigger_id: TriggerId::scheduled(job, 1_767_225_600_000 + n),
                log_id: -1 - n,
                job_id: job,
                handler: "é".repeat(100),
                params: "{\"region\":\"eu\"}".repeat(20),
                shard_index: i32::MAX,
                shard_total: i32::MIN,
                block_strategy: *strategy,
                timeout_ms: i64::MAX,
                trigger_type: TriggerType::ALL[n as usize % TriggerType::ALL.len()],
                scheduled_at_ms: i64::MIN,
                emitted_at_ms: 0,
                attempt: -7,
                glue_type: GlueType::ALL[n as usize % GlueType::ALL.len()],
                glue_source: (n % 2 == 0).then(|| "echo hi\n".repeat(50)),
                glue_updated_at_ms: (n % 2 == 1).then_some(1 << 40),
                replay_of: (n % 2 == 0).then(|| TriggerId::scheduled(job, 7)),
                ..trigger_record()
            });
        }
        for trigger_type in TriggerType::ALL {
            samples.push(TriggerRecord {
                trigger_type: *trigger_type,
                ..trigger_record()
            });
        }
        for glue_type in GlueType::ALL {
            samples.push(TriggerRecord {
                glue_type: *glue_type,
                ..trigger_record()
            });
        }
        samples
    }

    /// Both decoders' answers as comparable text: the record, or the error message.
    fn verdicts(bytes: &[u8]) -> (String, String) {
        let show = |result: Result<TriggerRecord, CodecError>| match result {
            Ok(trigger) => format!("{trigger:?}"),
            Err(error) => format!("error: {error}"),
        };
        (
            show(decode_trigger(bytes)),
            show(codec::decode::<TriggerRecord>(bytes)),
        )
    }

    #[test]
    fn the_typed_reader_knows_the_newest_trigger_schema() {
        let newest = catalog::latest("TriggerRecord").unwrap();
        assert_eq!(
            newest.id, TYPED_SCHEMA_ID,
            "TriggerRecord has a new version: give decode_trigger a typed reader for it"
        );
    }

    #[test]
    fn well_formed_records_read_as_the_generic_decoder_reads_them_and_take_the_typed_way() {
        for sample in samples() {
            let bytes = codec::encode(&sample).unwrap();
            let (_, datum) = codec::split_frame(&bytes).unwrap();
            assert_eq!(read_v1(datum).as_ref(), Some(&sample), "typed way");
            assert_eq!(decode_trigger(&bytes).unwrap(), sample);
        }
    }

    /// Every cut and every one-byte change of every sample: the typed way never accepts what
    /// the generic decoder refuses, never reads another value, and errors keep their message.
    #[test]
    fn changed_and_cut_records_get_the_generic_decoders_verdict() {
        let mut checked = 0;
        for sample in samples().into_iter().take(6) {
            let bytes = codec::encode(&sample).unwrap();
            for len in 0..bytes.len() {
                let (typed, generic) = verdicts(&bytes[..len]);
                assert_eq!(typed, generic, "cut at {len}");
                checked += 1;
            }
            for at in 0..bytes.len().min(160) {
                for value in [0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF, bytes[at] ^ 0x40] {
                    let mut changed = bytes.clone();
                    changed[at] = value;
                    let (typed, generic) = verdicts(&changed);
                    assert_eq!(typed, generic, "byte {at} set to {value:#04x}");
                    checked += 1;
                }
            }
            let mut longer = bytes.clone();
            longer.push(0);
            let (typed, generic) = verdicts(&longer);
            assert_eq!(typed, generic, "a byte appended");
            assert!(typed.starts_with("error: 1 unexpected bytes"), "{typed}");
        }
        assert!(checked > 1_000);
    }

    #[test]
    fn records_of_other_types_and_unknown_ids_are_refused_as_before() {
        let result = kadence_schemas::ResultRecord {
            trigger_id: TriggerId::parse("1-1000").unwrap(),
            log_id: 1,
            job_id: JobId::new(1).unwrap(),
            app: AppName::parse("billing").unwrap(),
            executor_id: "e1".into(),
            code: 200,
            message: None,
            started_at_ms: 1,
            finished_at_ms: 2,
            attempt: 0,
            retry_after_ms: None,
        };
        let bytes = codec::encode(&result).unwrap();
        let error = decode_trigger(&bytes).unwrap_err().to_string();
        assert!(
            error.starts_with("schema id 2001 is a ResultRecord"),
            "{error}"
        );
        let mut unknown = codec::encode(&trigger_record()).unwrap();
        unknown[4] = 0x99;
        let error = decode_trigger(&unknown).unwrap_err().to_string();
        assert!(error.starts_with("unknown schema id"), "{error}");
    }
}
