//! The schema catalog served in the shape of the Confluent Schema Registry's read API, under
//! `/registry`, so that stock tooling decodes Kadence's records: point a registry-aware
//! deserializer (`schema.registry.url = http://<node>/registry`) at a node and it fetches the
//! writer schema of each record by the id in its Confluent frame.
//!
//! | method | path | answers |
//! |---|---|---|
//! | GET | `/registry/schemas/ids/{id}` | `{"schema": "<avsc>"}` |
//! | GET | `/registry/schemas/ids/{id}/versions` | the subjects and versions of that id |
//! | GET | `/registry/subjects` | every subject |
//! | GET | `/registry/subjects/{subject}/versions` | its versions, oldest first |
//! | GET | `/registry/subjects/{subject}/versions/{version}` | one version (`latest` works) |
//! | POST | `/registry/subjects/{subject}` | the version of a schema under a subject, if released |
//! | GET | `/registry/config` | the compatibility rule the catalog keeps (BACKWARD_TRANSITIVE) |
//!
//! Subjects follow both of Confluent's usual strategies: record names (`io.kadence.TriggerRecord`)
//! and topic names (`{prefix}.results-value`, `{prefix}.triggers.{app}-value` for any app, …).
//! The catalog is compiled in and its ids never change (see `kadence_schemas::catalog`), so
//! every node answers the same; nothing can be registered. Errors carry Confluent's
//! `{"error_code", "message"}` (40401 unknown subject, 40402 unknown version, 40403 unknown
//! schema, 42201 invalid schema, 42202 invalid version), which registry clients turn into
//! their own errors. The schemas are the same as the repository's `.avsc` files, so reading
//! them needs no credentials.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kadence_schemas::catalog::{self, CatalogEntry};
use kadence_schemas::{AppName, Topics};
use serde::{Deserialize, Serialize};

use super::ApiState;
use super::body::{ApiBytes, ApiPath};

/// The compatibility rule the catalog is checked against.
const COMPATIBILITY: &str = "BACKWARD_TRANSITIVE";
/// The records' Avro namespace, the prefix of their record-name subjects.
const NAMESPACE: &str = "io.kadence";
/// What a topic-name subject ends with (record values; keys are plain strings).
const VALUE_SUFFIX: &str = "-value";

/// A registry answer that is not a success, in Confluent's shape.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RegistryError {
    /// Confluent's error code: 40401 unknown subject, 40402 unknown version, 40403 unknown
    /// schema, 42201 invalid schema, 42202 invalid version.
    pub error_code: u32,
    /// What went wrong.
    pub message: String,
}

impl RegistryError {
    fn new(error_code: u32, message: String) -> Self {
        RegistryError {
            error_code,
            message,
        }
    }
}

impl IntoResponse for RegistryError {
    fn into_response(self) -> Response {
        let status = match self.error_code / 100 {
            404 => StatusCode::NOT_FOUND,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        (status, Json(self)).into_response()
    }
}

/// `GET /registry/schemas/ids/{id}`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RegistrySchema {
    /// The `.avsc` text.
    pub schema: String,
}

/// One version of a subject.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SubjectVersion {
    /// The subject.
    pub subject: String,
    /// The schema id written in the Confluent frame.
    pub id: u32,
    /// The version within the subject, from 1.
    pub version: u32,
    /// The `.avsc` text.
    pub schema: String,
}

/// A subject and version an id is registered under.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SubjectAndVersion {
    /// The subject.
    pub subject: String,
    /// The version.
    pub version: u32,
}

/// `GET /registry/config`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RegistryConfig {
    /// Always `BACKWARD_TRANSITIVE`: every released version reads every older one's data.
    #[serde(rename = "compatibilityLevel")]
    pub compatibility_level: String,
}

/// The body of `POST /registry/subjects/{subject}`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SchemaLookup {
    /// The `.avsc` text to look for.
    pub schema: String,
    /// Only AVRO (the default) is served.
    #[serde(rename = "schemaType", default)]
    pub schema_type: Option<String>,
}

/// The records and the topic each is the value of (triggers: one topic per app).
const RECORDS: [&str; 5] = [
    "TriggerRecord",
    "ResultRecord",
    "ControlRecord",
    "ExecutorBeat",
    "LogRecord",
];

/// Every subject, record names first.
fn subjects(topics: &Topics) -> Vec<String> {
    let mut subjects: Vec<String> = RECORDS
        .iter()
        .map(|record| format!("{NAMESPACE}.{record}"))
        .collect();
    for topic in [
        topics.results(),
        topics.control(),
        topics.beats(),
        topics.logs(),
    ] {
        subjects.push(format!("{topic}{VALUE_SUFFIX}"));
    }
    subjects
}

/// The record a subject stands for, if any.
fn record_of(topics: &Topics, subject: &str) -> Option<&'static str> {
    if let Some(record) = subject
        .strip_prefix(NAMESPACE)
        .and_then(|s| s.strip_prefix('.'))
    {
        return RECORDS.iter().copied().find(|known| *known == record);
    }
    let topic = subject.strip_suffix(VALUE_SUFFIX)?;
    let shared = [
        (topics.results(), "ResultRecord"),
        (topics.control(), "ControlRecord"),
        (topics.beats(), "ExecutorBeat"),
        (topics.logs(), "LogRecord"),
    ];
    if let Some((_, record)) = shared.iter().find(|(name, _)| name == topic) {
        return Some(record);
    }
    let app = topic.strip_prefix(&format!("{}.triggers.", topics.prefix()))?;
    AppName::parse(app).ok().map(|_| "TriggerRecord")
}

/// The released versions of `subject`'s record, oldest first.
fn versions_of(
    topics: &Topics,
    subject: &str,
) -> Result<Vec<&'static CatalogEntry>, RegistryError> {
    let record = record_of(topics, subject)
        .ok_or_else(|| RegistryError::new(40401, format!("Subject '{subject}' not found.")))?;
    let mut versions: Vec<&CatalogEntry> = catalog::entries()
        .iter()
        .filter(|entry| entry.record == record)
        .collect();
    versions.sort_by_key(|entry| entry.version);
    Ok(versions)
}

fn subject_version(subject: &str, entry: &CatalogEntry) -> SubjectVersion {
    SubjectVersion {
        subject: subject.to_owned(),
        id: entry.id,
        version: entry.version,
        schema: entry.source.to_owned(),
    }
}

fn unknown_schema(id: &str) -> RegistryError {
    RegistryError::new(40403, format!("Schema {id} not found"))
}

fn entry_by_id(raw: &str) -> Result<&'static CatalogEntry, RegistryError> {
    raw.parse::<u32>()
        .ok()
        .and_then(catalog::schema_for_id)
        .ok_or_else(|| unknown_schema(raw))
}

/// Answers the writer schema whose id a record's Confluent frame carries.
///
/// Anyone may call it. It is what a registry-aware deserializer pointed at a node
/// (`schema.registry.url = http://<node>/registry`) asks for each record's id. The catalog
/// is compiled in and its ids never change, so every node answers the same. An unknown id
/// is a 404 with Confluent's error code 40403.
#[utoipa::path(
    get, path = "/registry/schemas/ids/{id}", tag = "schema-registry",
    params(("id" = u32, Path, description = "The schema id of a Confluent frame")),
    responses(
        (status = 200, description = "The writer schema", body = RegistrySchema),
        (status = 404, description = "No such id (40403)", body = RegistryError),
    ),
)]
pub(super) async fn schema_by_id(
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RegistrySchema>, RegistryError> {
    let entry = entry_by_id(&id)?;
    Ok(Json(RegistrySchema {
        schema: entry.source.to_owned(),
    }))
}

/// Lists the subjects and versions a schema id is registered under.
///
/// Anyone may call it. A schema is under its record name (`io.kadence.TriggerRecord`) and
/// under the value subjects of the topics that carry it (`{prefix}.results-value`, …); the
/// trigger topics' subjects, one per app, are not listed. An unknown id is a 404 (40403).
#[utoipa::path(
    get, path = "/registry/schemas/ids/{id}/versions", tag = "schema-registry",
    params(("id" = u32, Path, description = "The schema id of a Confluent frame")),
    responses(
        (status = 200, description = "The subjects and versions it is under", body = Vec<SubjectAndVersion>),
        (status = 404, description = "No such id (40403)", body = RegistryError),
    ),
)]
pub(super) async fn versions_of_id(
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Vec<SubjectAndVersion>>, RegistryError> {
    let entry = entry_by_id(&id)?;
    let listed = subjects(&state.topics)
        .into_iter()
        .filter(|subject| record_of(&state.topics, subject) == Some(entry.record))
        .map(|subject| SubjectAndVersion {
            subject,
            version: entry.version,
        })
        .collect();
    Ok(Json(listed))
}

/// Lists the subjects of the schema catalog.
///
/// Anyone may call it. Subjects follow both of Confluent's usual strategies: record names
/// (`io.kadence.TriggerRecord`) and topic names (`{prefix}.results-value`, …).
/// `{prefix}.triggers.{app}-value` works for any app, but is not listed: the apps are not
/// the catalog's.
#[utoipa::path(
    get, path = "/registry/subjects", tag = "schema-registry",
    responses((status = 200, description = "Every subject (trigger topics: `{prefix}.triggers.{app}-value` for any app, not listed)", body = Vec<String>)),
)]
pub(super) async fn list_subjects(State(state): State<Arc<ApiState>>) -> Json<Vec<String>> {
    Json(subjects(&state.topics))
}

/// Lists a subject's versions, oldest first.
///
/// Anyone may call it. Each version is a released schema of the subject's record, and each
/// reads the data of every one before it (BACKWARD_TRANSITIVE). An unknown subject is a 404
/// (40401).
#[utoipa::path(
    get, path = "/registry/subjects/{subject}/versions", tag = "schema-registry",
    params(("subject" = String, Path, description = "A record name or `{topic}-value`")),
    responses(
        (status = 200, description = "Its versions, oldest first", body = Vec<u32>),
        (status = 404, description = "No such subject (40401)", body = RegistryError),
    ),
)]
pub(super) async fn list_versions(
    State(state): State<Arc<ApiState>>,
    ApiPath(subject): ApiPath<String>,
) -> Result<Json<Vec<u32>>, RegistryError> {
    let versions = versions_of(&state.topics, &subject)?;
    Ok(Json(versions.iter().map(|entry| entry.version).collect()))
}

/// Answers one version of a subject's schema, with its id.
///
/// Anyone may call it. `version` is a number from 1, or `latest` (or `-1`, Confluent's
/// alias) for the newest. An unknown subject is a 404 (40401), an unknown version a 404
/// (40402), a `version` that is not one a 422 (42202).
#[utoipa::path(
    get, path = "/registry/subjects/{subject}/versions/{version}", tag = "schema-registry",
    params(
        ("subject" = String, Path, description = "A record name or `{topic}-value`"),
        ("version" = String, Path, description = "A version number, or `latest`"),
    ),
    responses(
        (status = 200, description = "That version", body = SubjectVersion),
        (status = 404, description = "No such subject (40401) or version (40402)", body = RegistryError),
        (status = 422, description = "Not a version (42202)", body = RegistryError),
    ),
)]
pub(super) async fn get_version(
    State(state): State<Arc<ApiState>>,
    ApiPath((subject, version)): ApiPath<(String, String)>,
) -> Result<Json<SubjectVersion>, RegistryError> {
    let versions = versions_of(&state.topics, &subject)?;
    let entry = if version == "latest" || version == "-1" {
        versions.last().copied()
    } else {
        let number = version.parse::<u32>().map_err(|_| {
            RegistryError::new(
                42202,
                format!("The specified version '{version}' is not a valid version id: use a number from 1 or latest"),
            )
        })?;
        versions
            .iter()
            .copied()
            .find(|entry| entry.version == number)
    };
    let entry =
        entry.ok_or_else(|| RegistryError::new(40402, format!("Version {version} not found.")))?;
    Ok(Json(subject_version(&subject, entry)))
}

/// Finds the released version of a subject equal to a schema, as registry clients ask.
///
/// Anyone may call it; nothing is registered. The body is `{"schema": "<avsc>"}`, read
/// whatever its content type (registry clients send their own). Schemas are compared in
/// Avro's Parsing Canonical Form, so formatting, docs and defaults do not matter. An
/// unknown subject is a 404 (40401), a schema never released under it a 404 (40403), an
/// invalid one or a `schemaType` other than AVRO a 422 (42201).
#[utoipa::path(
    post, path = "/registry/subjects/{subject}", tag = "schema-registry",
    params(("subject" = String, Path, description = "A record name or `{topic}-value`")),
    request_body = SchemaLookup,
    responses(
        (status = 200, description = "The released version equal to the schema given", body = SubjectVersion),
        (status = 404, description = "No such subject (40401), or the schema was never released under it (40403)", body = RegistryError),
        (status = 422, description = "The schema is not valid Avro (42201)", body = RegistryError),
    ),
)]
pub(super) async fn look_up_schema(
    State(state): State<Arc<ApiState>>,
    ApiPath(subject): ApiPath<String>,
    ApiBytes(body): ApiBytes,
) -> Result<Json<SubjectVersion>, RegistryError> {
    let versions = versions_of(&state.topics, &subject)?;
    // Read whatever the content type: registry clients send their own vendor type.
    let lookup: SchemaLookup = serde_json::from_slice(&body).map_err(|error| {
        RegistryError::new(
            42201,
            format!("the body must be {{\"schema\": \"…\"}}: {error}"),
        )
    })?;
    if lookup
        .schema_type
        .as_deref()
        .is_some_and(|kind| kind != "AVRO")
    {
        return Err(RegistryError::new(
            42201,
            "only AVRO schemas are served".to_owned(),
        ));
    }
    let record = versions.first().map_or("", |entry| entry.record);
    catalog::released_version_of(record, &lookup.schema)
        .map_err(|error| RegistryError::new(42201, format!("Invalid schema: {error}")))?
        .map(|entry| Json(subject_version(&subject, entry)))
        .ok_or_else(|| RegistryError::new(40403, "Schema not found".to_owned()))
}

/// Says the compatibility rule the schema catalog keeps: BACKWARD_TRANSITIVE.
///
/// Anyone may call it, as every `/registry` route: the schemas are the repository's `.avsc`
/// files. In the Confluent Schema Registry's shape, for tooling that asks; nothing can be
/// registered or changed.
#[utoipa::path(
    get, path = "/registry/config", tag = "schema-registry",
    responses((status = 200, description = "The compatibility rule", body = RegistryConfig)),
)]
pub(super) async fn registry_config() -> Json<RegistryConfig> {
    Json(RegistryConfig {
        compatibility_level: COMPATIBILITY.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics() -> Topics {
        Topics::new("acme").unwrap()
    }

    #[test]
    fn subjects_name_records_and_topics() {
        let topics = topics();
        for (subject, record) in [
            ("io.kadence.TriggerRecord", Some("TriggerRecord")),
            ("io.kadence.LogRecord", Some("LogRecord")),
            ("acme.results-value", Some("ResultRecord")),
            ("acme.control-value", Some("ControlRecord")),
            ("acme.beats-value", Some("ExecutorBeat")),
            ("acme.logs-value", Some("LogRecord")),
            ("acme.triggers.billing-value", Some("TriggerRecord")),
            ("acme.triggers.bad.name-value", None),
            ("acme.results-key", None),
            ("kadence.results-value", None),
            ("io.kadence.Nothing", None),
        ] {
            assert_eq!(record_of(&topics, subject), record, "{subject}");
        }
        for subject in subjects(&topics) {
            assert!(record_of(&topics, &subject).is_some(), "{subject}");
        }
    }

    #[test]
    fn every_released_version_is_listed_under_its_subjects() {
        let topics = topics();
        let versions = versions_of(&topics, "acme.triggers.billing-value").unwrap();
        let released = catalog::entries()
            .iter()
            .filter(|entry| entry.record == "TriggerRecord")
            .count();
        assert_eq!(versions.len(), released);
        assert!(
            versions
                .windows(2)
                .all(|pair| pair[0].version < pair[1].version)
        );
        assert_eq!(versions_of(&topics, "nope").unwrap_err().error_code, 40401);
        assert_eq!(entry_by_id("1").unwrap_err().error_code, 40403);
        assert_eq!(entry_by_id("1001").unwrap().record, "TriggerRecord");
    }
}
