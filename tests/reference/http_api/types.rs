//! Schemas as the page names them: a component by its name, linked to its section under
//! `## Schemas`; anything else by its shape (`string or null`, `array of [Run](#schema-run)`,
//! `integer (int64)`); and the limits a schema sets (`maxLength 255`).
//!
//! utoipa inlines the type argument of a generic (`Page<App>` has its items written out in
//! full). An inline schema identical to a component is named after that component, so that a
//! page of apps links to `App` instead of showing `array of object`.

use std::collections::BTreeMap;

use serde_json::Value;

/// Where a `$ref` to a component starts.
const COMPONENT_PREFIX: &str = "#/components/schemas/";

/// The limits a schema may set, in the order the page lists them, as the document spells
/// them (they are what a client generator reads).
const LIMITS: [&str; 8] = [
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "pattern",
    "default",
];

/// Names schemas, knowing the document's components.
pub struct Types<'a> {
    /// Each component's name by its JSON text, to recognise an inlined copy.
    by_shape: BTreeMap<String, &'a str>,
}

impl<'a> Types<'a> {
    /// The namer for `components` (the document's `components.schemas`).
    pub fn new(components: &'a BTreeMap<&'a str, &'a Value>) -> Self {
        let by_shape = components
            .iter()
            .map(|(name, schema)| (schema.to_string(), *name))
            .collect();
        Self { by_shape }
    }

    /// `schema`'s type, in Markdown.
    pub fn name(&self, schema: &Value) -> String {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            return schema_link(reference.trim_start_matches(COMPONENT_PREFIX));
        }
        if let Some(name) = self.by_shape.get(&schema.to_string()) {
            return schema_link(name);
        }
        self.shape(schema)
    }

    /// `schema`'s type by its shape alone, never by a component's name: what a component
    /// itself is (`JobId`: `integer (int64)`).
    pub fn shape(&self, schema: &Value) -> String {
        for (key, joiner) in [("oneOf", " or "), ("anyOf", " or "), ("allOf", " and ")] {
            if let Some(branches) = schema.get(key).and_then(Value::as_array) {
                return self.names(branches, joiner);
            }
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return format!("one of {}", enum_values(values));
        }
        match schema.get("type") {
            Some(Value::String(kind)) => self.primitive(kind, schema),
            Some(Value::Array(kinds)) => kinds
                .iter()
                .filter_map(Value::as_str)
                .map(|kind| self.primitive(kind, schema))
                .collect::<Vec<_>>()
                .join(" or "),
            _ => "any".to_owned(),
        }
    }

    /// The branches of a `oneOf`, `anyOf` or `allOf`, `null` last (utoipa writes an
    /// `Option` as `null` first; "[Run] or null" reads better).
    fn names(&self, branches: &[Value], joiner: &str) -> String {
        let mut names: Vec<String> = branches.iter().map(|branch| self.name(branch)).collect();
        names.sort_by_key(|name| name == "null");
        names.join(joiner)
    }

    /// One JSON type of `schema`: arrays name their items, and a `format` follows its type.
    fn primitive(&self, kind: &str, schema: &Value) -> String {
        match (kind, schema.get("format").and_then(Value::as_str)) {
            ("array", _) => match schema.get("items") {
                Some(items) => format!("array of {}", self.name(items)),
                None => "array".to_owned(),
            },
            ("null", _) => "null".to_owned(),
            (kind, Some(format)) => format!("{kind} ({format})"),
            (kind, None) => kind.to_owned(),
        }
    }
}

/// The limits `schema` sets, e.g. `maxLength 255`, `pattern `^[a-z]+$``.
pub fn limits(schema: &Value) -> Vec<String> {
    LIMITS
        .iter()
        .filter_map(|&limit| {
            let value = schema.get(limit)?;
            Some(match value {
                Value::Number(number) => format!("{limit} {number}"),
                _ => format!("{limit} `{}`", plain_json(value)),
            })
        })
        .collect()
}

/// A schema's type followed by its limits, for a table cell.
pub fn type_with_limits(types: &Types, schema: &Value) -> String {
    with_limits(types.name(schema), schema)
}

/// `kind` followed by the limits of `schema`: `string; maxLength 255`.
pub fn with_limits(kind: String, schema: &Value) -> String {
    std::iter::once(kind)
        .chain(limits(schema))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A schema's description, or, for a nullable reference (`oneOf: [null, $ref]`, which is how
/// utoipa writes an `Option` of a component), the description its branch carries.
pub fn description(schema: &Value) -> Option<&str> {
    let own = schema.get("description").and_then(Value::as_str);
    own.or_else(|| {
        ["oneOf", "anyOf", "allOf"]
            .iter()
            .filter_map(|key| schema.get(key).and_then(Value::as_array))
            .flatten()
            .find_map(|branch| branch.get("description").and_then(Value::as_str))
    })
}

/// The values of an enum, each as code: `VIEW`, `OPERATE`.
pub fn enum_values(values: &[Value]) -> String {
    values
        .iter()
        .map(|value| format!("`{}`", plain_json(value)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A JSON value as a reader writes it: a string without its quotes.
fn plain_json(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The link to a component's section.
pub fn schema_link(name: &str) -> String {
    format!("[{name}](#{})", schema_anchor(name))
}

/// A component's section anchor: `schema-` and its name in lower case (`schema-page_app`).
/// The prefix keeps schemas apart from tags of the same name (the `overview` tag, the
/// `Overview` schema).
pub fn schema_anchor(name: &str) -> String {
    format!("schema-{}", name.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::{Types, limits};

    #[test]
    fn shapes_are_named_and_inlined_components_linked() {
        let app = json!({"type": "object", "properties": {"name": {"type": "string"}}});
        let components = BTreeMap::from([("App", &app)]);
        let types = Types::new(&components);
        let name = |schema| types.name(&schema);
        assert_eq!(
            name(json!({"type": "array", "items": app.clone()})),
            "array of [App](#schema-app)"
        );
        assert_eq!(
            name(json!({"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Run"}]})),
            "[Run](#schema-run) or null"
        );
        assert_eq!(
            name(json!({"type": ["integer", "null"], "format": "int64"})),
            "integer (int64) or null"
        );
        assert_eq!(name(json!({"enum": ["A", "B"]})), "one of `A`, `B`");
        assert_eq!(
            limits(&json!({"maxLength": 255, "pattern": "^a$"})),
            ["maxLength 255", "pattern `^a$`"]
        );
    }
}
