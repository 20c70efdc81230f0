//! Checking what executors write: every result, shadow result, log record and beat, and
//! every dead letter of a trigger, must carry an HMAC by an executor key of the app it is
//! about (`schemas/PROTOCOL.md` section 3; the format is `kadence_kafka::executor_signing`).
//! Without it, whoever can write `{p}.results` could complete any app's run and fire its
//! child jobs, and whoever can write `{p}.beats` could steer FAILOVER and BUSYOVER.
//!
//! The keys live in the database (`crate::store::ExecutorKeys`); admins make and revoke them
//! (`POST /api/apps/{app}/executor-keys`, `kadence executor-key create`). Every node keeps
//! the active ones in an [`ExecutorKeyring`]: read at start, again every
//! `executor_auth.key_refresh_interval` (so a revocation reaches every node within it), and
//! when a record names a key the node does not know: a record is refused as signed by an
//! unknown key only once the keys were read after it arrived. So a key made a moment ago on
//! another node works for its executors' first records. Such reads happen at most once a
//! second: a batch holding a record with an unknown key waits for the next one (at most a
//! second), and a flood of made-up key ids costs one query a second and delays its batches,
//! but never gets a genuine record refused.
//!
//! [`ExecutorKeyring::authenticate`] is what the readers call. It returns the app of the key
//! that signed the record; each reader then checks that this is the app the record is about
//! ([`app_mismatch`]): a result's and a beat's `app`, the run of a log record, the trigger
//! topic of a dead letter. With `executor_auth.required = false` (for the time of an upgrade:
//! give every executor its key, then require them), an unsigned record is taken, but one that
//! carries the headers is still checked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kadence_kafka::executor_signing::{SECRET_LEN, decode_secret};
use kadence_kafka::{ExecutorAuthError, verify_executor_record};
use rdkafka::message::Message;
use secrecy::ExposeSecret;
use tokio_util::sync::CancellationToken;

use crate::store::{ExecutorKeys, StoreError};

/// The shortest time between two reads of the keys caused by an unknown key id.
const UNKNOWN_KEY_REREAD: Duration = Duration::from_secs(1);

/// A key's secret and its app.
type Keys = HashMap<String, ([u8; SECRET_LEN], String)>;

/// The active executor keys of a node, and whether signatures are required.
pub struct ExecutorKeyring {
    keys: RwLock<Arc<Keys>>,
    store: Arc<dyn ExecutorKeys>,
    required: bool,
    /// When the keys in hand were read.
    read_at: Mutex<Instant>,
    /// Held while the keys are read again for an unknown key: one read at a time.
    rereading: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for ExecutorKeyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = self.current();
        let mut ids: Vec<&String> = keys.keys().collect();
        ids.sort();
        f.debug_struct("ExecutorKeyring")
            .field("keys", &ids)
            .field("required", &self.required)
            .finish()
    }
}

impl ExecutorKeyring {
    /// A keyring reading `store`'s keys, loaded once before it is returned.
    pub async fn load(
        store: Arc<dyn ExecutorKeys>,
        required: bool,
    ) -> Result<Arc<ExecutorKeyring>, StoreError> {
        let keyring = Arc::new(ExecutorKeyring {
            keys: RwLock::default(),
            store,
            required,
            read_at: Mutex::new(Instant::now()),
            rereading: tokio::sync::Mutex::new(()),
        });
        keyring.refresh().await?;
        Ok(keyring)
    }

    fn current(&self) -> Arc<Keys> {
        Arc::clone(
            &self
                .keys
                .read()
                .unwrap_or_else(|poison| poison.into_inner()),
        )
    }

    /// Reads the active keys again.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let started = Instant::now();
        let stored = self.store.active_executor_keys().await?;
        let mut keys = Keys::with_capacity(stored.len());
        for key in stored {
            match decode_secret(key.secret.expose_secret()) {
                Ok(secret) => {
                    keys.insert(key.key_id, (secret, key.app));
                }
                Err(error) => tracing::error!(key_id = %key.key_id, app = %key.app, %error,
                    "stored executor key cannot be read (edited by hand?); records signed with \
                     it are refused: revoke it and make a new one"),
            }
        }
        *self
            .keys
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = Arc::new(keys);
        *self
            .read_at
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = started;
        Ok(())
    }

    fn read_at(&self) -> Instant {
        *self
            .read_at
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Checks the executor signature of `message`, received at `received` (`record` names it
    /// in reasons: "result record", "beat", …). The app of the key that signed it; `None` for
    /// an unsigned record when signatures are not required. A key id this node does not know
    /// is refused only once the keys were read after `received` (see the module docs); a
    /// database error while reading them leaves the record to be judged by the keys in hand.
    pub async fn authenticate<M: Message>(
        &self,
        message: &M,
        record: &'static str,
        received: Instant,
    ) -> Result<Option<String>, ExecutorAuthError> {
        match self.check(message, record) {
            Err(ExecutorAuthError::UnknownKey { .. }) => {
                self.read_since(received).await;
                self.check(message, record)
            }
            checked => checked,
        }
    }

    /// Reads the keys again unless they were read after `received`, at most once a second.
    async fn read_since(&self, received: Instant) {
        let _one_at_a_time = self.rereading.lock().await;
        let read_at = self.read_at();
        if read_at >= received {
            return;
        }
        tokio::time::sleep_until((read_at + UNKNOWN_KEY_REREAD).into()).await;
        if let Err(error) = self.refresh().await {
            tracing::warn!(%error, "cannot read the executor keys; judging by the ones in hand");
        }
    }

    /// [`authenticate`](Self::authenticate) with the keys in hand.
    fn check<M: Message>(
        &self,
        message: &M,
        record: &'static str,
    ) -> Result<Option<String>, ExecutorAuthError> {
        let keys = self.current();
        let signed = verify_executor_record(message, record, |key_id| keys.get(key_id).cloned())?;
        match signed {
            None if self.required => Err(ExecutorAuthError::Unsigned { record }),
            signed => Ok(signed),
        }
    }
}

/// Why a record signed by a key of `key_app` may not speak for `record_app`, or `None` when
/// it may (the same app, or an unsigned record taken because signatures are not required).
pub fn app_mismatch(record: &str, record_app: &str, key_app: Option<&str>) -> Option<String> {
    let key_app = key_app?;
    (key_app != record_app)
        .then(|| format!("{record} of app {record_app} signed by a key of app {key_app}"))
}

/// Runs [`ExecutorKeyring::refresh`] every `interval` until `shutdown`.
pub async fn run_keyring_refresh(
    keyring: Arc<ExecutorKeyring>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        if let Err(error) = keyring.refresh().await {
            tracing::warn!(%error, "cannot refresh the executor keys; checking with the ones in hand");
        }
    }
}

#[cfg(test)]
mod tests {
    use kadence_kafka::ExecutorKey;
    use rdkafka::Timestamp;
    use rdkafka::message::OwnedMessage;
    use secrecy::SecretString;

    use super::*;
    use crate::store::{ExecutorKeyInfo, NewExecutorKey, StoredExecutorKey};

    /// The keys of a test: a list that the test changes, and how often they were read.
    #[derive(Default)]
    struct Keys(
        Mutex<Vec<StoredExecutorKey>>,
        std::sync::atomic::AtomicUsize,
    );

    #[async_trait::async_trait]
    impl ExecutorKeys for Keys {
        async fn add_executor_key(
            &self,
            key: &NewExecutorKey,
            _now_ms: i64,
        ) -> Result<ExecutorKeyInfo, StoreError> {
            self.0.lock().unwrap().push(StoredExecutorKey {
                key_id: key.key_id.clone(),
                app: key.app.clone(),
                secret: key.secret.clone(),
            });
            Ok(ExecutorKeyInfo {
                key_id: key.key_id.clone(),
                app: key.app.clone(),
                created_by: key.created_by.clone(),
                created_at_ms: 0,
                revoked_at_ms: None,
            })
        }

        async fn list_executor_keys(
            &self,
            _app: Option<&str>,
        ) -> Result<Vec<ExecutorKeyInfo>, StoreError> {
            Ok(Vec::new())
        }

        async fn active_executor_keys(&self) -> Result<Vec<StoredExecutorKey>, StoreError> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(self.0.lock().unwrap().clone())
        }

        async fn revoke_executor_key(
            &self,
            key_id: &str,
            _now_ms: i64,
        ) -> Result<Option<ExecutorKeyInfo>, StoreError> {
            self.0.lock().unwrap().retain(|key| key.key_id != key_id);
            Ok(None)
        }
    }

    fn new_key(app: &str) -> (ExecutorKey, NewExecutorKey) {
        let key = ExecutorKey::generate().unwrap();
        let record = NewExecutorKey {
            key_id: key.key_id().to_owned(),
            app: app.to_owned(),
            secret: SecretString::from(key.secret_text()),
            created_by: "admin".to_owned(),
        };
        (key, record)
    }

    fn signed_by(key: Option<&ExecutorKey>) -> OwnedMessage {
        let headers = key.map(|key| key.headers("k.results", b"value", None));
        OwnedMessage::new(
            Some(b"value".to_vec()),
            None,
            "k.results".to_owned(),
            Timestamp::NotAvailable,
            0,
            0,
            headers,
        )
    }

    #[tokio::test]
    async fn a_key_made_after_the_load_is_known_at_once_and_a_revoked_one_after_a_refresh() {
        let store = Arc::new(Keys::default());
        let keyring = ExecutorKeyring::load(Arc::clone(&store) as Arc<dyn ExecutorKeys>, true)
            .await
            .unwrap();
        let (key, record) = new_key("billing");
        store.add_executor_key(&record, 0).await.unwrap();
        let app = keyring
            .authenticate(&signed_by(Some(&key)), "result record", Instant::now())
            .await;
        assert_eq!(app, Ok(Some("billing".to_owned())));
        store.revoke_executor_key(key.key_id(), 0).await.unwrap();
        keyring.refresh().await.unwrap();
        let refused = keyring
            .authenticate(&signed_by(Some(&key)), "result record", Instant::now())
            .await
            .unwrap_err();
        assert_eq!(refused.kind(), "unknown_key");
    }

    #[tokio::test]
    async fn unsigned_records_are_refused_only_when_signatures_are_required() {
        let store: Arc<dyn ExecutorKeys> = Arc::new(Keys::default());
        let required = ExecutorKeyring::load(Arc::clone(&store), true)
            .await
            .unwrap();
        let refused = required
            .authenticate(&signed_by(None), "beat", Instant::now())
            .await
            .unwrap_err();
        assert!(
            refused.to_string().starts_with("unsigned beat: "),
            "{refused}"
        );
        let optional = ExecutorKeyring::load(store, false).await.unwrap();
        assert_eq!(
            optional
                .authenticate(&signed_by(None), "beat", Instant::now())
                .await,
            Ok(None)
        );
        let stranger = ExecutorKey::generate().unwrap();
        let refused = optional
            .authenticate(&signed_by(Some(&stranger)), "beat", Instant::now())
            .await;
        assert_eq!(refused.unwrap_err().kind(), "unknown_key");
    }

    #[tokio::test]
    async fn a_batch_of_made_up_key_ids_costs_one_read() {
        let store = Arc::new(Keys::default());
        let keyring = ExecutorKeyring::load(Arc::clone(&store) as Arc<dyn ExecutorKeys>, true)
            .await
            .unwrap();
        let received = Instant::now();
        for _ in 0..5 {
            let stranger = ExecutorKey::generate().unwrap();
            let refused = keyring
                .authenticate(&signed_by(Some(&stranger)), "beat", received)
                .await;
            assert_eq!(refused.unwrap_err().kind(), "unknown_key");
        }
        let reads = store.1.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(reads, 2, "the load, then one read for the whole batch");
    }

    #[test]
    fn a_key_speaks_only_for_its_own_app() {
        assert_eq!(app_mismatch("beat", "billing", Some("billing")), None);
        assert_eq!(app_mismatch("beat", "billing", None), None);
        assert_eq!(
            app_mismatch("result record", "billing", Some("mail")).as_deref(),
            Some("result record of app billing signed by a key of app mail")
        );
    }
}
