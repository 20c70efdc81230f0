//! The `[logs]` section: the lines runs write.

use serde::{Deserialize, Serialize};

/// Job logs (see [`crate::readers::logs`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogsConfig {
    /// Lines stored per run at most; later lines are dropped. Default 10 000 (the executor SDK
    /// keeps as many by default and says so in a last line when it cuts).
    pub max_lines_per_run: i64,
}

impl Default for LogsConfig {
    fn default() -> Self {
        LogsConfig {
            max_lines_per_run: 10_000,
        }
    }
}
