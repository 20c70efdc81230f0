//! The console's catalogs and templates: the same keys in every language, every key a page
//! uses in the catalogs, no words written into a template, every file served.

use std::collections::{BTreeMap, BTreeSet};

use super::{ConsoleFiles, LOCALES, catalog};

/// The console's script files and their text.
fn scripts() -> Vec<(String, String)> {
    ConsoleFiles::iter()
        .filter(|name| name.ends_with(".js") && !name.starts_with("vendor/"))
        .map(|name| {
            let file = ConsoleFiles::get(&name).expect("listed files exist");
            let text = String::from_utf8(file.data.into_owned()).expect("scripts are UTF-8");
            (name.into_owned(), text)
        })
        .collect()
}

#[test]
fn every_language_has_every_key() {
    let catalogs: BTreeMap<&str, BTreeMap<String, String>> = LOCALES
        .iter()
        .map(|&locale| {
            (
                locale,
                catalog(locale).unwrap_or_else(|error| panic!("{error}")),
            )
        })
        .collect();
    let all: BTreeSet<&String> = catalogs
        .values()
        .flat_map(|catalog| catalog.keys())
        .collect();
    let mut missing = Vec::new();
    for (locale, catalog) in &catalogs {
        for key in &all {
            match catalog.get(*key) {
                None => missing.push(format!("{locale} lacks {key}")),
                Some(message) if message.trim().is_empty() => {
                    missing.push(format!("{locale} has an empty {key}"));
                }
                Some(_) => {}
            }
        }
    }
    assert!(
        missing.is_empty(),
        "keys in one language only:\n{}",
        missing.join("\n")
    );
}

/// The literal keys of `t('…')` and `t("…")` calls in `text`.
fn used_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for (at, _) in text.match_indices("t(") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '$') {
            continue; // `split(`, `.t(`, …: not the message function
        }
        let rest = &text[at + 2..];
        let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
            continue; // a computed key, e.g. t(`enum.${kind}`)
        };
        if let Some(end) = rest[1..].find(quote) {
            keys.push(rest[1..1 + end].to_owned());
        }
    }
    keys
}

#[test]
fn every_key_a_page_uses_is_in_the_catalogs() {
    let english = catalog(LOCALES[0]).expect("the English catalog");
    let mut unknown = Vec::new();
    for (name, text) in scripts() {
        for key in used_keys(&text) {
            if !english.contains_key(&key) {
                unknown.push(format!("{name}: {key}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "keys no catalog has:\n{}",
        unknown.join("\n")
    );
}

/// The static text of every html`…` template in `text`, with each `${…}` replaced by a
/// space (nested templates are collected on their own).
fn templates(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(start) = text[at..].find("html`") {
        let (template, end) = read_template(bytes, at + start + 5, &mut found);
        found.push(template);
        at = end;
    }
    found
}

/// Reads a template from `from` (just past the backtick) to its closing backtick: its static
/// text, and the index after it. Templates inside `${…}` go to `nested`.
fn read_template(bytes: &[u8], from: usize, nested: &mut Vec<String>) -> (String, usize) {
    let mut text = Vec::new();
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'`' => return (String::from_utf8_lossy(&text).into_owned(), at + 1),
            b'\\' => {
                text.extend_from_slice(&bytes[at..(at + 2).min(bytes.len())]);
                at += 2;
            }
            b'$' if bytes.get(at + 1) == Some(&b'{') => {
                at = skip_expression(bytes, at + 2, nested);
                text.push(b' ');
            }
            byte => {
                text.push(byte);
                at += 1;
            }
        }
    }
    (String::from_utf8_lossy(&text).into_owned(), at)
}

/// Skips a `${…}` expression from just inside its brace; returns the index after `}`.
fn skip_expression(bytes: &[u8], from: usize, nested: &mut Vec<String>) -> usize {
    let mut depth = 1;
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            b'\'' | b'"' => {
                let quote = bytes[at];
                at += 1;
                while at < bytes.len() && bytes[at] != quote {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
            }
            b'`' => {
                let is_html = bytes[..at].ends_with(b"html");
                let (template, end) = read_template(bytes, at + 1, nested);
                if is_html {
                    nested.push(template);
                }
                at = end;
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    at
}

/// Words in a template's text nodes or in the attributes people read.
fn hard_coded_words(template: &str) -> Vec<String> {
    let mut words = Vec::new();
    for piece in template.split('>').skip(1) {
        let node = piece.split('<').next().unwrap_or_default().trim();
        if node.chars().any(char::is_alphabetic) {
            words.push(node.to_owned());
        }
    }
    for attribute in ["placeholder=\"", "title=\"", "aria-label=\"", "alt=\""] {
        for (at, _) in template.match_indices(attribute) {
            let value = &template[at + attribute.len()..];
            let value = value.split('"').next().unwrap_or_default();
            if value.chars().any(char::is_alphabetic) {
                words.push(format!("{attribute}{value}\""));
            }
        }
    }
    words
}

#[test]
fn templates_carry_no_words_of_their_own() {
    let mut found = Vec::new();
    for (name, text) in scripts() {
        for template in templates(&text) {
            for words in hard_coded_words(&template) {
                found.push(format!("{name}: {words}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "text outside the catalogs:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_words_in_a_template() {
    let page =
        "const a = html`<p>${t('x.y')}</p><b>Hello</b>${ok && html`<i title=\"Bye\">${n}</i>`}`;";
    let words: Vec<String> = templates(page)
        .iter()
        .flat_map(|template| hard_coded_words(template))
        .collect();
    assert_eq!(words, ["title=\"Bye\"", "Hello"]);
    assert_eq!(
        used_keys("t('a.b'); split('x'); t(\"c\"); t(`d${e}`)"),
        ["a.b", "c"]
    );
}

#[test]
fn every_page_the_shell_imports_is_embedded() {
    let shell = ConsoleFiles::get("app.js").expect("app.js");
    let shell = String::from_utf8(shell.data.into_owned()).expect("UTF-8");
    for line in shell.lines().filter(|line| line.starts_with("import ")) {
        let path = line.split('\'').nth(1).expect("a quoted module path");
        let path = path.trim_start_matches("./");
        assert!(
            ConsoleFiles::get(path).is_some(),
            "app.js imports {path}, which is not there"
        );
    }
    assert!(ConsoleFiles::get("index.html").is_some());
}
