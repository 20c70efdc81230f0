//! The API's one error type: 4xx with a message saying what to fix (401 with
//! `WWW-Authenticate: Bearer`, 408 with `Connection: close`, 429 and 503 with `Retry-After`),
//! and a bare 500, logged with its cause, for anything else.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::domain::model::limits::OverLimit;
use crate::operations::jobs::JobError;
use crate::store::StoreError;

/// An API failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is invalid; the message says how.
    #[error("{0}")]
    BadRequest(String),
    /// One field of the request is invalid: a 400 whose body names the field too, so that a
    /// form shows the message beside it.
    #[error("{message}")]
    InvalidField {
        /// The field, as the request names it (`schedule_conf`).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// No credentials, or ones that are wrong, expired or revoked.
    #[error("{0}")]
    Unauthorized(String),
    /// The caller is known but may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// Too many failed logins; try again after `retry_after_secs`.
    #[error("{message}")]
    TooManyRequests {
        /// What happened and when to retry.
        message: String,
        /// Seconds until the next attempt is accepted.
        retry_after_secs: u64,
    },
    /// The thing asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with what exists.
    #[error("{0}")]
    Conflict(String),
    /// The request body is over the limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The request body did not arrive in time; the connection is closed after the answer,
    /// since the rest of the body may still be on its way.
    #[error("{0}")]
    RequestTimeout(String),
    /// The body is not of a type the route takes.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The node is too busy for this request now; the client should retry after a moment.
    #[error("service busy: {0}; retry in a moment")]
    Unavailable(String),
    /// Something failed inside; logged, not echoed.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

/// The body of every 4xx answer (and of a 500, whose message is only "internal error").
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
pub(super) struct ErrorBody {
    /// What went wrong and what to fix.
    error: String,
    /// The request field at fault, when one is (a form shows the message beside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    field: Option<String>,
}

impl ApiError {
    /// A 400 about `field`: turns a `BadRequest` into an `InvalidField` (`.map_err(at("x"))`).
    pub(super) fn at(field: &'static str) -> impl FnOnce(ApiError) -> ApiError {
        move |error| match error {
            ApiError::BadRequest(message) => ApiError::InvalidField { field, message },
            other => other,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::BadRequest(_) | ApiError::InvalidField { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(reason) => {
                tracing::debug!(%reason, "API request shed");
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "API request failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let retry_after = match &self {
            ApiError::TooManyRequests {
                retry_after_secs, ..
            } => Some(HeaderValue::from(*retry_after_secs)),
            ApiError::Unavailable(_) => Some(HeaderValue::from_static("1")),
            _ => None,
        };
        let field = match &self {
            ApiError::InvalidField { field, .. } => Some((*field).to_owned()),
            _ => None,
        };
        let mut response = (
            status,
            Json(ErrorBody {
                error: self.to_string(),
                field,
            }),
        )
            .into_response();
        if let Some(retry_after) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry_after);
        }
        if status == StatusCode::REQUEST_TIMEOUT {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if status == StatusCode::UNAUTHORIZED {
            // RFC 6750: say which scheme the API takes.
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// A field over its limit: a 400 naming it, its size and the limit.
impl From<OverLimit> for ApiError {
    fn from(over: OverLimit) -> Self {
        ApiError::InvalidField {
            field: over.limit.field,
            message: over.to_string(),
        }
    }
}

impl From<JobError> for ApiError {
    fn from(error: JobError) -> Self {
        match error {
            JobError::Invalid {
                field: Some(field),
                message,
            } => ApiError::InvalidField { field, message },
            JobError::Invalid {
                field: None,
                message,
            } => ApiError::BadRequest(message),
            JobError::Conflict(message) => ApiError::Conflict(message),
            JobError::Store(error) => error.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::UnknownApp(_) => ApiError::BadRequest(error.to_string()),
            StoreError::JobNotFound(_) => ApiError::NotFound(error.to_string()),
            StoreError::AppExists(_)
            | StoreError::UserExists(_)
            | StoreError::ReplayedBefore { .. } => ApiError::Conflict(error.to_string()),
            busy if busy.is_busy() => ApiError::Unavailable("the database is busy".to_owned()),
            other => ApiError::Internal(other.into()),
        }
    }
}
