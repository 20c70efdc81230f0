//! Which form each app's triggers are signed in (PROTOCOL.md section 3): alone, or by the
//! round, as `signing.trigger_signatures` says.
//!
//! Under `auto` (the default) the answer comes from the executors' beats in the
//! [`Registry`]: an app's triggers are signed by the round while one of its executors is live
//! and every one that beat lately lists `round-signatures`, since an executor built before
//! round signatures dead-letters a round-signed trigger as unsigned. The answer is taken for
//! each dispatch round and each app in it, so an older executor that starts beating turns its
//! app back to signatures one by one within a round of its beat being read. Each change of
//! form is logged with its reason, which is how an operator learns what holds an app back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kadence_schemas::AppName;

use crate::config::TriggerSignatures;
use crate::engine::registry::{HeldBack, Registry};

/// Decides, app by app, whether triggers are signed by the round.
pub struct SignatureForms {
    setting: TriggerSignatures,
    registry: Arc<Registry>,
    /// Under `auto`: the form each app was last given, to log changes only.
    last_by_round: Mutex<HashMap<AppName, bool>>,
}

impl SignatureForms {
    /// Forms as `setting` says, `auto` reading the executors' beats from `registry`.
    pub fn new(setting: TriggerSignatures, registry: Arc<Registry>) -> SignatureForms {
        SignatureForms {
            setting,
            registry,
            last_by_round: Mutex::new(HashMap::new()),
        }
    }

    /// The forms of one dispatch round at `now_ms`, each app's decided once.
    pub fn for_round(&self, now_ms: i64) -> RoundForms<'_> {
        RoundForms {
            forms: self,
            now_ms,
            decided: HashMap::new(),
        }
    }

    /// Whether `app`'s triggers dispatched at `now_ms` are signed by the round.
    pub fn by_round(&self, app: &AppName, now_ms: i64) -> bool {
        match self.setting {
            TriggerSignatures::Record => false,
            TriggerSignatures::Round => true,
            TriggerSignatures::Auto => {
                let held_back = self.registry.round_signatures_held_back(app, now_ms);
                self.note(app, held_back.as_ref());
                held_back.is_none()
            }
        }
    }

    /// Logs a change of `app`'s form; the first answer for an app is logged only when it is by
    /// the round (signing one by one is what an operator expects until then).
    fn note(&self, app: &AppName, held_back: Option<&HeldBack>) {
        let by_round = held_back.is_none();
        // A poisoned lock still holds whole entries: each is one insert.
        let mut last = self
            .last_by_round
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let before = last.get(app).copied();
        if before == Some(by_round) {
            return;
        }
        last.insert(app.clone(), by_round);
        if before.is_none() && !by_round {
            return;
        }
        match held_back {
            None => tracing::info!(%app,
                "signing the app's triggers by the round: every executor of it verifies round signatures"),
            // Every executor restarting at once (a deployment) is no cause for alarm.
            Some(reason @ HeldBack::NoLiveExecutor) => tracing::info!(%app, %reason,
                "signing the app's triggers one by one again"),
            Some(reason @ HeldBack::By(_)) => tracing::warn!(%app, %reason,
                "signing the app's triggers one by one again"),
        }
    }
}

/// The forms of one dispatch round (see [`SignatureForms::for_round`]).
pub struct RoundForms<'a> {
    forms: &'a SignatureForms,
    now_ms: i64,
    decided: HashMap<AppName, bool>,
}

impl RoundForms<'_> {
    /// Whether `app`'s triggers in this round are signed by the round.
    pub fn by_round(&mut self, app: &AppName) -> bool {
        if let Some(&by_round) = self.decided.get(app) {
            return by_round;
        }
        let by_round = self.forms.by_round(app, self.now_ms);
        self.decided.insert(app.clone(), by_round);
        by_round
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kadence_schemas::ExecutorBeat;

    use super::*;
    use crate::domain::model::{ExecutorEntry, ExecutorStatus};

    fn app() -> AppName {
        AppName::parse("billing").unwrap()
    }

    fn executor(id: &str, features: &[&str], beat_ms: i64) -> ExecutorEntry {
        ExecutorEntry {
            executor_id: id.to_owned(),
            app: app(),
            host: "h".to_owned(),
            version: "1".to_owned(),
            handlers: Vec::new(),
            owned_partitions: vec![0],
            running_jobs: Vec::new(),
            queued_jobs: Vec::new(),
            state: ExecutorStatus::Running,
            first_seen_at_ms: beat_ms,
            last_beat_at_ms: beat_ms,
            features: features.iter().map(|&feature| feature.to_owned()).collect(),
        }
    }

    #[test]
    fn auto_follows_the_beats_and_the_fixed_settings_ignore_them() {
        let registry = Arc::new(Registry::new(Duration::from_secs(10)));
        let forms = |setting| SignatureForms::new(setting, Arc::clone(&registry));
        let (auto, record, round) = (
            forms(TriggerSignatures::Auto),
            forms(TriggerSignatures::Record),
            forms(TriggerSignatures::Round),
        );
        assert!(!auto.by_round(&app(), 1_000), "no executor yet");
        assert!(round.by_round(&app(), 1_000));

        registry.observe(executor("new", &[ExecutorBeat::ROUND_SIGNATURES], 1_000));
        assert!(auto.by_round(&app(), 1_000));
        assert!(!record.by_round(&app(), 1_000));

        registry.observe(executor("old", &[], 2_000));
        assert!(
            !auto.by_round(&app(), 2_000),
            "an executor before round signatures"
        );
        assert!(round.by_round(&app(), 2_000));

        registry.observe(executor("old", &["some-future-feature"], 3_000));
        assert!(
            !auto.by_round(&app(), 3_000),
            "other features are not this one"
        );
        registry.observe(executor(
            "old",
            &[ExecutorBeat::ROUND_SIGNATURES, "some-future-feature"],
            4_000,
        ));
        assert!(auto.by_round(&app(), 4_000), "upgraded");
    }
}
