//! One operation of the document as the page shows it:
//!
//! ```text
//! ### GET /api/jobs/{id} {#get-api-jobs-id}
//! summary and description (the handler's doc comment)
//! **Access:** a token, or none for a public operation; the operation id
//! **Parameters**: a table of path and query parameters
//! **Request body**: its content type and schema, linked
//! **Responses**: a table of status, description and body schema
//! ```
//!
//! Each operation's anchor is explicit, made of its method and path (`get-api-jobs-id`):
//! mdBook's own would drop the slashes and braces that tell `/api/jobs/{id}` from
//! `/api/jobs`, and other pages link to these anchors.
//!
//! The document does not name the role or grant each operation needs; what it says is in
//! the operation's 403 answer (a role or grant the message names, or the operation's own
//! rule), which the responses table shows.

use std::fmt::Write as _;

use serde_json::Value;

use super::paragraph;
use super::types::{Types, type_with_limits};
use crate::markdown::table_cell;

/// The methods an operation may have, in the order the page lists a path's operations.
pub const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// One operation: its method and path, and the document's object for it.
pub struct Operation<'a> {
    pub method: &'static str,
    pub path: &'a str,
    pub body: &'a Value,
}

impl Operation<'_> {
    /// `GET /api/jobs/{id}`.
    pub fn title(&self) -> String {
        format!("{} {}", self.method.to_ascii_uppercase(), self.path)
    }

    /// The link to the operation's section.
    pub fn link(&self) -> String {
        format!(
            "[{}](#{})",
            self.title(),
            operation_anchor(self.method, self.path)
        )
    }

    /// Whether anyone may call it: it declares an empty security requirement.
    pub fn is_public(&self) -> bool {
        self.body
            .get("security")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
    }

    /// Its first tag (every Kadence operation has one).
    pub fn tag(&self) -> &str {
        self.body["tags"][0].as_str().unwrap_or_default()
    }

    /// The operation's section.
    pub fn render(&self, types: &Types) -> String {
        let mut out = format!(
            "### {} {{#{}}}\n\n",
            self.title(),
            operation_anchor(self.method, self.path)
        );
        for key in ["summary", "description"] {
            if let Some(text) = self.body.get(key).and_then(Value::as_str) {
                let _ = write!(out, "{}\n\n", paragraph(text));
            }
        }
        out.push_str(&self.access());
        out.push_str(&self.parameters(types));
        out.push_str(&self.request_body(types));
        out.push_str(&self.responses(types));
        out
    }

    fn access(&self) -> String {
        let who = if self.is_public() {
            "anyone, without a token"
        } else {
            "a token, see [Authentication](#authentication)"
        };
        let id = self.body["operationId"].as_str().unwrap_or_default();
        format!("**Access:** {who}. **Operation id:** `{id}`.\n\n")
    }

    fn parameters(&self, types: &Types) -> String {
        let Some(parameters) = self.body.get("parameters").and_then(Value::as_array) else {
            return String::new();
        };
        let mut out = String::from(
            "**Parameters**\n\n\
             | Name | In | Required | Type | Description |\n|---|---|---|---|---|\n",
        );
        for parameter in parameters {
            let text = |key: &str| {
                parameter
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            let required = parameter.get("required").and_then(Value::as_bool) == Some(true);
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                text("name"),
                text("in"),
                if required { "yes" } else { "no" },
                table_cell(&type_with_limits(types, &parameter["schema"])),
                table_cell(&paragraph(text("description"))),
            );
        }
        out.push('\n');
        out
    }

    fn request_body(&self, types: &Types) -> String {
        let Some(body) = self.body.get("requestBody") else {
            return String::new();
        };
        let required = body.get("required").and_then(Value::as_bool) == Some(true);
        let mut out = format!(
            "**Request body** ({}): {}",
            if required { "required" } else { "optional" },
            contents(types, &body["content"])
        );
        if let Some(text) = body.get("description").and_then(Value::as_str) {
            let _ = write!(out, ". {}", paragraph(text));
        }
        out.push_str("\n\n");
        out
    }

    fn responses(&self, types: &Types) -> String {
        let Some(responses) = self.body.get("responses").and_then(Value::as_object) else {
            return String::new();
        };
        let mut statuses: Vec<(&String, &Value)> = responses.iter().collect();
        statuses.sort_by(|a, b| a.0.cmp(b.0));
        let mut out =
            String::from("**Responses**\n\n| Status | Description | Body |\n|---|---|---|\n");
        for (status, response) in statuses {
            let description = response["description"].as_str().unwrap_or_default();
            let body = response
                .get("content")
                .map_or(String::new(), |content| contents(types, content));
            let _ = writeln!(
                out,
                "| {status} | {} | {} |",
                table_cell(&paragraph(description)),
                table_cell(&body)
            );
        }
        out.push('\n');
        out
    }
}

/// The bodies of a request or response by content type: JSON by its schema alone (it is
/// what nearly every operation speaks), any other type named, e.g. `string as text/plain`.
fn contents(types: &Types, content: &Value) -> String {
    let Some(by_type) = content.as_object() else {
        return String::new();
    };
    let mut kinds: Vec<(&String, &Value)> = by_type.iter().collect();
    kinds.sort_by(|a, b| a.0.cmp(b.0));
    kinds
        .into_iter()
        .map(|(kind, media)| {
            let schema = media
                .get("schema")
                .map_or("any".to_owned(), |schema| types.name(schema));
            if kind == "application/json" {
                schema
            } else {
                format!("{schema} as `{kind}`")
            }
        })
        .collect::<Vec<_>>()
        .join(", or ")
}

/// An operation's anchor: its method, then its path with every run of characters other
/// than letters and digits as one hyphen (`get-api-jobs-id`).
pub fn operation_anchor(method: &str, path: &str) -> String {
    let mut anchor = method.to_ascii_lowercase();
    let mut gap = true;
    for character in path.chars() {
        if character.is_ascii_alphanumeric() {
            if gap {
                anchor.push('-');
            }
            anchor.push(character.to_ascii_lowercase());
            gap = false;
        } else {
            gap = true;
        }
    }
    anchor
}

#[cfg(test)]
mod tests {
    use super::operation_anchor;

    #[test]
    fn an_operation_anchor_keeps_the_path_apart() {
        assert_eq!(operation_anchor("get", "/api/jobs"), "get-api-jobs");
        assert_eq!(operation_anchor("get", "/api/jobs/{id}"), "get-api-jobs-id");
        assert_eq!(
            operation_anchor("delete", "/api/apps/{app}/executor-keys/{key_id}"),
            "delete-api-apps-app-executor-keys-key-id"
        );
    }
}
