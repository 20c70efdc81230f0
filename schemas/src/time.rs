//! Time on the wire: every record's times (`scheduled_at_ms`, `started_at_ms`, `sent_at_ms`,
//! …) are milliseconds since the Unix epoch, UTC.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch (0 if the system clock is set before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_is_after_the_schemas_were_written() {
        // 2025-01-01T00:00:00Z: a clock reading earlier than this is broken.
        assert!(super::now_ms() > 1_735_689_600_000);
    }
}
