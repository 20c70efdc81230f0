//! The book's HTTP API page, `docs/src/reference/http-api.md`, rendered from the OpenAPI
//! document a node serves (`kadence_scheduler::http::api::openapi_document()`), so that the page
//! and the API cannot drift apart: a route, parameter, answer or field that changes changes
//! the page, and this test shows the difference until the page is written anew.
//!
//! The page, in order: its opening (for people scripting against the API or writing a
//! client); **Authentication** (the document's own description and security schemes, the
//! two kinds of token and where they come from, the operations anyone may call, where the
//! live document and Swagger UI are); **Answers** (errors and pages, which every operation
//! shares); **Routes**, every operation in one table; one section per tag, in the
//! document's tag order, with each operation (see `operations`); and **Schemas**, every
//! component with its properties (see `schemas`).
//!
//! Decisions, for the next engineer:
//!
//! - The page is rendered from the document's JSON (serde_json), not from utoipa's types:
//!   the JSON is what a client sees and what a generator reads, so the page names fields and
//!   limits as they appear there (`maxLength`, `oneOf`).
//! - Every map is walked in sorted order (paths, methods in a fixed order, statuses,
//!   properties): serde_json and utoipa keep insertion order or not depending on features
//!   other crates may switch on, and the page must not change with them.
//! - Operations and schemas get explicit anchors (`{#get-api-jobs-id}`, `{#schema-jobview}`):
//!   mdBook's own drop a path's slashes and braces, and the `overview` tag and the
//!   `Overview` schema would share one. [`assert_unique_anchors`] holds the page to it.
//! - The text that is not in the document (how tokens are obtained, what the roles allow)
//!   links to the operations it names through [`Operations::link`], which fails the test
//!   when an operation it names is gone.

mod operations;
mod schemas;
mod types;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use expect_test::expect_file;
use kadence_scheduler::http::api::{DEFAULT_PAGE_SIZE, DOCS_PATH, DOCUMENT_PATH, MAX_PAGE_SIZE};
use serde_json::Value;

use self::operations::{METHODS, Operation};
use self::types::{Types, schema_link};
use crate::markdown::{
    TAGS, assert_unique_anchors, doc_for_book, escape_outside_code, page_opening, table_cell,
};

#[test]
fn the_http_api_page_matches_the_openapi_document() {
    let document = serde_json::to_value(kadence_scheduler::http::api::openapi_document())
        .expect("the OpenAPI document is JSON");
    let rendered = render(&document);
    assert_unique_anchors(&rendered);
    expect_file!["../../docs/src/reference/http-api.md"].assert_eq(&rendered);
}

/// The page.
fn render(document: &Value) -> String {
    let components: BTreeMap<&str, &Value> = document["components"]["schemas"]
        .as_object()
        .map(|schemas| schemas.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default();
    let types = Types::new(&components);
    let operations = Operations::of(document);
    let mut page = page_opening(
        "HTTP API",
        "people scripting against a Kadence scheduler's API or writing a client for it",
        "you can find any route, what it needs (token, parameters, body) and what it answers",
        "the scheduler's OpenAPI document (`kadence_scheduler::http::api::openapi_document`)",
    );
    page.push_str(&authentication(document, &operations));
    page.push_str(&answers(&components));
    page.push_str(&routes(&operations));
    page.push_str(&tag_sections(document, &operations, &types));
    page.push_str(&schemas::render(&components, &types));
    page.truncate(page.trim_end().len());
    page.push('\n');
    page
}

/// Every operation of the document, by path then method.
struct Operations<'a>(Vec<Operation<'a>>);

impl<'a> Operations<'a> {
    fn of(document: &'a Value) -> Self {
        let paths: BTreeMap<&str, &Value> = document["paths"]
            .as_object()
            .map(|paths| paths.iter().map(|(k, v)| (k.as_str(), v)).collect())
            .unwrap_or_default();
        let operations = paths
            .into_iter()
            .flat_map(|(path, item)| {
                METHODS.iter().filter_map(move |&method| {
                    let body = item.get(method)?;
                    Some(Operation { method, path, body })
                })
            })
            .collect();
        Self(operations)
    }

    /// The link to `method` on `path`, which the document must have.
    fn link(&self, method: &str, path: &str) -> String {
        self.0
            .iter()
            .find(|operation| operation.method == method && operation.path == path)
            .unwrap_or_else(|| panic!("the page names {method} {path}: the document has none"))
            .link()
    }
}

/// A doc comment as the page shows it: intra-doc links as plain text, `<…>` as written.
fn paragraph(text: &str) -> String {
    escape_outside_code(&doc_for_book(text.trim()), TAGS)
}

fn authentication(document: &Value, operations: &Operations) -> String {
    let mut out = String::from("## Authentication\n\n");
    if let Some(text) = document["info"]["description"].as_str() {
        let _ = write!(out, "{}\n\n", paragraph(text));
    }
    out.push_str("The document's security schemes:\n\n");
    let schemes = document["components"]["securitySchemes"].as_object();
    for (name, scheme) in schemes.into_iter().flatten() {
        let text = |key: &str| scheme.get(key).and_then(Value::as_str).unwrap_or_default();
        let _ = writeln!(
            out,
            "- `{name}`: {} `{}`. {}.",
            text("type").to_ascii_uppercase(),
            text("scheme"),
            paragraph(text("description")),
        );
    }
    let _ = write!(
        out,
        "\nA call sends its token as `Authorization: Bearer <token>`. A session token comes \
         from {login} with a user name and password (`kadence login` keeps one for the \
         command line) and lasts the scheduler's `auth.session_ttl`; {logout} revokes it. An \
         API token, for automation, comes from {create_token} (its text is shown once; \
         `kadence token create` makes one) and lasts until it expires or is revoked.\n\n\
         Without a valid token an operation answers 401. With one, the caller's role and \
         grants decide (403 otherwise, naming what is missing): an admin may do everything; \
         a member sees only the apps granted to them, reads them with VIEW, changes their \
         jobs with OPERATE and writes script source with SCRIPTS.\n\n\
         Anyone may call these operations, without a token:\n\n",
        login = operations.link("post", "/api/auth/login"),
        logout = operations.link("post", "/api/auth/logout"),
        create_token = operations.link("post", "/api/tokens"),
    );
    for operation in operations
        .0
        .iter()
        .filter(|operation| operation.is_public())
    {
        let _ = writeln!(out, "- {}", operation.link());
    }
    let _ = write!(
        out,
        "\nThe document this page is made from is served, without a token, at \
         `{DOCUMENT_PATH}`, and as a browsable Swagger UI at `{DOCS_PATH}`; \
         [`kadence openapi`](cli.md#kadence-openapi) prints it without a server, for a \
         client generator.\n\n"
    );
    out
}

fn answers(components: &BTreeMap<&str, &Value>) -> String {
    let schema = |name: &str| {
        assert!(
            components.contains_key(name),
            "the page names schema {name}: none such"
        );
        schema_link(name)
    };
    format!(
        "## Answers\n\n\
         Bodies are JSON. A refusal is a 4xx with an {error} saying what to fix (a limit or a \
         rule, by name); 429 and 503 come with `Retry-After`, the seconds to wait before \
         trying again. Every list answers one page ({page} and the like): at most `limit` \
         items (default {DEFAULT_PAGE_SIZE}, at most {MAX_PAGE_SIZE}), and `next`, to pass \
         as `after` for the following page (`null` on the last).\n\n",
        error = schema("ErrorBody"),
        page = schema("Page_JobView"),
    )
}

/// Every operation in one table, with its tag's section.
fn routes(operations: &Operations) -> String {
    let mut out = String::from("## Routes\n\n| Route | Section | Access |\n|---|---|---|\n");
    for operation in &operations.0 {
        let tag = operation.tag();
        let _ = writeln!(
            out,
            "| {} | [{}](#{}) | {} |",
            table_cell(&operation.link()),
            tag_title(tag),
            tag_anchor(tag),
            if operation.is_public() {
                "anyone"
            } else {
                "token"
            },
        );
    }
    out.push('\n');
    out
}

/// One section per tag: the document's tags in its order, then any tag only an operation
/// names, in name order.
fn tag_sections(document: &Value, operations: &Operations, types: &Types) -> String {
    let mut tags: Vec<(&str, &str)> = document["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|tag| {
            let text = |key: &str| tag.get(key).and_then(Value::as_str).unwrap_or_default();
            (text("name"), text("description"))
        })
        .collect();
    let mut undeclared: Vec<&str> = operations.0.iter().map(Operation::tag).collect();
    undeclared.retain(|name| !tags.iter().any(|(declared, _)| declared == name));
    undeclared.sort_unstable();
    undeclared.dedup();
    tags.extend(undeclared.into_iter().map(|name| (name, "")));
    let mut out = String::new();
    for (name, description) in tags {
        let _ = write!(out, "## {} {{#{}}}\n\n", tag_title(name), tag_anchor(name));
        if !description.is_empty() {
            let _ = write!(out, "{}.\n\n", paragraph(description));
        }
        for operation in operations
            .0
            .iter()
            .filter(|operation| operation.tag() == name)
        {
            out.push_str(&operation.render(types));
        }
    }
    out
}

/// A tag as a heading: `signing-keys` is "Signing keys".
fn tag_title(tag: &str) -> String {
    let spaced = tag.replace('-', " ");
    let mut characters = spaced.chars();
    characters
        .next()
        .map(|first| first.to_uppercase().chain(characters).collect())
        .unwrap_or_default()
}

/// A tag's anchor: its name, as mdBook would make it from the heading, written out so that
/// the links to it cannot disagree with the heading.
fn tag_anchor(tag: &str) -> String {
    tag.to_ascii_lowercase()
}
