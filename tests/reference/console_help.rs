//! The console's help links against the book's sources: every target in `lib/help.js`
//! names a page listed in `docs/src/SUMMARY.md`, every anchor a heading of that page (by
//! mdBook's rule for heading ids), and every page of the console links its help through
//! that one mapping.
//!
//! The anchors are checked against the Markdown, not a built book, so that the test needs no
//! `mdbook`: by [`heading_ids`], mdBook's rule, the one the generated pages are held to. The
//! console's files are read from `scheduler/console/`, the folder the binary embeds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::markdown::heading_ids;

/// The book's Markdown sources.
fn book_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src")
}

/// The console's files, as `kadence serve` embeds them.
fn console_files() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scheduler/console")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// `HELP_TARGETS` of `lib/help.js`: console page to book target (`guides/console.html#jobs`).
/// Every line between its braces must be one `page: 'target',`, so that none is skipped.
fn help_targets() -> BTreeMap<String, String> {
    let text = read(&console_files().join("lib/help.js"));
    let start = text
        .find("export const HELP_TARGETS = {")
        .expect("lib/help.js declares `export const HELP_TARGETS = {`");
    let body = &text[start..];
    let body = &body[body.find('\n').expect("a line break") + 1..];
    let body = &body[..body
        .find("\n};")
        .expect("HELP_TARGETS ends with `};` on a line")];
    let mut targets = BTreeMap::new();
    for line in body.lines() {
        let entry = line
            .trim()
            .strip_suffix("',")
            .and_then(|entry| entry.split_once(": '"))
            .filter(|(page, target)| {
                !page.is_empty()
                    && page.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !target.contains('\'')
            });
        let Some((page, target)) = entry else {
            panic!("lib/help.js: {line:?} is not a `page: 'target',` line of HELP_TARGETS");
        };
        assert!(
            targets.insert(page.to_owned(), target.to_owned()).is_none(),
            "lib/help.js: console page {page} is in HELP_TARGETS twice"
        );
    }
    assert!(!targets.is_empty(), "HELP_TARGETS is empty");
    targets
}

/// The chapters `SUMMARY.md` lists, as paths below `docs/src` (`guides/console.md`).
fn book_pages() -> BTreeSet<String> {
    let path = book_sources().join("SUMMARY.md");
    let summary = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    summary
        .match_indices("](")
        .filter_map(|(at, _)| {
            let target = &summary[at + 2..];
            let target = &target[..target.find(')')?];
            target.ends_with(".md").then(|| target.to_owned())
        })
        .collect()
}

/// The Markdown page a target's page is built from, and its anchor if it has one:
/// `guides/console.html#jobs` is `guides/console.md` and `jobs`.
fn source_of(target: &str) -> (String, Option<&str>) {
    let (page, anchor) = match target.split_once('#') {
        Some((page, anchor)) => (page, Some(anchor)),
        None => (target, None),
    };
    let source = page
        .strip_suffix(".html")
        .map_or_else(|| page.to_owned(), |stem| format!("{stem}.md"));
    (source, anchor)
}

#[test]
fn every_help_target_is_a_page_of_the_book() {
    let pages = book_pages();
    let missing: Vec<String> = help_targets()
        .iter()
        .filter_map(|(page, target)| {
            let (source, _) = source_of(target);
            (!pages.contains(&source))
                .then(|| format!("console page {page}: {target} ({source} is not in SUMMARY.md)"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "help targets that are no page of the book:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_help_anchor_is_a_heading_of_its_page() {
    let mut missing = Vec::new();
    for (page, target) in help_targets() {
        let (source, Some(anchor)) = source_of(&target) else {
            continue; // the page's top: the page itself is checked above
        };
        let path = book_sources().join(&source);
        let Ok(markdown) = std::fs::read_to_string(&path) else {
            missing.push(format!(
                "console page {page}: {target} ({source} cannot be read)"
            ));
            continue;
        };
        if !heading_ids(&markdown).contains(anchor) {
            missing.push(format!(
                "console page {page}: {target} ({source} has no heading with id {anchor})"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "help anchors that are no heading of their page:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_console_page_links_its_help_through_the_mapping() {
    let targets = help_targets();
    let mut used = BTreeSet::new();
    let mut wrong = Vec::new();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(console_files().join("pages"))
        .expect("scheduler/console/pages is readable")
        .map(|entry| entry.expect("scheduler/console/pages is readable").path())
        .collect();
    pages.sort();
    for path in pages {
        let name = format!("pages/{}", path.file_name().unwrap().to_string_lossy());
        let text = read(&path);
        let links: Vec<&str> = text
            .match_indices("<${HelpLink} page=\"")
            .filter_map(|(at, marker)| {
                let page = &text[at + marker.len()..];
                page.split('"').next()
            })
            .collect();
        if text.contains("class=\"page-head\"") && links.is_empty() {
            wrong.push(format!("{name} has a page title but no help link"));
        }
        for page in links {
            if !targets.contains_key(page) {
                wrong.push(format!(
                    "{name} links help of {page}, which HELP_TARGETS lacks"
                ));
            }
            used.insert(page.to_owned());
        }
    }
    for page in targets.keys().filter(|page| !used.contains(*page)) {
        wrong.push(format!("HELP_TARGETS has {page}, which no page links"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_target_names_its_page_and_anchor() {
    assert_eq!(
        source_of("guides/console.html#jobs"),
        ("guides/console.md".to_owned(), Some("jobs"))
    );
}
