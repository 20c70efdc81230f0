//! The API's OpenAPI 3 document, generated from the code: every handler carries a
//! `#[utoipa::path]` naming its method, path, parameters, body and answers, and the router
//! is built from those annotations (`utoipa_axum::routes!`), so a route cannot exist without
//! its entry in the document. The route-enumeration access test reads the operations from
//! the served document.
//!
//! Served without credentials at `/api/openapi.json`, with a browsable Swagger UI at
//! `/api/docs` whose files are compiled into the binary (nothing is fetched at build time or
//! at run time). The document describes the API, which is the same for every installation
//! and holds no data, so — like `/health` — reading it needs no token; calling the operations
//! it lists does.
//!
//! Each operation's summary and description are its handler's doc comment: a one-line
//! summary saying what it does, then what a client must know that the parameters and answers
//! do not say (who may call it, what it changes, what it refuses); a test holds every
//! operation to it.
//!
//! [`ApiDocument`] holds what no handler says: the title, the bearer scheme required by
//! default ([`BearerScheme`]) and the tags; [`add_shared_answers`] adds, to the assembled
//! document, the answers the layers around the handlers give on every operation.

use utoipa::openapi::path::{HttpMethod, Operation};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi, RefOr, Response, ResponseBuilder, content::ContentBuilder};
use utoipa::{Modify, PartialSchema};

use super::error::ErrorBody;

/// Where the document is served.
pub const DOCUMENT_PATH: &str = "/api/openapi.json";
/// Where the browsable page is served.
pub const DOCS_PATH: &str = "/api/docs";
/// The name of the bearer security scheme in the document.
const BEARER: &str = "bearer";
/// Operations anyone may call: they declare an empty security requirement.
const PUBLIC_OPERATIONS: [(&str, HttpMethod); 6] = [
    ("/health", HttpMethod::Get),
    ("/health/ready", HttpMethod::Get),
    ("/metrics", HttpMethod::Get),
    ("/api/auth/login", HttpMethod::Post),
    ("/api/auth/session", HttpMethod::Post),
    ("/api/auth/password-reset", HttpMethod::Post),
];
/// Operations outside the load limits, which a busy node still answers: liveness, readiness
/// and the metrics that show why it is busy.
const NEVER_SHED: [&str; 3] = ["/health", "/health/ready", "/metrics"];
/// Paths under which every operation is public: the schema registry (see `registry`).
const PUBLIC_PREFIX: &str = "/registry/";

/// Whether anyone may call `method` on `path`.
fn is_public(path: &str, method: HttpMethod) -> bool {
    path.starts_with(PUBLIC_PREFIX) || PUBLIC_OPERATIONS.contains(&(path, method))
}

/// The parts of the document no handler carries.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Kadence scheduler API",
        description = "Jobs, runs, apps, executors, users and tokens of a Kadence scheduler. \
            Every operation but the public ones (health, metrics, the logins, the password \
            reset, the schema registry) needs `Authorization: Bearer <token>` (a session \
            token from `POST /api/auth/login` or an API token); the web console sends its \
            `kadence_session` cookie instead (from `POST /api/auth/session`), with an \
            `X-Requested-With` header on writes. Bad input is a 4xx with \
            `{\"error\": \"…\"}` saying what to fix."
    ),
    security(("bearer" = [])),
    modifiers(&BearerScheme),
    tags(
        (name = "auth", description = "Login, logout, who am I, the console's language, password resets"),
        (name = "tokens", description = "Named API tokens for automation"),
        (name = "users", description = "Users, their grants per app, role and status (admin)"),
        (name = "apps", description = "Executor apps and their trigger topics"),
        (name = "jobs", description = "Job definitions, start and stop"),
        (name = "runs", description = "Trigger, kill, runs (of a job or across jobs) and their logs"),
        (name = "executors", description = "The executor registry"),
        (name = "reports", description = "Daily counts per job"),
        (name = "overview", description = "The dashboard: counts of jobs, executors and runs, latest failures"),
        (name = "audit", description = "Who changed what"),
        (name = "schedules", description = "Schedule previews"),
        (name = "signing-keys", description = "The keys trigger and control records are signed with"),
        (name = "executor-keys", description = "The keys an app's executors sign their results, logs, beats and dead letters with"),
        (name = "imports", description = "Imports from XXL-JOB: dry run, import, undo (admin)"),
        (name = "replays", description = "Replays of past triggers, backfills of missed fires, the shadow diff report"),
        (name = "health", description = "Liveness, readiness and metrics"),
        (name = "schema-registry", description = "The record schemas, in the Confluent Schema Registry's read API shape"),
    )
)]
pub(super) struct ApiDocument;

/// Declares the bearer scheme the document requires by default.
pub(super) struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A session token (login) or an API token"))
                    .build(),
            ),
        );
    }
}

/// Marks the public operations (an empty security requirement) and adds to every operation
/// of `openapi` the answers the layers around the handlers may give: 401 and 403
/// (authenticated operations), 400 (an operation with parameters or a body), 408 (a body too
/// slow to arrive) and 413 (a body over the limit), 429 (a public operation: one address's
/// share), 503 (a busy node) and 500. Called on the assembled document: a `Modify` runs
/// before the routes' operations are merged in.
pub(super) fn add_shared_answers(openapi: &mut OpenApi) {
    for (path, item) in openapi.paths.paths.iter_mut() {
        for (method, operation) in operations(item) {
            let public = is_public(path, method);
            if public {
                operation.security = Some(Vec::new());
            }
            let has_input = operation.request_body.is_some()
                || operation.parameters.as_ref().is_some_and(|p| !p.is_empty());
            let shared = [
                (
                    "400",
                    has_input,
                    "Invalid input: the message says what to fix",
                ),
                (
                    "401",
                    !public,
                    "No token, or a wrong, expired or revoked one",
                ),
                (
                    "403",
                    !public,
                    "The caller lacks the role or grant the message names",
                ),
                (
                    "408",
                    operation.request_body.is_some(),
                    "The body did not arrive whole within api.body_read_timeout",
                ),
                (
                    "413",
                    operation.request_body.is_some(),
                    "The body is over 512 KiB",
                ),
                (
                    "429",
                    public && !NEVER_SHED.contains(&path.as_str()),
                    "Too many requests from this address at once: retry after Retry-After \
                     seconds",
                ),
                (
                    "503",
                    !NEVER_SHED.contains(&path.as_str()),
                    "The node is busy: retry after Retry-After seconds",
                ),
                ("500", true, "An internal failure, logged by the scheduler"),
            ];
            for (status, applies, description) in shared {
                if applies {
                    operation
                        .responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert_with(|| error_answer(description));
                }
            }
        }
    }
}

/// An answer carrying [`ErrorBody`].
pub(super) fn error_answer(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(ErrorBody::schema()))
                .build(),
        )
        .build()
        .into()
}

fn operations(
    item: &mut utoipa::openapi::path::PathItem,
) -> impl Iterator<Item = (HttpMethod, &mut Operation)> {
    [
        (HttpMethod::Get, &mut item.get),
        (HttpMethod::Post, &mut item.post),
        (HttpMethod::Put, &mut item.put),
        (HttpMethod::Patch, &mut item.patch),
        (HttpMethod::Delete, &mut item.delete),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.as_mut().map(|operation| (method, operation)))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::http::api::openapi_document;

    fn document() -> Value {
        serde_json::to_value(openapi_document()).unwrap()
    }

    /// Every operation of `document`: its path, its method and the operation.
    fn each_operation(document: &Value) -> impl Iterator<Item = (&str, &str, &Value)> {
        let paths = document["paths"].as_object().unwrap();
        paths.iter().flat_map(|(path, item)| {
            let operations = item.as_object().unwrap();
            operations
                .iter()
                .map(move |(method, operation)| (path.as_str(), method.as_str(), operation))
        })
    }

    #[test]
    fn only_health_metrics_the_login_and_the_password_reset_are_public() {
        let document = document();
        let mut public = Vec::new();
        for (path, method, operation) in each_operation(&document) {
            let responses = &operation["responses"];
            if operation["security"] == json!([]) {
                public.push(format!("{method} {path}"));
            } else {
                assert!(
                    responses.get("401").is_some(),
                    "{method} {path}: {responses}"
                );
                assert!(
                    responses.get("403").is_some(),
                    "{method} {path}: {responses}"
                );
            }
            // Every operation under the load limits documents the busy node's 503; those
            // outside do not (readiness has a 503 of its own: the database is away).
            let sheds = !super::NEVER_SHED.contains(&path);
            let busy = responses["503"]["description"]
                .as_str()
                .is_some_and(|description| description.starts_with("The node is busy"));
            assert_eq!(busy, sheds, "{method} {path}: {responses}");
            assert!(
                operation["tags"].as_array().is_some(),
                "{method} {path} has a tag"
            );
        }
        public.retain(|operation| !operation.contains(" /registry/"));
        public.sort();
        assert_eq!(
            public,
            [
                "get /health",
                "get /health/ready",
                "get /metrics",
                "post /api/auth/login",
                "post /api/auth/password-reset",
                "post /api/auth/session"
            ]
        );
        assert_eq!(document["security"], json!([{"bearer": []}]));
        assert_eq!(
            document["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
    }

    #[test]
    fn bodies_and_identifiers_carry_their_schemas() {
        let document = document();
        let schemas = &document["components"]["schemas"];
        for name in [
            "JobView",
            "NewJobRequest",
            "Run",
            "User",
            "ErrorBody",
            "AuditEntry",
        ] {
            assert!(schemas.get(name).is_some(), "{name} in {schemas}");
        }
        let get_job = &document["paths"]["/api/jobs/{id}"]["get"];
        let job_id = &get_job["parameters"][0]["schema"]["$ref"];
        assert_eq!(job_id, "#/components/schemas/JobId", "{get_job}");
        assert_eq!(schemas["JobId"]["minimum"], 1);
        let mut references = Vec::new();
        collect_references(&document, &mut references);
        for reference in references {
            let name = reference.trim_start_matches("#/components/schemas/");
            assert!(
                schemas.get(name).is_some(),
                "{reference} resolves to nothing"
            );
        }
        let route_strategy = &schemas["NewJobRequest"]["properties"]["route_strategy"];
        assert!(
            route_strategy.to_string().contains("RouteStrategy"),
            "{route_strategy}"
        );
        assert!(
            schemas["RouteStrategy"]["enum"]
                .to_string()
                .contains("CONSISTENT_HASH")
        );
    }

    #[test]
    fn the_answers_of_the_guards_in_front_of_the_handlers_are_documented() {
        let document = document();
        let paths = &document["paths"];
        let create_job = &paths["/api/jobs"]["post"]["responses"];
        assert!(create_job.get("408").is_some(), "{create_job}");
        assert!(create_job.get("429").is_none(), "{create_job}");
        let session = &paths["/api/auth/session"]["post"]["responses"];
        for status in ["403", "408", "415", "429", "503"] {
            assert!(session.get(status).is_some(), "{status} in {session}");
        }
        let import = &paths["/api/imports/xxl-job"]["post"]["responses"];
        assert!(
            import["413"]["description"]
                .as_str()
                .is_some_and(|description| description.contains("64 MiB")),
            "{import}"
        );
        let list_jobs = &paths["/api/jobs"]["get"]["responses"];
        assert!(list_jobs.get("408").is_none(), "no body, no 408");
    }

    /// The summary is the first line of the handler's doc comment and the description the
    /// paragraphs after it (utoipa splits them at the first blank line): a client reads them
    /// beside the route, in the book's reference and in Swagger UI, so the summary is one
    /// sentence saying what the operation does (not its route again), and the description
    /// says what the parameters and answers cannot (who may call it, what it changes, what
    /// it refuses and why).
    #[test]
    fn every_operation_says_what_it_does() {
        let document = document();
        let mut unsaid = Vec::new();
        for (path, method, operation) in each_operation(&document) {
            let text = |key: &str| operation[key].as_str().unwrap_or_default().trim();
            let (summary, description) = (text("summary"), text("description"));
            let one_sentence = summary.chars().next().is_some_and(char::is_uppercase)
                && summary.ends_with('.')
                && !summary.contains('\n');
            if !one_sentence || summary.contains(path) || description.is_empty() {
                unsaid.push(format!(
                    "{} {path}: summary {summary:?}, description {description:?}",
                    method.to_ascii_uppercase()
                ));
            }
        }
        assert!(
            unsaid.is_empty(),
            "give these handlers a doc comment: a one-line summary, a blank line, then what a \
             client must know\n{}",
            unsaid.join("\n")
        );
    }

    fn collect_references(value: &Value, into: &mut Vec<String>) {
        match value {
            Value::Object(fields) => {
                if let Some(Value::String(reference)) = fields.get("$ref") {
                    into.push(reference.clone());
                }
                fields
                    .values()
                    .for_each(|field| collect_references(field, into));
            }
            Value::Array(items) => items.iter().for_each(|item| collect_references(item, into)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod stated_limits {
    //! The limits as the API states them (see `crate::domain::model::limits`).

    use crate::domain::model::limits::*;

    #[test]
    fn the_api_takes_a_body_with_the_largest_script_and_params() {
        let largest_job = GLUE_SOURCE.max + PARAMS.max + 64 * 1024;
        assert!(largest_job <= crate::http::api::BODY_LIMIT_BYTES);
        // A replay names each of an app's partitions at most once.
        assert_eq!(
            Ok(REPLAY_OFFSETS.max),
            usize::try_from(crate::http::api::MAX_PARTITIONS)
        );
    }

    /// The OpenAPI document's `maxLength` / `maxItems` of `schema.property` (null included in the
    /// type or not).
    fn documented(document: &serde_json::Value, schema: &str, property: &str, key: &str) -> usize {
        let field = &document["components"]["schemas"][schema]["properties"][property];
        field[key]
            .as_u64()
            .and_then(|max| usize::try_from(max).ok())
            .unwrap_or_else(|| panic!("{schema}.{property} states no {key}: {field}"))
    }

    /// utoipa takes only literals in its attributes: this keeps them equal to the limits.
    #[test]
    fn the_openapi_document_states_each_limit() {
        let document = serde_json::to_value(crate::http::api::openapi_document()).expect("JSON");
        let stated = [
            ("NewJobRequest", JOB_NAME),
            ("NewJobRequest", HANDLER),
            ("NewJobRequest", AUTHOR),
            ("NewJobRequest", PARAMS),
            ("NewJobRequest", SCHEDULE_CONF),
            ("NewJobRequest", TIME_ZONE),
            ("NewJobRequest", ALARM_EMAILS),
            ("NewJobRequest", ALARM_WEBHOOK),
            ("NewJobRequest", GLUE_SOURCE),
            ("NewJobRequest", GLUE_REMARK),
            ("NewJobRequest", CHILD_JOB_IDS),
            ("NewAppRequest", APP_TITLE),
            ("KillRequest", KILL_REASON),
            ("ReplayBody", REPLAY_JOB_IDS),
            ("ReplayBody", REPLAY_TRIGGER_TYPES),
            ("ReplayBody", REPLAY_OUTCOMES),
            ("ReplayBody", REPLAY_OFFSETS),
            ("XxlImportRequest", IMPORT_SOURCE),
        ];
        let preview = &document["paths"]["/api/schedules/preview"]["get"]["parameters"];
        for limit in [SCHEDULE_CONF, TIME_ZONE] {
            let parameter = (preview.as_array().expect("the preview's parameters").iter())
                .find(|parameter| parameter["name"] == limit.field)
                .expect("a parameter of the limit's name");
            assert_eq!(
                parameter["schema"]["maxLength"].as_u64(),
                u64::try_from(limit.max).ok(),
                "{parameter}"
            );
        }
        for (schema, limit) in stated {
            let key = match limit.measure {
                Measure::Entries => "maxItems",
                Measure::Characters | Measure::Bytes => "maxLength",
            };
            assert_eq!(
                documented(&document, schema, limit.field, key),
                limit.max,
                "{schema}.{}",
                limit.field
            );
        }
    }
}
