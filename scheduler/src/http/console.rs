//! The web console, served by every node at `/`: a single page that talks to this node's
//! HTTP API (`crate::http::api`) with the user's session cookie, so whatever a user may do in the
//! console is exactly what the API lets them do — the API checks every call, the console
//! only leaves out the buttons a user could not use.
//!
//! Its files live in `scheduler/console/` and are embedded in the binary at build time
//! (`rust-embed`, debug builds too): nothing is fetched from anywhere else, at build time or
//! in the browser.
//!
//! - `index.html`, `style.css`: the shell and its look (laptop and narrow windows).
//! - `app.js`: login, the navigation, the hash router (`#/jobs`, `#/runs/17`), the language.
//! - `lib/`: the API client (cookie session, `X-Requested-With` on writes, one error shape),
//!   the message catalogs (`t("key")`), time and duration formats, shared widgets (paged
//!   tables, fields with their error, confirmations), and the help: `lib/help.js` maps each
//!   page to its section of the book the node serves under `/docs/` (`crate::http::book`) and
//!   shows a "?" beside the page's title when the book is served (asked once at start); a
//!   test checks every target against `docs/src` (`tests/reference/console_help.rs`).
//! - `pages/`: one module per page (dashboard, jobs, job editor, scripts, runs, run detail
//!   with its live log, executors, apps, users and tokens, audit, replays, shadow report, and
//!   the password reset a user without a session reaches at `#/reset-password`).
//! - `i18n/{locale}/{area}.json`: every string the console shows, per language ([`LOCALES`])
//!   and per area of the console (one file per page, so that pages are written side by
//!   side), served merged as `/console/i18n/{locale}.json`; a test fails when a key is in
//!   one language only, when a page uses a key no catalog has, or when a template carries
//!   words of its own.
//! - `vendor/`: Preact with `htm` (tagged-template views, no build step), from the npm
//!   registry, with its licences.
//!
//! Why a page of plain modules over the JSON API rather than server-rendered templates: the
//! API already is the permission boundary, pages and paging, so the console adds no second
//! way into the data to keep in step, and it needs no build step (no bundler, no Node.js at
//! build time).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The languages the console speaks, as its catalogs are named (`i18n/{locale}.json`). The
/// first is the fallback.
pub const LOCALES: &[&str] = &["en", "zh-CN"];

/// Where the console's files are served from.
const FILES_PREFIX: &str = "/console/";

/// The console's files, embedded.
#[derive(rust_embed::Embed)]
#[folder = "console/"]
struct ConsoleFiles;

/// What the browser may load and run: only this node's own files and API. No inline
/// scripts, no other origin, no framing (clickjacking).
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The console's routes: `/` (the page) and `/console/{file}`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/console/{*path}", get(file))
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    let catalog_locale = path
        .strip_prefix("i18n/")
        .and_then(|name| name.strip_suffix(".json"));
    match catalog_locale.and_then(|locale| CATALOGS.get(locale)) {
        Some(Ok(catalog)) => respond(catalog.as_bytes(), "application/json", &headers),
        Some(Err(error)) => {
            tracing::error!(%error, "a console catalog is broken");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        None => serve(&path, &headers),
    }
}

/// Each language's catalog, merged from its area files once, as JSON.
static CATALOGS: LazyLock<BTreeMap<&'static str, Result<String, String>>> = LazyLock::new(|| {
    LOCALES
        .iter()
        .map(|&locale| {
            let merged = catalog(locale).and_then(|catalog| {
                serde_json::to_string(&catalog).map_err(|error| error.to_string())
            });
            (locale, merged)
        })
        .collect()
});

/// The merged catalog of `locale`: every `i18n/{locale}/*.json` file, each a flat object of
/// key to message. A key in two files, or a file that is not such an object, is an error.
fn catalog(locale: &str) -> Result<BTreeMap<String, String>, String> {
    let prefix = format!("i18n/{locale}/");
    let mut merged = BTreeMap::new();
    let files =
        ConsoleFiles::iter().filter(|name| name.starts_with(&prefix) && name.ends_with(".json"));
    for name in files {
        let file = ConsoleFiles::get(&name).ok_or_else(|| format!("{name} vanished"))?;
        let messages: BTreeMap<String, String> = serde_json::from_slice(&file.data)
            .map_err(|error| format!("{name}: {error} (a flat object of key to message)"))?;
        for (key, message) in messages {
            if merged.insert(key.clone(), message).is_some() {
                return Err(format!(
                    "{name}: key {key} is in another file of {locale} too"
                ));
            }
        }
    }
    if merged.is_empty() {
        return Err(format!("no catalog files under {prefix}"));
    }
    Ok(merged)
}

/// One embedded file.
fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(file) = ConsoleFiles::get(path) else {
        return (
            StatusCode::NOT_FOUND,
            format!("the console has no file {FILES_PREFIX}{path}"),
        )
            .into_response();
    };
    // mime_guess names `.js` as JavaScript, which a module script must be served as.
    respond(&file.data, file.metadata.mimetype(), headers)
}

/// `body`, or a 304 when the browser already has it (the names carry no version, so the
/// browser asks every time and is told when nothing changed), with the safety headers.
fn respond(body: &[u8], mime: &str, headers: &HeaderMap) -> Response {
    use sha2::Digest as _;
    let etag = format!("\"{}\"", hex::encode(&sha2::Sha256::digest(body)[..16]));
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|sent| sent.as_bytes() == etag.as_bytes());
    let mut response = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, mime.to_owned())], body.to_vec()).into_response()
    };
    let response_headers = response.headers_mut();
    for (name, value) in [
        (header::ETAG, etag.as_str()),
        (header::CACHE_CONTROL, "no-cache"),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        if let Ok(value) = HeaderValue::from_str(value) {
            response_headers.insert(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests;
