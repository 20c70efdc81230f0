//! [`PoolSettings`]: how a store's connection pool is sized and how its sessions are limited.

use std::time::Duration;

/// The size of a store's connection pool, how long an operation waits for a connection, and
/// how long a session may sit idle inside a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSettings {
    /// Connections at most.
    pub max_connections: u32,
    /// How long an operation waits for a free connection before it fails with a
    /// [`StoreError::is_busy`](super::StoreError::is_busy) error.
    pub acquire_timeout: Duration,
    /// How long the database lets a session sit idle inside a transaction before it ends the
    /// session (PostgreSQL's `idle_in_transaction_session_timeout`, MariaDB's
    /// `idle_transaction_timeout`, MySQL's `wait_timeout`). A node frozen in the middle of a
    /// transaction (SIGSTOP, a paused VM) holds that transaction's row locks until then, its
    /// schedule shards' among them, so a node sets it to its shard lease: the others can take
    /// the shards over when the lease runs out, not later (see `shards::check_shard_lease`).
    /// Every transaction of a store talks to the database only, so a live node never idles
    /// in one for more than moments. Whole seconds on MySQL and MariaDB (rounded up).
    pub idle_in_transaction: Duration,
}

impl PoolSettings {
    /// The idle-in-transaction limit of a pool opened without a shard lease at hand (tools,
    /// tests): the default shard lease.
    pub const DEFAULT_IDLE_IN_TRANSACTION: Duration = Duration::from_secs(5);

    /// `max_connections` connections, waiting at most 10 s for one, sessions idle inside a
    /// transaction ended after [`Self::DEFAULT_IDLE_IN_TRANSACTION`].
    pub fn new(max_connections: u32) -> Self {
        PoolSettings {
            max_connections,
            acquire_timeout: Duration::from_secs(10),
            idle_in_transaction: Self::DEFAULT_IDLE_IN_TRANSACTION,
        }
    }

    /// The same, with sessions idle inside a transaction ended after `limit`.
    pub fn idle_in_transaction(self, limit: Duration) -> Self {
        PoolSettings {
            idle_in_transaction: limit,
            ..self
        }
    }

    /// The idle-in-transaction limit in whole seconds, rounded up, at least 1 (MySQL's and
    /// MariaDB's unit).
    pub fn idle_in_transaction_secs(&self) -> u64 {
        self.idle_in_transaction.as_millis().div_ceil(1000).max(1) as u64
    }
}
