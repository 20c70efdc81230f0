//! The configuration reference (`docs/src/reference/configuration.md`), from the config types
//! themselves.
//!
//! What a key is, is known only to the source: its name, its section, its doc comment and its
//! type are read from `scheduler/src` (and `kafka/src`, for the broker kind) with `syn`,
//! starting at `kadence_scheduler::config::Config` and following each field whose type is a
//! struct of named fields with `#[serde(default)]` (a section). Defaults come from the running
//! code: `Config::default()` serialized, so a default changed in an `impl Default` changes the
//! page. Secrets are never serialized (`#[serde(skip_serializing)]`): their doc comments say
//! their defaults.
//!
//! A field of a type the page does not know how to name fails the test with the type's name,
//! rather than show a Rust type to operators: teach [`type_name`] the new type.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use expect_test::expect_file;
use quote::ToTokens;
use serde_json::Value;
use syn::{Attribute, Fields, Item, ItemEnum, ItemStruct, Type};

use crate::markdown::{doc_for_book, page_opening};

#[test]
fn the_configuration_page_matches_the_config_types() {
    let source = Source::read();
    let defaults = serde_json::to_value(kadence_scheduler::config::Config::default())
        .expect("the default configuration serializes");
    expect_file!["../../docs/src/reference/configuration.md"]
        .assert_eq(&render(&source, &defaults));
}

/// The structs, enums and type aliases of the crates the configuration is made of, by name.
struct Source {
    structs: HashMap<String, Vec<ItemStruct>>,
    enums: HashMap<String, ItemEnum>,
    aliases: HashMap<String, Type>,
    /// The module docs of `scheduler/src/config/mod.rs`: how configuration is loaded.
    config_module_doc: String,
}

impl Source {
    fn read() -> Source {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut source = Source {
            structs: HashMap::new(),
            enums: HashMap::new(),
            aliases: HashMap::new(),
            config_module_doc: String::new(),
        };
        for crate_dir in ["scheduler/src", "kafka/src"] {
            for file in rust_files(&root.join(crate_dir)) {
                source.add_file(&file);
            }
        }
        let config = parse(&root.join("scheduler/src/config/mod.rs"));
        source.config_module_doc = doc_of(&config.attrs);
        source
    }

    fn add_file(&mut self, file: &Path) {
        for item in parse(file).items {
            match item {
                Item::Struct(item) if derives_deserialize(&item.attrs) => {
                    let name = item.ident.to_string();
                    self.structs.entry(name).or_default().push(item);
                }
                Item::Enum(item) if derives_deserialize(&item.attrs) => {
                    self.enums.insert(item.ident.to_string(), item);
                }
                Item::Type(item) => {
                    self.aliases.insert(item.ident.to_string(), *item.ty);
                }
                _ => {}
            }
        }
    }

    /// The struct a section's field has as its type, if it is a section.
    fn section(&self, ty: &Type) -> Option<&ItemStruct> {
        let name = last_segment(ty)?.ident.to_string();
        let mut sections = self
            .structs
            .get(&name)?
            .iter()
            .filter(|item| is_section(item));
        let section = sections.next();
        // Two section structs of one name would make the walk ambiguous.
        assert!(
            sections.next().is_none(),
            "two config structs named {name}: rename one"
        );
        section
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("source folders are readable") {
        let path = entry.expect("source folders are readable").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file).expect("source files are readable");
    syn::parse_file(&text).unwrap_or_else(|error| panic!("{}: {error}", file.display()))
}

fn derives_deserialize(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("derive") && attr.to_token_stream().to_string().contains("Deserialize")
    })
}

/// A section is a struct of named fields that takes defaults for missing keys.
fn is_section(item: &ItemStruct) -> bool {
    matches!(item.fields, Fields::Named(_)) && serde_options(&item.attrs).contains("default")
}

/// The text inside every `#[serde(...)]` of `attrs`, joined.
fn serde_options(attrs: &[Attribute]) -> String {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("serde"))
        .map(|attr| attr.to_token_stream().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The doc comment of an item or field, as written (one line per `///` line, the single
/// leading space removed).
fn doc_of(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            syn::Meta::NameValue(pair) => match &pair.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').unwrap_or(&line).to_string())
        .collect();
    lines.join("\n").trim().to_string()
}

fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(path) => path.path.segments.last(),
        _ => None,
    }
}

fn type_arguments(segment: &syn::PathSegment) -> Vec<&Type> {
    match &segment.arguments {
        syn::PathArguments::AngleBracketed(arguments) => arguments
            .args
            .iter()
            .filter_map(|argument| match argument {
                syn::GenericArgument::Type(ty) => Some(ty),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// What an operator writes for a key of type `ty`.
fn type_name(source: &Source, ty: &Type, serde: &str) -> String {
    let segment = last_segment(ty).unwrap_or_else(|| panic!("a key of type {}", show(ty)));
    let name = segment.ident.to_string();
    let arguments = type_arguments(segment);
    match name.as_str() {
        "Option" => type_name(source, arguments[0], serde),
        "Duration" if serde.contains("humantime_serde") => "duration".into(),
        "String" => "string".into(),
        "SecretString" => "string, secret".into(),
        "bool" => "boolean".into(),
        "u16" | "u32" | "u64" | "i32" | "i64" | "usize" => "integer".into(),
        "NonZeroUsize" => "integer, 1 or more".into(),
        "SocketAddr" => "address `host:port`".into(),
        "PathBuf" => "path".into(),
        "IpNetworks" => "list of IP addresses and CIDR ranges".into(),
        "Vec" => format!("list of {}s", type_name(source, arguments[0], "")),
        "BTreeMap" | "HashMap" => format!("table of {}s", type_name(source, arguments[1], "")),
        _ => {
            if let Some(aliased) = source.aliases.get(&name) {
                type_name(source, aliased, serde)
            } else if let Some(item) = source.enums.get(&name) {
                one_of(item)
            } else {
                panic!(
                    "the configuration reference does not know how to name the type {name}: \
                     teach `type_name` in tests/reference/config.rs"
                )
            }
        }
    }
}

/// An enum's values as written in the file: its variants under its `rename_all`.
fn one_of(item: &ItemEnum) -> String {
    let serde = serde_options(&item.attrs);
    let values: Vec<String> = item
        .variants
        .iter()
        .map(|variant| {
            let name = variant.ident.to_string();
            let shown = if serde.contains("\"lowercase\"") {
                name.to_lowercase()
            } else if serde.contains("\"SCREAMING_SNAKE_CASE\"") {
                name.to_uppercase()
            } else {
                assert!(
                    !serde.contains("rename_all"),
                    "enum {}: teach `one_of` its rename_all",
                    item.ident
                );
                name
            };
            format!("`{shown}`")
        })
        .collect();
    format!("one of {}", values.join(", "))
}

fn show(ty: &Type) -> String {
    ty.to_token_stream().to_string()
}

/// A default as it would be written in the file.
fn default_shown(value: Option<&Value>) -> String {
    match value {
        None => "not shown (a secret)".into(),
        Some(Value::Null) => "not set".into(),
        Some(Value::String(text)) => format!("`{text:?}`"),
        Some(Value::Array(items)) if items.is_empty() => "`[]` (none)".into(),
        Some(Value::Object(entries)) if entries.is_empty() => "`{}` (none)".into(),
        Some(other) => format!("`{other}`"),
    }
}

/// The environment variable that sets `path` (`config/mod.rs`'s rule: `KADENCE_`, then the
/// section and key joined by `__`, in capitals).
fn environment_variable(path: &[&str], is_table: bool) -> String {
    let name = format!("KADENCE_{}", path.join("__").to_uppercase());
    if is_table {
        format!("`{name}__<KEY>` (keys without dots only; set the others in the file)")
    } else {
        format!("`{name}`")
    }
}

fn render(source: &Source, defaults: &Value) -> String {
    let mut page = page_opening(
        "Configuration",
        "operators setting up `kadence serve`, and anyone reading a node's configuration",
        "set any key of the configuration file or its environment variable, knowing its default \
         and what it changes",
        "the configuration types' doc comments and defaults (`scheduler/src/config/mod.rs` and the \
         types it names)",
    );
    page.push_str(&doc_for_book(&source.config_module_doc));
    page.push_str(
        "\n\nEvery section of the file, in the order the configuration declares them:\n\n",
    );
    let root = source
        .section(&syn::parse_quote!(Config))
        .expect("scheduler/src/config/mod.rs declares Config");
    for field in named_fields(root) {
        let section = field_name(field);
        let _ = writeln!(page, "- [`[{section}]`](#{section})");
    }
    for field in named_fields(root) {
        let section = field_name(field);
        let item = source
            .section(&field.ty)
            .unwrap_or_else(|| panic!("Config.{section} is not a section struct"));
        render_section(
            &mut page,
            source,
            &[&section],
            field,
            item,
            &defaults[&section],
        );
    }
    page
}

fn render_section(
    page: &mut String,
    source: &Source,
    path: &[&str],
    field: &syn::Field,
    item: &ItemStruct,
    defaults: &Value,
) {
    let id = path.join(".");
    let _ = writeln!(page, "\n## `[{id}]` {{#{id}}}\n");
    // The field's doc names the section; the struct's doc, where it has one, explains it
    // and often opens with the same words.
    let named = doc_of(&field.attrs);
    let about = doc_of(&item.attrs);
    if !about.starts_with(&named) {
        let _ = writeln!(page, "{}\n", doc_for_book(&named));
    }
    if !about.is_empty() {
        let _ = writeln!(page, "{}", doc_for_book(&about));
    }
    for key_field in named_fields(item) {
        let key = field_name(key_field);
        let mut key_path = path.to_vec();
        key_path.push(&key);
        if let Some(nested) = source.section(&key_field.ty) {
            render_section(page, source, &key_path, key_field, nested, &defaults[&key]);
            continue;
        }
        render_key(page, source, &key_path, key_field, defaults.get(&key));
    }
}

fn render_key(
    page: &mut String,
    source: &Source,
    path: &[&str],
    field: &syn::Field,
    default: Option<&Value>,
) {
    let serde = serde_options(&field.attrs);
    let ty = type_name(source, &field.ty, &serde);
    let doc = doc_of(&field.attrs);
    assert!(
        !doc.is_empty(),
        "the key {} has no doc comment: say what it does",
        path.join(".")
    );
    let _ = write!(
        page,
        "\n### `{key}` {{#{id}}}\n\n\
         **Type:** {ty} · **Default:** {default} · **Environment:** {env}\n\n{doc}\n",
        key = path[path.len() - 1],
        id = path.join("."),
        default = default_shown(default),
        env = environment_variable(path, ty.starts_with("table of")),
        doc = doc_for_book(&doc),
    );
}

fn named_fields(item: &ItemStruct) -> impl Iterator<Item = &syn::Field> {
    match &item.fields {
        Fields::Named(fields) => fields.named.iter(),
        _ => panic!("{} has no named fields", item.ident),
    }
}

/// A field's key: its name, or its `#[serde(rename)]` (none is used today, so one fails
/// here rather than be shown under the wrong name).
fn field_name(field: &syn::Field) -> String {
    assert!(
        !serde_options(&field.attrs).contains("rename"),
        "teach tests/reference/config.rs serde's rename"
    );
    field
        .ident
        .as_ref()
        .expect("named fields have names")
        .to_string()
}
