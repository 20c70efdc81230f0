//! The page's `## Schemas` section: every component schema of the document, in name order,
//! as `### Name {#schema-name}` with its description and, by its kind:
//!
//! - an object: its properties as a table (name, type with its limits, required,
//!   description), and whether unknown properties are refused (`additionalProperties:
//!   false`, which request bodies declare);
//! - an `allOf` (a struct with another flattened into it): the schemas it extends, linked,
//!   then its own properties;
//! - an enum: its values;
//! - anything else (`JobId`, `TriggerId`): its type and limits.
//!
//! Properties are listed in name order: the document's own order depends on a serde_json
//! feature another crate may switch on, and the page must not change with it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::paragraph;
use super::types::{Types, description, enum_values, schema_anchor, type_with_limits, with_limits};
use crate::markdown::table_cell;

/// The section, from the document's `components.schemas`.
pub fn render(components: &BTreeMap<&str, &Value>, types: &Types) -> String {
    let mut out = String::from(
        "## Schemas\n\n\
         The bodies the operations take and answer, by name. A type links to its schema; \
         limits are the document's (`maxLength` counts characters, `maxItems` items).\n\n",
    );
    for (name, schema) in components {
        out.push_str(&schema_section(name, schema, types));
    }
    out
}

fn schema_section(name: &str, schema: &Value, types: &Types) -> String {
    let mut out = format!("### {name} {{#{}}}\n\n", schema_anchor(name));
    if let Some(text) = schema.get("description").and_then(Value::as_str) {
        let _ = write!(out, "{}\n\n", paragraph(text));
    }
    if let Some(branches) = schema.get("allOf").and_then(Value::as_array) {
        out.push_str(&extended(branches, types));
    } else if schema.get("properties").is_some() {
        out.push_str(&object(schema, types));
    } else if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let _ = write!(out, "One of {}.\n\n", enum_values(values));
    } else {
        let kind = with_limits(types.shape(schema), schema);
        let _ = write!(out, "Type: {kind}.\n\n");
    }
    out
}

/// An `allOf`: the components it takes every property of, then the properties it adds.
fn extended(branches: &[Value], types: &Types) -> String {
    let (objects, bases): (Vec<&Value>, Vec<&Value>) = branches
        .iter()
        .partition(|branch| branch.get("properties").is_some());
    let bases: Vec<String> = bases.iter().map(|base| types.name(base)).collect();
    let mut out = format!("Every property of {}, and:\n\n", bases.join(" and "));
    for part in objects {
        out.push_str(&object(part, types));
    }
    out
}

/// An object's properties as a table, and whether others are refused.
fn object(schema: &Value, types: &Types) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties: BTreeMap<&str, &Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|fields| fields.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default();
    let mut out = String::from("| Property | Type | Required | Description |\n|---|---|---|---|\n");
    for (name, property) in properties {
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} | {} |",
            table_cell(&type_with_limits(types, property)),
            if required.contains(&name) {
                "yes"
            } else {
                "no"
            },
            table_cell(&paragraph(description(property).unwrap_or_default())),
        );
    }
    out.push('\n');
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        out.push_str("A property not listed here is refused (400).\n\n");
    }
    out
}
