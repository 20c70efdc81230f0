//! The console's help links against the book's sources: every target in `lib/help.js`
//! names a page listed in `docs/src/SUMMARY.md`, every anchor a heading of that page (by
//! mdBook's rule for heading ids), and every page of the console links its help through
//! that one mapping.
//!
//! The anchors are checked against the Markdown, not a built book, so that the test needs no
//! `mdbook`; [`heading_ids`] follows mdBook 0.5's rule (`id_from_content` and `unique_id` in
//! `mdbook-html`): the heading's text trimmed and lowercased, letters, digits, `-` and `_`
//! kept, whitespace turned into `-`, anything else dropped; an explicit `{#id}` wins; a
//! repeated id gets `-1`, `-2`, …. Of inline Markdown it reads links (`[text](url)` is
//! `text`); emphasis written with `_` would keep its underscores here, so a heading that
//! needs it should carry an explicit `{#id}`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::ConsoleFiles;

/// The book's Markdown sources.
fn book_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src")
}

/// `HELP_TARGETS` of `lib/help.js`: console page to book target (`guides/console.html#jobs`).
/// Every line between its braces must be one `page: 'target',`, so that none is skipped.
fn help_targets() -> BTreeMap<String, String> {
    let file = ConsoleFiles::get("lib/help.js").expect("lib/help.js is embedded");
    let text = String::from_utf8(file.data.into_owned()).expect("UTF-8");
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

/// The id mdBook gives a heading whose text is `text`.
fn id_from_text(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// `text` with each Markdown link `[words](target)` as its words.
fn without_link_targets(text: &str) -> String {
    let mut plain = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let Some(end) = rest[at..].find(')') else {
            break;
        };
        plain.push_str(&rest[..at].replace('[', ""));
        rest = &rest[at + end + 1..];
    }
    plain.push_str(&rest.replace('[', ""));
    plain.replace(']', "")
}

/// The id of the ATX heading on `line`, if it is one, before duplicates are numbered.
fn heading_id(line: &str) -> Option<String> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let level = rest.len() - rest.trim_start_matches('#').len();
    if indent > 3 || !(1..=6).contains(&level) {
        return None;
    }
    let text = &rest[level..];
    if !(text.is_empty() || text.starts_with([' ', '\t'])) {
        return None; // `#hashtag`, not a heading
    }
    // A closing sequence of `#`s is not part of the text.
    let text = text.trim();
    let text = match text.trim_end_matches('#') {
        stripped if stripped.is_empty() || stripped.ends_with([' ', '\t']) => stripped.trim_end(),
        _ => text,
    };
    if let Some(open) = text.rfind(" {")
        && text.ends_with('}')
    {
        let attributes = &text[open + 2..text.len() - 1];
        if let Some(id) = attributes
            .split_whitespace()
            .find_map(|attribute| attribute.strip_prefix('#'))
        {
            return Some(id.to_owned());
        }
        return Some(id_from_text(&without_link_targets(&text[..open])));
    }
    Some(id_from_text(&without_link_targets(text)))
}

/// The ids of the headings of a Markdown page, as mdBook makes them (code blocks skipped).
fn heading_ids(markdown: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut fence: Option<&str> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let opens = ["```", "~~~"]
            .into_iter()
            .find(|marker| trimmed.starts_with(marker));
        match (fence, opens) {
            (None, Some(marker)) => fence = Some(marker),
            (Some(open), Some(marker)) if open == marker => fence = None,
            (None, None) => {
                if let Some(id) = heading_id(line) {
                    let mut unique = id.clone();
                    let mut counter = 1;
                    while !ids.insert(unique.clone()) {
                        unique = format!("{id}-{counter}");
                        counter += 1;
                    }
                }
            }
            _ => {}
        }
    }
    ids
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
    for name in ConsoleFiles::iter().filter(|name| name.starts_with("pages/")) {
        let file = ConsoleFiles::get(&name).expect("listed files exist");
        let text = String::from_utf8(file.data.into_owned()).expect("UTF-8");
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
fn heading_ids_follow_mdbooks_rule() {
    let page = "# The web console\n\
        Some text with a # in it.\n\
        ## Editing a job\n\
        ```toml\n\
        ## not a heading\n\
        ```\n\
        ## A run, and its log {#a-run-and-its-log}\n\
        ## Jobs\n\
        ## Jobs ##\n\
        ### `kadence job` — the CLI_way\n\
        ## See [the API](../reference/http-api.md) too\n\
        #hashtag\n";
    let ids: Vec<String> = heading_ids(page).into_iter().collect();
    assert_eq!(
        ids,
        [
            "a-run-and-its-log",
            "editing-a-job",
            "jobs",
            "jobs-1",
            "kadence-job--the-cli_way",
            "see-the-api-too",
            "the-web-console",
        ]
    );
    assert_eq!(
        source_of("guides/console.html#jobs"),
        ("guides/console.md".to_owned(), Some("jobs"))
    );
}
