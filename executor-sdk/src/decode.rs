//! Typed decoding of trigger records, the executor's hot path: [`decode_trigger`].
//!
//! The generic codec (`kadence_schemas::codec::decode`) checks the datum's structure, decodes
//! it into apache-avro's `Value` tree, resolves that against the reader schema and only then
//! builds the struct: a dozen allocations and several passes for a record of some 70 bytes,
//! for every trigger. Here the bytes of the released writer schemas whose fields this module
//! knows (`TriggerRecord` v1, schema id 1001, v2, 1002, and v3, 1003) are read straight into
//! a [`TriggerRecord`], field by field, in one pass.
//!
//! v1 and v2 have the same fields; v2 appends the trigger type `BACKFILL` to the enum, and v3
//! appends the field `expires_at_ms` (a `["null", "long"]` union) to v2. A datum names an enum symbol by its index in its *writer's* schema, so each version
//! reads its enums through its own table of symbols, built from the catalog's schema (the
//! symbols matched by name, as Avro's schema resolution matches them): a v1 record whose
//! trigger type is index 9 names no symbol of v1 and is refused as the generic decoder
//! refuses it, although `TriggerType` has a tenth variant.
//!
//! Only a record this reader accepts completely takes that way: the frame's schema id is one
//! of those versions', every field is well formed, the values pass the same checks the types
//! make (`TriggerId`, `JobId`, `AppName`), and no byte is left over. Anything else — another
//! released version of the schema, another record type, a malformed or truncated datum —
//! goes to the generic decoder, which reads what it can and gives the error message the
//! dead letter carries (`schemas/PROTOCOL.md` section 8). So the fast way changes no verdict
//! and no message; the tests hold it to the generic decoder's results on every record they
//! make, under each version, and on every one-byte change and cut of them.
//!
//! A new version of `TriggerRecord` needs its reader here (until then its records take the
//! generic way, correctly but slower): its id in [`TYPED_SCHEMA_IDS`], and what it appends to
//! the fields read by [`read_typed`]. A test fails while the newest version has none.

use std::sync::LazyLock;

use apache_avro::Schema;
use kadence_schemas::codec::{self, CodecError};
use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerRecord, TriggerType, catalog,
};

/// The schema ids whose records are read here: `TriggerRecord` v1 and v2, which have the same
/// fields in the same order, and v3, which appends `expires_at_ms`.
const TYPED_SCHEMA_IDS: [u32; 3] = [1001, 1002, 1003];

/// One typed version: the symbols of its enums, by the index its schema gives them. `None`
/// for a symbol the Rust enum lacks (no released version has one; such a datum would take
/// the generic way, which says what is wrong).
struct TypedVersion {
    schema_id: u32,
    /// Whether the datum ends with `expires_at_ms` (v3 on).
    has_validity: bool,
    block_strategies: Vec<Option<BlockStrategy>>,
    trigger_types: Vec<Option<TriggerType>>,
    glue_types: Vec<Option<GlueType>>,
}

static TYPED_VERSIONS: LazyLock<Vec<TypedVersion>> = LazyLock::new(|| {
    TYPED_SCHEMA_IDS
        .iter()
        .map(|&id| TypedVersion::of(id))
        .collect()
});

impl TypedVersion {
    /// The tables of released version `schema_id`, from the catalog.
    fn of(schema_id: u32) -> TypedVersion {
        let entry = catalog::schema_for_id(schema_id)
            .unwrap_or_else(|| panic!("typed trigger schema {schema_id} is not released"));
        TypedVersion {
            schema_id,
            has_validity: has_field(&entry.schema, "expires_at_ms"),
            block_strategies: symbols(&entry.schema, "block_strategy", BlockStrategy::ALL, |s| {
                s.as_str()
            }),
            trigger_types: symbols(&entry.schema, "trigger_type", TriggerType::ALL, |t| {
                t.as_str()
            }),
            glue_types: symbols(&entry.schema, "glue_type", GlueType::ALL, |g| g.as_str()),
        }
    }
}

/// Whether the record `schema` has a field named `field`.
fn has_field(schema: &Schema, field: &str) -> bool {
    let Schema::Record(record) = schema else {
        panic!("the TriggerRecord schema is a record");
    };
    record.lookup.contains_key(field)
}

/// The symbols of the enum field `field` of the record `schema`, in the schema's order, each
/// as the variant of `all` that `name` gives that symbol.
fn symbols<T: Copy>(
    schema: &Schema,
    field: &str,
    all: &[T],
    name: fn(T) -> &'static str,
) -> Vec<Option<T>> {
    let Schema::Record(record) = schema else {
        panic!("the TriggerRecord schema is a record");
    };
    let found = record
        .fields
        .iter()
        .find(|candidate| candidate.name == field);
    let Some(Schema::Enum(enumeration)) = found.map(|field| &field.schema) else {
        panic!("TriggerRecord field {field} is an enum");
    };
    enumeration
        .symbols
        .iter()
        .map(|symbol| all.iter().copied().find(|value| name(*value) == symbol))
        .collect()
}

/// Decodes a framed trigger record: typed when it is a well-formed record of a typed version,
/// through the generic codec otherwise (other versions, and the error of a record that does
/// not decode).
pub(crate) fn decode_trigger(bytes: &[u8]) -> Result<TriggerRecord, CodecError> {
    if let Ok((schema_id, datum)) = codec::split_frame(bytes)
        && let Some(version) = TYPED_VERSIONS.iter().find(|v| v.schema_id == schema_id)
        && let Some(trigger) = read_typed(datum, version)
    {
        return Ok(trigger);
    }
    codec::decode::<TriggerRecord>(bytes)
}

/// A datum of `version` read field by field in schema order; `None` on anything unexpected.
fn read_typed(datum: &[u8], version: &TypedVersion) -> Option<TriggerRecord> {
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
        block_strategy: reader.symbol(&version.block_strategies)?,
        timeout_ms: reader.long()?,
        trigger_type: reader.symbol(&version.trigger_types)?,
        scheduled_at_ms: reader.long()?,
        emitted_at_ms: reader.long()?,
        attempt: reader.int()?,
        glue_type: reader.symbol(&version.glue_types)?,
        glue_source: reader.optional(Reader::string)?,
        glue_updated_at_ms: reader.optional(Reader::long)?,
        replay_of: match reader.optional(Reader::string)? {
            Some(id) => Some(TriggerId::try_from(id).ok()?),
            None => None,
        },
        expires_at_ms: if version.has_validity {
            reader.optional(Reader::long)?
        } else {
            None
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

    /// An enum symbol by its index in `symbols` (the writer schema's order).
    fn symbol<T: Copy>(&mut self, symbols: &[Option<T>]) -> Option<T> {
        let index = usize::try_from(self.int()?).ok()?;
        symbols.get(index).copied().flatten()
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
        samples.push(TriggerRecord {
            trigger_type: TriggerType::Backfill,
            block_strategy: BlockStrategy::CoverEarly,
            glue_type: GlueType::GluePython,
            glue_source: Some("print('late')".into()),
            replay_of: Some(TriggerId::scheduled(job, 9)),
            ..samples[1].clone()
        });
        // Validity windows (v3 only), on a few of the above and on a backfill.
        let windowed: Vec<TriggerRecord> = [0, 1, 2, samples.len() - 1]
            .into_iter()
            .zip([1_767_229_200_000, i64::MIN, i64::MAX, 0])
            .map(|(at, expires_at_ms)| TriggerRecord {
                expires_at_ms: Some(expires_at_ms),
                ..samples[at].clone()
            })
            .collect();
        samples.extend(windowed);
        samples
    }

    /// How many samples have a validity window (only v3 holds them).
    const WINDOWED_SAMPLES: usize = 4;

    /// `record` framed as version `schema_id`, written by apache-avro's generic encoder with
    /// that version's schema (the codec writes each trigger with one version only; other
    /// writers may use any); `None` when that version cannot hold it (BACKFILL under v1, a
    /// validity window before v3). The generic encoder, not the codec's direct writer: a
    /// record without a window leaves `expires_at_ms` out, which only the generic encoder
    /// fills in from the schema's default under v3.
    fn framed_as(record: &TriggerRecord, schema_id: u32) -> Option<Vec<u8>> {
        let entry = catalog::schema_for_id(schema_id).unwrap();
        if record.expires_at_ms.is_some() && !has_field(&entry.schema, "expires_at_ms") {
            return None;
        }
        let value = apache_avro::to_value(record)
            .ok()?
            .resolve(&entry.schema)
            .ok()?;
        let mut framed = vec![codec::MAGIC_BYTE];
        framed.extend_from_slice(&schema_id.to_be_bytes());
        framed.extend(apache_avro::to_avro_datum(&entry.schema, value).ok()?);
        Some(framed)
    }

    /// Every sample under every typed version that holds it.
    fn framed_samples() -> Vec<(TriggerRecord, u32, Vec<u8>)> {
        let mut framed = Vec::new();
        for sample in samples() {
            for schema_id in TYPED_SCHEMA_IDS {
                if let Some(bytes) = framed_as(&sample, schema_id) {
                    framed.push((sample.clone(), schema_id, bytes));
                }
            }
        }
        framed
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

    fn typed_version(schema_id: u32) -> &'static TypedVersion {
        TYPED_VERSIONS
            .iter()
            .find(|version| version.schema_id == schema_id)
            .unwrap()
    }

    #[test]
    fn the_typed_reader_knows_the_newest_trigger_schema() {
        let newest = catalog::latest("TriggerRecord").unwrap();
        assert!(
            TYPED_SCHEMA_IDS.contains(&newest.id),
            "TriggerRecord has a new version ({}): give decode_trigger a typed reader for it",
            newest.id
        );
    }

    #[test]
    fn each_version_reads_the_symbols_its_schema_lists() {
        let v1 = typed_version(1001);
        assert_eq!(v1.trigger_types.len(), 9);
        assert!(!v1.trigger_types.contains(&Some(TriggerType::Backfill)));
        let v2 = typed_version(1002);
        assert_eq!(v2.trigger_types.last(), Some(&Some(TriggerType::Backfill)));
        for version in [v1, v2] {
            assert!(version.block_strategies.iter().all(Option::is_some));
            assert!(version.trigger_types.iter().all(Option::is_some));
            assert!(version.glue_types.iter().all(Option::is_some));
        }
        assert_eq!(v2.trigger_types.len(), TriggerType::ALL.len());
    }

    #[test]
    fn well_formed_records_read_as_the_generic_decoder_reads_them_and_take_the_typed_way() {
        let framed = framed_samples();
        for (sample, schema_id, bytes) in &framed {
            let (_, datum) = codec::split_frame(bytes).unwrap();
            let version = typed_version(*schema_id);
            assert_eq!(
                read_typed(datum, version).as_ref(),
                Some(sample),
                "{schema_id}"
            );
            assert_eq!(&decode_trigger(bytes).unwrap(), sample);
            assert_eq!(&codec::decode::<TriggerRecord>(bytes).unwrap(), sample);
        }
        let under = |id: u32| {
            framed
                .iter()
                .filter(|(_, schema_id, _)| *schema_id == id)
                .count()
        };
        let all = samples().len();
        assert_eq!(under(1003), all, "v3 holds every record");
        assert_eq!(
            under(1002),
            all - WINDOWED_SAMPLES,
            "v2 holds all but windows"
        );
        assert_eq!(
            under(1001),
            all - WINDOWED_SAMPLES - 2,
            "v1 holds neither windows nor backfills"
        );
    }

    /// What the scheduler's codec writes: BACKFILL as v2, every other trigger as v1, both
    /// taking the typed way; a trigger with a validity window as v3, which does too.
    #[test]
    fn the_codecs_records_take_the_typed_way_under_the_version_it_writes() {
        for sample in samples() {
            let bytes = codec::encode(&sample).unwrap();
            let (schema_id, datum) = codec::split_frame(&bytes).unwrap();
            let expected = match (sample.expires_at_ms, sample.trigger_type) {
                (Some(_), _) => 1003,
                (None, TriggerType::Backfill) => 1002,
                (None, _) => 1001,
            };
            assert_eq!(schema_id, expected, "{:?}", sample.trigger_type);
            assert_eq!(read_typed(datum, typed_version(schema_id)), Some(sample));
        }
    }

    /// A v1 frame whose trigger type is index 9 names no v1 symbol (v1 has nine): refused
    /// with the generic decoder's message, though the same datum under v2 is a BACKFILL.
    #[test]
    fn a_v1_frame_naming_the_tenth_trigger_type_is_refused_as_the_generic_decoder_refuses_it() {
        let backfill = TriggerRecord {
            trigger_type: TriggerType::Backfill,
            ..trigger_record()
        };
        let mut bytes = framed_as(&backfill, 1002).unwrap();
        assert_eq!(decode_trigger(&bytes).unwrap(), backfill);
        bytes[1..5].copy_from_slice(&1001u32.to_be_bytes());
        let (typed, generic) = verdicts(&bytes);
        assert_eq!(typed, generic);
        assert!(
            typed.starts_with("error: malformed TriggerRecord payload"),
            "{typed}"
        );
    }

    /// Every cut and every one-byte change of samples under each version, and each sample
    /// under the other version's id: the typed way never accepts what the generic decoder
    /// refuses, never reads another value, and errors keep their message.
    #[test]
    fn changed_and_cut_records_get_the_generic_decoders_verdict() {
        let mut checked = 0;
        let framed = framed_samples();
        let backfills = framed
            .iter()
            .filter(|(sample, _, _)| sample.trigger_type == TriggerType::Backfill);
        let chosen = framed.iter().take(12).chain(backfills);
        for (_, schema_id, bytes) in chosen {
            for len in 0..bytes.len() {
                let (typed, generic) = verdicts(&bytes[..len]);
                assert_eq!(typed, generic, "{schema_id} cut at {len}");
                checked += 1;
            }
            for at in 0..bytes.len().min(160) {
                for value in [
                    0x00,
                    0x01,
                    0x02,
                    0x12,
                    0x7F,
                    0x80,
                    0xFE,
                    0xFF,
                    bytes[at] ^ 0x40,
                ] {
                    let mut changed = bytes.clone();
                    changed[at] = value;
                    let (typed, generic) = verdicts(&changed);
                    assert_eq!(typed, generic, "{schema_id}: byte {at} set to {value:#04x}");
                    checked += 1;
                }
            }
            for other in TYPED_SCHEMA_IDS {
                let mut relabelled = bytes.clone();
                relabelled[1..5].copy_from_slice(&other.to_be_bytes());
                let (typed, generic) = verdicts(&relabelled);
                assert_eq!(typed, generic, "{schema_id} framed as {other}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            let (typed, generic) = verdicts(&longer);
            assert_eq!(typed, generic, "a byte appended");
            assert!(typed.starts_with("error: 1 unexpected bytes"), "{typed}");
        }
        assert!(checked > 2_000);
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
        assert!(
            error.starts_with(
                "unknown schema id 921: this reader accepts TriggerRecord ids 1001, 1002, 1003;"
            ),
            "{error}"
        );
    }
}
