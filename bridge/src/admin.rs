//! The admin API legacy executors call: `api/registry`, `api/registryRemove` and
//! `api/callback`, answered as XXL-JOB's scheduling centre answers them.
//!
//! Executors are configured with admin addresses such as
//! `http://bridge:8080/xxl-job-admin`; they call `{address}/api/{call}`, so the bridge answers
//! a call by the end of its path, whatever context path comes before it. Every call needs the
//! access token (`XXL-JOB-ACCESS-TOKEN`) when the bridge has one, and is refused as XXL-JOB
//! refuses it otherwise: HTTP 200 with `{"code":500,"msg":"The access token is wrong."}`.
//!
//! **Several bridges.** An executor stops at the first admin address that takes a
//! registration or a callback, so with two bridges each learns only part of what the
//! executors say. Each bridge therefore passes on to its peers (`--peer`) every registration,
//! removal, and callback for a run it does not wait on, marked with the `X-Kadence-Bridge-Relay`
//! header so that a peer takes it without passing it on again. Every bridge then knows every
//! executor, and a callback reaches the bridge that handed the run over, wherever it landed.
//! What was passed on while a bridge was down is lost to it, so a bridge also takes its
//! peers' registrations (`GET {admin}/kadence-bridge/registrations`, with the token) when it
//! starts and every 30 s after ([`pull_registrations`]): a restarted bridge knows the
//! executors at once rather than at their next registration, up to 30 s later.
//!
//! **Callbacks** are taken as XXL-JOB's admin takes them: the answer is success at once,
//! whatever the list holds; a callback for a run nobody waits on (finished already, or
//! unknown) is logged and dropped, and the first callback of a run is the one that counts.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::forward::now_ms;
use crate::legacy::LegacyExecutors;
use crate::runs::{Callback, PendingRuns};
use crate::wire::{ACCESS_TOKEN_HEADER, HandleCallbackParam, RegistryParam, ReturnT};

/// The header that marks a call one bridge passes on to another.
pub const RELAY_HEADER: &str = "X-Kadence-Bridge-Relay";

/// What the admin API answers from.
pub struct AdminState {
    /// The app this bridge fronts: the only app name executors may register under.
    pub app: String,
    /// The access token calls must carry; `None` for none.
    pub access_token: Option<String>,
    /// The registry registrations go to.
    pub legacy: Arc<LegacyExecutors>,
    /// The runs callbacks finish.
    pub runs: Arc<PendingRuns>,
    /// The other bridges of the app, as admin addresses.
    pub peers: Vec<String>,
    /// The client calls to peers go through.
    pub http: reqwest::Client,
}

/// The admin API (see the module docs).
pub fn router(state: Arc<AdminState>) -> Router {
    Router::new().fallback(admin_call).with_state(state)
}

/// The calls an executor makes, by the last part of their path, and the one a peer bridge
/// makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Registry,
    RegistryRemove,
    Callback,
    Registrations,
}

/// The path of a bridge's registrations, under its admin address.
const REGISTRATIONS_PATH: &str = "kadence-bridge/registrations";

/// One registration a bridge holds, as its peers read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerRegistration {
    /// The executor's address.
    pub address: String,
    /// When its registration was last renewed, ms since the epoch.
    pub renewed_at_ms: i64,
}

impl Call {
    fn of(path: &str) -> Option<Call> {
        let path = path.trim_end_matches('/');
        if path.ends_with("/api/registryRemove") {
            Some(Call::RegistryRemove)
        } else if path.ends_with("/api/registry") {
            Some(Call::Registry)
        } else if path.ends_with("/api/callback") {
            Some(Call::Callback)
        } else if path.ends_with(&format!("/{REGISTRATIONS_PATH}")) {
            Some(Call::Registrations)
        } else {
            None
        }
    }

    fn path(self) -> &'static str {
        match self {
            Call::Registry => "api/registry",
            Call::RegistryRemove => "api/registryRemove",
            Call::Callback => "api/callback",
            Call::Registrations => REGISTRATIONS_PATH,
        }
    }
}

async fn admin_call(
    State(state): State<Arc<AdminState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Json<ReturnT<serde_json::Value>> {
    let Some(call) = Call::of(uri.path()) else {
        return Json(ReturnT::fail(format!(
            "invalid request, uri-mapping({}) not found.",
            uri.path()
        )));
    };
    if let Some(token) = &state.access_token {
        let given = headers
            .get(ACCESS_TOKEN_HEADER)
            .and_then(|value| value.to_str().ok());
        if given != Some(token.as_str()) {
            tracing::warn!(
                path = uri.path(),
                "refused a call with a wrong access token"
            );
            return Json(ReturnT::fail("The access token is wrong."));
        }
    }
    let relayed = headers.contains_key(RELAY_HEADER);
    let answer = match call {
        Call::Registry | Call::RegistryRemove => registry(&state, call, &body),
        Call::Callback => callback(&state, &body, relayed),
        Call::Registrations => return Json(registrations(&state)),
    };
    if answer.is_success() && !relayed && call != Call::Callback {
        relay(&state, call, body);
    }
    Json(ReturnT {
        code: answer.code,
        msg: answer.msg,
        content: None,
    })
}

/// `kadence-bridge/registrations`: what this bridge holds, for a peer.
fn registrations(state: &AdminState) -> ReturnT<serde_json::Value> {
    let held: Vec<PeerRegistration> = (state.legacy.snapshot().into_iter())
        .map(|(address, renewed_at_ms)| PeerRegistration {
            address,
            renewed_at_ms,
        })
        .collect();
    ReturnT {
        code: crate::wire::SUCCESS,
        msg: None,
        content: Some(serde_json::to_value(held).expect("registrations serialize")),
    }
}

/// Takes every peer's registrations into this bridge's registry (see the module docs); a
/// peer that does not answer is logged and skipped.
pub async fn pull_registrations(state: &AdminState) {
    for peer in &state.peers {
        let url = format!("{}/{REGISTRATIONS_PATH}", peer.trim_end_matches('/'));
        let mut request = state.http.get(&url).timeout(Duration::from_secs(3));
        if let Some(token) = &state.access_token {
            request = request.header(ACCESS_TOKEN_HEADER, token);
        }
        let answer = match request.send().await {
            Ok(response) => response.json::<ReturnT<Vec<PeerRegistration>>>().await,
            Err(error) => {
                tracing::debug!(%url, %error, "cannot read a peer bridge's registrations");
                continue;
            }
        };
        match answer {
            Ok(answer) if answer.is_success() => {
                for held in answer.content.unwrap_or_default() {
                    state.legacy.adopt(&held.address, held.renewed_at_ms);
                }
            }
            Ok(answer) => tracing::warn!(%url, msg = ?answer.msg,
                "a peer bridge refused to give its registrations"),
            Err(error) => tracing::warn!(%url, %error,
                "a peer bridge's registrations are not readable"),
        }
    }
}

/// `api/registry` and `api/registryRemove`.
fn registry(state: &AdminState, call: Call, body: &[u8]) -> ReturnT<()> {
    let param: RegistryParam = match parse(body) {
        Ok(param) => param,
        Err(answer) => return answer,
    };
    if param.registry_group != "EXECUTOR" || param.registry_value.trim().is_empty() {
        return ReturnT::fail("Illegal Argument.");
    }
    if param.registry_key != state.app {
        return ReturnT::fail(format!(
            "this bridge fronts the app {}, not {}: point the executors of {} at their own \
             bridge",
            state.app, param.registry_key, param.registry_key
        ));
    }
    let address = param.registry_value.trim();
    match call {
        Call::Registry => {
            if state.legacy.register(address, now_ms()) {
                tracing::info!(address, app = %state.app, "an XXL-JOB executor registered");
            }
        }
        _ => {
            if state.legacy.remove(address) {
                tracing::info!(address, app = %state.app, "an XXL-JOB executor left");
            }
        }
    }
    ReturnT::success()
}

/// `api/callback`: finishes the runs this bridge waits on, passes the rest on.
fn callback(state: &Arc<AdminState>, body: &[u8], relayed: bool) -> ReturnT<()> {
    let callbacks: Vec<HandleCallbackParam> = match parse(body) {
        Ok(callbacks) => callbacks,
        Err(answer) => return answer,
    };
    let mut elsewhere = Vec::new();
    for param in callbacks {
        let callback = Callback {
            code: param.handle_code,
            msg: param.handle_msg.clone(),
        };
        if !state.runs.complete(param.log_id, callback) {
            elsewhere.push(param);
        }
    }
    if !elsewhere.is_empty() {
        if relayed || state.peers.is_empty() {
            for param in &elsewhere {
                tracing::info!(
                    log_id = param.log_id,
                    code = param.handle_code,
                    "dropped a callback for a run no bridge waits on (finished or unknown)"
                );
            }
        } else {
            let body = serde_json::to_vec(&elsewhere).expect("callbacks serialize");
            relay(state, Call::Callback, Bytes::from(body));
        }
    }
    ReturnT::success()
}

/// Passes `body` on to every peer, from a task of its own; failures are logged.
fn relay(state: &AdminState, call: Call, body: Bytes) {
    for peer in &state.peers {
        let url = format!("{}/{}", peer.trim_end_matches('/'), call.path());
        let mut request = (state.http.post(url.clone()))
            .header(RELAY_HEADER, "1")
            .header("Content-Type", "application/json")
            .timeout(Duration::from_secs(3))
            .body(body.clone());
        if let Some(token) = &state.access_token {
            request = request.header(ACCESS_TOKEN_HEADER, token);
        }
        tokio::spawn(async move {
            match request.send().await {
                Ok(response) => match response.json::<ReturnT<serde_json::Value>>().await {
                    Ok(answer) if answer.is_success() => {}
                    Ok(answer) => {
                        tracing::warn!(%url, msg = ?answer.msg, "a peer bridge refused a relayed call")
                    }
                    Err(error) => {
                        tracing::warn!(%url, %error, "a peer bridge answered a relayed call oddly")
                    }
                },
                Err(error) => {
                    tracing::warn!(%url, %error, "cannot pass a call on to a peer bridge")
                }
            }
        });
    }
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ReturnT<()>> {
    serde_json::from_slice(body)
        .map_err(|error| ReturnT::fail(format!("The request body is not valid: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_known_by_the_end_of_their_path() {
        assert_eq!(
            Call::of("/xxl-job-admin/api/registry"),
            Some(Call::Registry)
        );
        assert_eq!(Call::of("/api/registryRemove"), Some(Call::RegistryRemove));
        assert_eq!(Call::of("/a/b/api/callback/"), Some(Call::Callback));
        assert_eq!(Call::of("/api/other"), None);
        assert_eq!(
            Call::of("/xxl-job-admin/kadence-bridge/registrations"),
            Some(Call::Registrations)
        );
    }
}
