//! What a request carries — JSON bodies, query strings, path segments — read into typed
//! values and refused with a 4xx that says why, always in the API's `{"error": "…"}` shape
//! (axum's own extractors answer rejections in plain text).
//!
//! - A body over the limit ([`ApiLimits::body_limit`](super::ApiLimits)) is 413 on every
//!   route, whatever extractor reads it.
//! - A NUL character (`\u0000`) anywhere in a string is 400 naming the field: PostgreSQL
//!   cannot store it in text, and no job field has a use for it, so both backends refuse it
//!   the same way before anything is written.
//! - Anything else that is not the expected JSON is 400 with the parser's message.
//! - A query string or path segment that does not parse ([`ApiQuery`], [`ApiPath`]) is 400
//!   with the parser's message (an unknown query parameter included).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
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

async fn read_body<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge(format!(
                    "request body too large: {}",
                    rejection.body_text()
                ))
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
    fn other_bad_bodies_say_what_the_parser_saw() {
        let error = parse_json::<Body>(b"{").unwrap_err();
        assert!(message(error).starts_with("invalid request body: EOF"));
        let error = parse_json::<Body>(br#"{"params": 1}"#).unwrap_err();
        assert!(message(error).contains("invalid type"));
    }
}
