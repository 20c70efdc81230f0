//! A structural pass over an Avro datum, run before apache-avro decodes it.
//!
//! apache-avro trusts the datum too much for input read off a topic:
//! - it sizes buffers from length prefixes before reading them: a 20-byte record claiming a
//!   16-million item array makes it reserve 896 MB, which aborts the process under a memory
//!   limit (the process-wide allocation cap only bounds the count, not the item size);
//! - it reads end-of-input at a union, string or boolean as null, so a record cut short can
//!   decode "successfully" with its trailing fields missing.
//!
//! This pass reads only the datum's own bytes: every length and item count is checked against
//! the bytes that remain, and running out of bytes is an error. Once it accepts a datum, every
//! read apache-avro makes is backed by real bytes.

use apache_avro::Schema;
use apache_avro::schema::{
    ArraySchema, DecimalSchema, EnumSchema, FixedSchema, MapSchema, NamesRef, Namespace,
    RecordSchema, ResolvedSchema,
};

/// Deeper than any Kadence schema nests; bounds recursion on recursive schemas.
const MAX_DEPTH: usize = 64;

/// The length in bytes of the datum at the start of `bytes`, written with `schema`; an error
/// message if it is truncated or structurally invalid.
pub(crate) fn datum_len(schema: &Schema, bytes: &[u8]) -> Result<usize, String> {
    let resolved = ResolvedSchema::try_from(schema).map_err(|error| error.to_string())?;
    let mut cursor = Cursor {
        bytes,
        at: 0,
        names: resolved.get_names(),
    };
    cursor.skip(schema, &None, 0)?;
    Ok(cursor.at)
}

struct Cursor<'a, 's> {
    bytes: &'a [u8],
    at: usize,
    names: &'a NamesRef<'s>,
}

impl Cursor<'_, '_> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn advance(&mut self, count: usize, what: &str) -> Result<(), String> {
        if count > self.remaining() {
            return Err(format!(
                "truncated: {what} needs {count} bytes at byte {} of the datum but {} remain",
                self.at,
                self.remaining()
            ));
        }
        self.at += count;
        Ok(())
    }

    fn byte(&mut self, what: &str) -> Result<u8, String> {
        let byte = *self.bytes.get(self.at).ok_or_else(|| {
            format!(
                "truncated: the datum ends at byte {} inside {what}",
                self.at
            )
        })?;
        self.at += 1;
        Ok(byte)
    }

    /// A zig-zag varint, exactly as apache-avro reads it (at most 10 bytes).
    fn long(&mut self, what: &str) -> Result<i64, String> {
        let start = self.at;
        let mut raw = 0u64;
        for group in 0..10 {
            let byte = self.byte(what)?;
            raw |= u64::from(byte & 0x7F) << (7 * group);
            if byte & 0x80 == 0 {
                return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        Err(format!(
            "{what} at byte {start} of the datum is a varint longer than 10 bytes"
        ))
    }

    fn int(&mut self, what: &str) -> Result<i32, String> {
        let value = self.long(what)?;
        i32::try_from(value).map_err(|_| format!("{what} {value} does not fit an int"))
    }

    fn length(&mut self, what: &str) -> Result<usize, String> {
        let value = self.long(what)?;
        usize::try_from(value).map_err(|_| format!("{what} has a negative length {value}"))
    }

    fn skip(&mut self, schema: &Schema, namespace: &Namespace, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("the datum nests deeper than {MAX_DEPTH} levels"));
        }
        match schema {
            Schema::Null => Ok(()),
            Schema::Boolean => match self.byte("a boolean")? {
                0 | 1 => Ok(()),
                other => Err(format!("a boolean is {other:#04x}, expected 0x00 or 0x01")),
            },
            Schema::Int | Schema::Date | Schema::TimeMillis => self.int("an int").map(drop),
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => self.long("a long").map(drop),
            Schema::Float => self.advance(4, "a float"),
            Schema::Double => self.advance(8, "a double"),
            Schema::Duration => self.advance(12, "a duration"),
            // apache-avro 0.21 reads uuid and big-decimal as length-prefixed bytes.
            Schema::Bytes | Schema::String | Schema::Uuid | Schema::BigDecimal => {
                let len = self.length("the length of a string or bytes")?;
                self.advance(len, "a string or bytes")
            }
            Schema::Fixed(FixedSchema { size, .. }) => self.advance(*size, "a fixed"),
            Schema::Decimal(DecimalSchema { inner, .. }) => self.skip(inner, namespace, depth + 1),
            Schema::Enum(EnumSchema { symbols, .. }) => {
                let index = self.int("an enum index")?;
                if usize::try_from(index).is_ok_and(|index| index < symbols.len()) {
                    Ok(())
                } else {
                    Err(format!(
                        "enum index {index} is out of range: the enum has {} symbols",
                        symbols.len()
                    ))
                }
            }
            Schema::Union(union) => {
                let index = self.long("a union branch")?;
                let variant = usize::try_from(index)
                    .ok()
                    .and_then(|index| union.variants().get(index))
                    .ok_or_else(|| {
                        format!(
                            "union branch {index} is out of range: the union has {} branches",
                            union.variants().len()
                        )
                    })?;
                self.skip(variant, namespace, depth + 1)
            }
            Schema::Array(ArraySchema { items, .. }) => self.blocks("an array", |cursor| {
                cursor.skip(items, namespace, depth + 1)
            }),
            Schema::Map(MapSchema { types, .. }) => self.blocks("a map", |cursor| {
                cursor.skip(&Schema::String, namespace, depth + 1)?;
                cursor.skip(types, namespace, depth + 1)
            }),
            Schema::Record(RecordSchema { name, fields, .. }) => {
                let name = name.fully_qualified_name(namespace);
                for field in fields {
                    self.skip(&field.schema, &name.namespace, depth + 1)
                        .map_err(|error| format!("field {}: {error}", field.name))?;
                }
                Ok(())
            }
            Schema::Ref { name } => {
                let name = name.fully_qualified_name(namespace);
                let schema = *self
                    .names
                    .get(&name)
                    .ok_or_else(|| format!("the schema refers to unknown type {name}"))?;
                self.skip(schema, &name.namespace, depth + 1)
            }
        }
    }

    /// Array and map blocks: a count (negative: followed by a byte size), items, a 0 count.
    fn blocks(
        &mut self,
        what: &str,
        mut item: impl FnMut(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        loop {
            let count = self.long("a block count")?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                self.long("a block size")?;
            }
            let count = count.unsigned_abs();
            // Each item takes at least one byte in every Kadence schema (none has arrays of
            // null), so a larger count is garbage; refusing it here is what keeps apache-avro
            // from reserving memory for it.
            let remaining = self.remaining();
            if count > remaining as u64 {
                return Err(format!(
                    "truncated or corrupt: {what} block claims {count} items but only {remaining} bytes remain"
                ));
            }
            for _ in 0..count {
                item(self)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::types::Value;

    fn schema(json: &str) -> Schema {
        Schema::parse_str(json).unwrap()
    }

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
    fn measures_valid_datums_exactly() {
        let record = schema(
            r#"{"type": "record", "name": "R", "fields": [
                {"name": "s", "type": "string"},
                {"name": "o", "type": ["null", "long"]},
                {"name": "a", "type": {"type": "array", "items": "int"}},
                {"name": "m", "type": {"type": "map", "values": "boolean"}},
                {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
                {"name": "e2", "type": "E"},
                {"name": "d", "type": "double"}
            ]}"#,
        );
        let mut value = apache_avro::types::Record::new(&record).unwrap();
        value.put("s", "héllo");
        value.put("o", Value::Union(1, Box::new(Value::Long(-300))));
        value.put("a", Value::Array([1, -2, 300_000].map(Value::Int).to_vec()));
        value.put(
            "m",
            std::collections::HashMap::from([("k".to_owned(), true)]),
        );
        value.put("e", Value::Enum(1, "Y".into()));
        value.put("e2", Value::Enum(0, "X".into()));
        value.put("d", 1.5f64);
        let mut datum = apache_avro::to_avro_datum(&record, value).unwrap();
        assert_eq!(datum_len(&record, &datum), Ok(datum.len()));
        for cut in 0..datum.len() {
            assert!(datum_len(&record, &datum[..cut]).is_err(), "cut at {cut}");
        }
        datum.push(7);
        assert_eq!(datum_len(&record, &datum), Ok(datum.len() - 1));
    }

    #[test]
    fn refuses_lengths_and_counts_beyond_the_input() {
        let array = schema(r#"{"type": "array", "items": "string"}"#);
        // 16 million items claimed by a 6-byte datum.
        let mut datum = varint(16_000_000);
        datum.extend([2, b'x']);
        let error = datum_len(&array, &datum).unwrap_err();
        assert!(error.contains("claims 16000000 items"), "{error}");
        let string = schema(r#""string""#);
        let error = datum_len(&string, &varint(i64::MAX)).unwrap_err();
        assert!(error.contains("truncated"), "{error}");
        let error = datum_len(&string, &varint(-1)).unwrap_err();
        assert!(error.contains("negative"), "{error}");
        let long = schema(r#""long""#);
        assert!(
            datum_len(&long, &[0xFF; 11])
                .unwrap_err()
                .contains("10 bytes")
        );
        let union = schema(r#"["null", "int"]"#);
        assert!(
            datum_len(&union, &[4])
                .unwrap_err()
                .contains("out of range")
        );
    }
}
