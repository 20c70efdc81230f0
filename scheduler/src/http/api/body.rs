//! What a request carries — JSON bodies, query strings, path segments — read into typed
//! values and refused with a 4xx that says why, always in the API's `{"error": "…"}` shape
//! (axum's own extractors answer rejections in plain text).
//!
//! - A body over the limit ([`ApiLimits::body_limit`](super::ApiLimits)) is 413 on every
//!   route, whatever extractor reads it.
//! - A body that has not arrived whole by its [`BodyDeadline`] is 408 (the connection is then
//!   closed): every extractor here reads through [`read_body`], which keeps it, so a route
//!   that takes a body takes it with one of them ([`ApiBytes`] for bytes as they are).
//! - Where a route takes only JSON before anything else is read ([`require_json_content`]),
//!   another content type is 415.
//! - A NUL character (`\u0000`) anywhere in a string is 400 naming the field: PostgreSQL
//!   cannot store it in text, and no job field has a use for it, so both backends refuse it
//!   the same way before anything is written.
//! - Anything else that is not the expected JSON is 400 with the parser's message.
//! - A query string or path segment that does not parse ([`ApiQuery`], [`ApiPath`]) is 400
//!   with the parser's message (an unknown query parameter included).
//!
//! A JSON body is read whole, then parsed through a `serde_json::Value` to name the field a
//! NUL is in, which costs several times the body in memory; bounded by the 512 KiB limit
//! that is little. [`LargeJson`], for the import's 64 MiB, parses straight into its type and
//! finds NULs in the raw text instead (see [`parse_large_json`]).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ApiError;

/// A JSON body; rejections are [`ApiError`]s, so every 4xx has the same shape.
pub(crate) struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let body = read_body(request, state).await?;
        parse_json(&body).map(ApiJson)
    }
}

/// A JSON body that may be left out: an empty body is `T::default()`.
pub(crate) struct OptionalJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let body = read_body(request, state).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        parse_json(&body).map(OptionalJson)
    }
}

/// A large JSON body (the XXL-JOB import's): parsed without a `serde_json::Value` between
/// the bytes and `T`, so that it holds the body and `T`, not many times the body.
pub(crate) struct LargeJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for LargeJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let body = read_body(request, state).await?;
        parse_large_json(&body).map(LargeJson)
    }
}

/// A body as it came, within the limit and the deadline.
pub(crate) struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        read_body(request, state).await.map(ApiBytes)
    }
}

/// When a request's body must have arrived whole: put into the request as it comes in
/// ([`super::limits`]), kept by every extractor that reads a body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyDeadline(pub tokio::time::Instant);

/// Ok if the request says its body is JSON (`application/json`, or a `+json` type); 415
/// otherwise.
pub(crate) fn require_json_content(headers: &HeaderMap) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let essence = declared.split(';').next().unwrap_or("").trim();
    let json = essence.eq_ignore_ascii_case("application/json")
        || (essence.len() > "application/+json".len()
            && essence[.."application/".len()].eq_ignore_ascii_case("application/")
            && essence[essence.len() - "+json".len()..].eq_ignore_ascii_case("+json"));
    if json {
        return Ok(());
    }
    Err(ApiError::UnsupportedMediaType(format!(
        "the body must be JSON, sent with Content-Type: application/json (not {declared:?})"
    )))
}

/// A query string; rejections are [`ApiError`]s.
pub(crate) struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(query)| ApiQuery(query))
            .map_err(|rejection| ApiError::BadRequest(rejection.body_text()))
    }
}

/// Path parameters; rejections are [`ApiError`]s.
pub(crate) struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(path)| ApiPath(path))
            .map_err(|rejection| ApiError::BadRequest(rejection.body_text()))
    }
}

/// The whole body, within the limit and by the request's [`BodyDeadline`] if it has one.
async fn read_body<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    let deadline = request.extensions().get::<BodyDeadline>().copied();
    let reading = Bytes::from_request(request, state);
    let read = match deadline {
        Some(BodyDeadline(deadline)) => (tokio::time::timeout_at(deadline, reading).await)
            .map_err(|_| {
                ApiError::RequestTimeout(
                    "the request body did not arrive in time: send it whole, without pauses \
                     (api.body_read_timeout)"
                        .to_owned(),
                )
            })?,
        None => reading.await,
    };
    read.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(format!("request body too large: {}", rejection.body_text()))
        } else {
            ApiError::BadRequest(format!(
                "cannot read the request body: {}",
                rejection.body_text()
            ))
        }
    })
}

/// Parses `body` as JSON, refuses NUL characters in its strings, then reads it as `T`.
pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::BadRequest(format!("invalid request body: {error}")))?;
    refuse_nul(&value, "")?;
    let items = value.as_array().map(Vec::len);
    serde_json::from_value(value).map_err(|error| {
        ApiError::BadRequest(match items {
            // serde reads a struct from a list too, so its message would be about the first
            // item's type; say what is wrong instead.
            Some(items) => format!(
                "invalid request body: a JSON list of {items} items, where one JSON object is \
                 expected (one request per item)"
            ),
            None => format!("invalid request body: {error}"),
        })
    })
}

/// Parses a large `body` as `T` directly (no `Value` tree: see the module docs), refusing a
/// NUL character anywhere in its strings by its position, as the tree that would name its
/// field is what this avoids.
pub(crate) fn parse_large_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if let Some(at) = escaped_nul(body) {
        return Err(ApiError::BadRequest(format!(
            "the body contains a NUL character (\\u0000) at byte {at}, which text fields \
             cannot hold; remove it"
        )));
    }
    serde_json::from_slice(body)
        .map_err(|error| ApiError::BadRequest(format!("invalid request body: {error}")))
}

/// Where JSON text `body` writes a NUL character: JSON strings hold one only as the escape
/// `\u0000` (a raw one is invalid JSON, which the parser refuses), and a backslash before it
/// is an escape of its own unless it is one of a pair.
fn escaped_nul(body: &[u8]) -> Option<usize> {
    const ESCAPE: &[u8] = b"\\u0000";
    (0..body.len().saturating_sub(ESCAPE.len() - 1)).find(|&at| {
        body[at..].starts_with(ESCAPE) && {
            let backslashes = body[..=at]
                .iter()
                .rev()
                .take_while(|&&byte| byte == b'\\')
                .count();
            backslashes % 2 == 1
        }
    })
}

/// Fails naming the first field (a dotted path, `[n]` for list items) whose text holds NUL.
pub(crate) fn refuse_nul(value: &Value, path: &str) -> Result<(), ApiError> {
    let field = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    match value {
        Value::String(text) if text.contains('\0') => Err(ApiError::BadRequest(format!(
            "{} contains a NUL character (\\u0000), which text fields cannot hold; remove it",
            if path.is_empty() { "the body" } else { path }
        ))),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(index, item)| refuse_nul(item, &format!("{path}[{index}]"))),
        Value::Object(fields) => fields.iter().try_for_each(|(name, item)| {
            if name.contains('\0') {
                return Err(ApiError::BadRequest(
                    "a field name contains a NUL character (\\u0000); remove it".to_owned(),
                ));
            }
            refuse_nul(item, &field(name))
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Body {
        #[allow(dead_code)]
        params: String,
    }

    fn message(error: ApiError) -> String {
        match error {
            ApiError::BadRequest(message) => message,
            other => panic!("expected a bad request, got {other:?}"),
        }
    }

    #[test]
    fn nul_characters_are_refused_naming_the_field() {
        let error = parse_json::<Body>(br#"{"params": "a\u0000b"}"#).unwrap_err();
        assert!(message(error).starts_with("params contains a NUL character"));
        let error = parse_json::<Value>(br#"{"alarm_emails": ["x@y.z", "\u0000"]}"#).unwrap_err();
        assert!(message(error).starts_with("alarm_emails[1] contains"));
        let error = parse_json::<Value>(br#"{"a": {"b": "\u0000"}}"#).unwrap_err();
        assert!(message(error).starts_with("a.b contains"));
        assert!(parse_json::<Body>(br#"{"params": "fine \\u0000 as text"}"#).is_ok());
        let error = parse_json::<Body>(br#"[{"params": "a"}, {"params": "b"}]"#).unwrap_err();
        assert_eq!(
            message(error),
            "invalid request body: a JSON list of 2 items, where one JSON object is expected \
             (one request per item)"
        );
    }

    #[test]
    fn large_bodies_refuse_nul_characters_by_position() {
        let error = parse_large_json::<Body>(br#"{"params": "a\u0000b"}"#).unwrap_err();
        assert_eq!(
            message(error),
            "the body contains a NUL character (\\u0000) at byte 13, which text fields \
             cannot hold; remove it"
        );
        let error = parse_large_json::<Value>(br#"{"a\u0000": 1}"#).unwrap_err();
        assert!(message(error).contains("at byte 3"));
        let error = parse_large_json::<Value>(br#"{"a": "\\\u0000"}"#).unwrap_err();
        assert!(
            message(error).contains("at byte 9"),
            "an escaped backslash, then NUL"
        );
        assert!(parse_large_json::<Body>(br#"{"params": "fine \\u0000 as text"}"#).is_ok());
        assert!(parse_large_json::<Value>(br#"{"a": "\\\\u0000"}"#).is_ok());
        let error = parse_large_json::<Body>(br#"{"params": 1}"#).unwrap_err();
        assert!(message(error).starts_with("invalid request body: invalid type"));
    }

    #[test]
    fn json_is_json_whatever_its_parameters_and_case() {
        let with = |content_type: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
            require_json_content(&headers)
        };
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/merge-patch+json",
        ] {
            assert!(with(json).is_ok(), "{json}");
        }
        for other in [
            "text/plain",
            "text/plain; a=application/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/+json",
        ] {
            assert!(
                matches!(with(other), Err(ApiError::UnsupportedMediaType(_))),
                "{other}"
            );
        }
        assert!(matches!(
            require_json_content(&HeaderMap::new()),
            Err(ApiError::UnsupportedMediaType(_))
        ));
    }

    #[test]
    fn other_bad_bodies_say_what_the_parser_saw() {
        let error = parse_json::<Body>(b"{").unwrap_err();
        assert!(message(error).starts_with("invalid request body: EOF"));
        let error = parse_json::<Body>(br#"{"params": 1}"#).unwrap_err();
        assert!(message(error).contains("invalid type"));
    }
}
