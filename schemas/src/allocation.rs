//! The cap on apache-avro's allocations, set before Kadence decodes anything: the codec and
//! the catalog both apply it, so it lives apart from either.

/// Largest length prefix (string, bytes, array or map count) apache-avro may act on.
///
/// apache-avro's default is 512 MiB: a garbage length prefix would make it allocate that much
/// before noticing the input is shorter. No Kadence record comes near 16 MiB (Kafka's default
/// message limit is 1 MiB). The codec's own structural check refuses lengths beyond the
/// input anyway; this cap is the second line of defence.
pub const MAX_ALLOCATION_BYTES: usize = 16 * 1024 * 1024;

/// Caps apache-avro's allocations at [`MAX_ALLOCATION_BYTES`].
///
/// The setting is process-wide and only the first call counts — including the implicit one
/// apache-avro makes on its first decode with its 512 MiB default. So the catalog calls this
/// when it is first loaded, and [`decode`](crate::codec::decode) before every read; a program that calls
/// `apache_avro::util::max_allocation_bytes` itself before touching this crate wins instead.
/// Returns the limit in force.
pub fn limit_allocations() -> usize {
    // apache-avro keeps the first value it is given, so calling this repeatedly is harmless.
    apache_avro::util::max_allocation_bytes(MAX_ALLOCATION_BYTES)
}
