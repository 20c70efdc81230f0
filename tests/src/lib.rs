//! What the end-to-end suites (`tests/e2e/`, `tests/store/`) and the scheduler's own process
//! tests and benchmarks (`scheduler/tests/`, `scheduler/benches/`) share:
//! - [`fixtures`]: what makes a test: a fresh database per test, the broker, the backend
//!   macros (`on_every_backend!`, `on_sqlite_only!`) and the watchdog;
//! - [`triggers`]: reads an app's trigger topic from the beginning and audits the fires of
//!   jobs due every second: each expected second once, none twice, no misfire.
//! - [`api_load`]: many concurrent clients listing jobs for a while, every answer tallied.
//! - [`serve`]: `kadence serve` as a child process, ready once its API listens.
//! - [`session`]: a login to a scheduler's API, and the admin password the suites set.
//! - [`faults`]: the fault harness behind `infra/faults.sh`: scenarios that inject a fault
//!   while jobs fire, with what they counted.
//! - [`now_ms`]: the wall clock in the records' unit; [`unique`]: a name no other test or
//!   scenario running at the same time takes; [`free_port`]: a port for a process to bind;
//!   [`api_client`]: an HTTP client that keeps its
//!   connections only as long as the API does.
//!
//! They take addresses as arguments (never a test's environment), so a benchmark that starts
//! its own broker and `kadence serve` uses them as a test does.

pub mod api_load;
pub mod faults;
pub mod fixtures;
pub mod serve;
pub mod session;
pub mod triggers;

/// The wall clock in milliseconds since the Unix epoch, the unit of every time in the
/// scheduler's records and rows.
pub fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since_epoch.as_millis()).expect("milliseconds fit in i64")
}

/// An HTTP client for a scheduler's API that lets its pooled connections go after 5 s idle.
/// The API closes a keep-alive connection that stays idle for its `api.header_read_timeout`
/// (10 s by default, `scheduler/src/http/api/serve.rs`); a client that keeps one longer may send
/// its next request just as the server closes it, and get no answer (hyper's
/// `IncompleteMessage`: a test that waited ten seconds between two calls failed so).
pub fn api_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .build()
        .expect("an HTTP client")
}

/// A loopback port free a moment ago, for a process the test starts to bind.
///
/// It is drawn at random below Linux's ephemeral range (32768–60999), not asked of the kernel
/// with port 0: the kernel hands out ports from that range to every outgoing connection too,
/// so a port picked there and released can be taken by a client's connection before the
/// process binds it (an XXL-JOB executor once failed to start so, "port … is already in use").
/// Below the range only another listener can take it, and listeners that bind port 0 are
/// given ports inside it.
///
/// A port is handed out once per process: two picks made before either is bound (a broker's
/// port and its proxy's, say) never name the same one.
pub fn free_port() -> u16 {
    const BELOW_EPHEMERAL: std::ops::Range<u16> = 20_000..32_768;
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = rand::random_range(BELOW_EPHEMERAL);
        if !handed_out.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed_out.insert(port);
            return port;
        }
    }
}

/// `prefix` and a random lower-case suffix, for names that must not collide between tests
/// or fault scenarios running side by side (topics, groups, databases).
pub fn unique(prefix: &str) -> String {
    let suffix: u64 = rand::random();
    format!("{prefix}{suffix:016x}")
}

/// The value at `fraction` (0.5 = median) of `sorted`, nearest rank; the default when empty.
pub fn percentile<T: Copy + Default>(sorted: &[T], fraction: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[rank]
}
