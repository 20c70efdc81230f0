//! What every generated page shares: its opening, and doc comments made fit for the book.

/// The opening of a generated page: its title, who it is for and what they can do after
/// reading it (the book's convention), and where it comes from.
pub fn page_opening(title: &str, for_whom: &str, after_reading: &str, source: &str) -> String {
    format!(
        "# {title}\n\n\
         > **For:** {for_whom}.\n\
         > **After reading:** {after_reading}.\n\n\
         <!-- Generated from {source} by `UPDATE_EXPECT=1 cargo test -p kadence-tests --test \
         reference_docs`: edit the code, not this page. -->\n\n"
    )
}

/// A doc comment as the book shows it: rustdoc's intra-doc links (`` [`Type`] ``,
/// `` [text](crate::path) ``) become plain code or text, since the book has no rustdoc to
/// link to; everything else is Markdown already.
pub fn doc_for_book(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let text = &after[..close];
        let tail = &after[close + 1..];
        if let Some(target) = tail.strip_prefix('(').and_then(|t| t.split_once(')')) {
            if is_rust_path(target.0) {
                out.push_str(text);
                rest = target.1;
                continue;
            }
        } else if text.starts_with('`') && text.ends_with('`') && !tail.starts_with('[') {
            out.push_str(text);
            rest = tail;
            continue;
        }
        out.push('[');
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Whether a link target is a Rust item path (rustdoc's) rather than a URL or a page.
fn is_rust_path(target: &str) -> bool {
    target.starts_with("crate::")
        || target.starts_with("super::")
        || target.starts_with("Self::")
        || (target.contains("::") && !target.contains('/'))
}

/// Text for the book from text that is Markdown in spirit (doc comments, help text with
/// `` `code` ``): outside code spans, each character in `markup` gets a backslash, so that
/// `<token>` shows as written instead of being read as an HTML tag (which mdBook warns about
/// when it is not closed). Code spans are left as they are: Markdown shows them verbatim.
/// An `_` inside a word (`DO_NOTHING`) is left alone: Markdown never reads it as emphasis.
pub fn escape_outside_code(text: &str, markup: &[char]) -> String {
    let mut out = String::with_capacity(text.len());
    for (is_code, piece) in code_spans(text) {
        if is_code {
            out.push_str(piece);
            continue;
        }
        let characters: Vec<char> = piece.chars().collect();
        for (at, &character) in characters.iter().enumerate() {
            let in_word = |offset: Option<usize>| {
                offset
                    .and_then(|at| characters.get(at))
                    .is_some_and(|c| c.is_alphanumeric())
            };
            let intraword =
                character == '_' && in_word(at.checked_sub(1)) && in_word(at.checked_add(1));
            if markup.contains(&character) && !intraword {
                out.push('\\');
            }
            out.push(character);
        }
    }
    out
}

/// The characters Markdown would take for HTML in a doc comment.
pub const TAGS: &[char] = &['<', '>'];

/// The characters Markdown would take for markup in text written for a terminal (clap's help),
/// which means none: emphasis, HTML, links, table cells.
pub const PLAIN: &[char] = &['\\', '*', '_', '<', '>', '[', ']', '|'];

/// Text for one table cell: a row cannot span lines, so the lines are joined; and a `|` ends
/// a cell even inside a code span (GFM tables split rows before reading code spans), so each
/// one is escaped.
pub fn table_cell(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(joined.len());
    let mut escaped = false;
    for character in joined.chars() {
        if character == '|' && !escaped {
            out.push('\\');
        }
        escaped = character == '\\' && !escaped;
        out.push(character);
    }
    out
}

/// `text` cut into code spans (`true`) and the text between them (`false`), as CommonMark
/// reads them: a run of backticks opens a span that the next run of as many closes; a run
/// that nothing closes is text.
fn code_spans(text: &str) -> Vec<(bool, &str)> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find('`') {
        let open = search + found;
        let ticks = backtick_run(&text[open..]);
        let after_open = open + ticks;
        match closing_run(&text[after_open..], ticks) {
            Some(close) => {
                let end = after_open + close + ticks;
                pieces.push((false, &text[start..open]));
                pieces.push((true, &text[open..end]));
                start = end;
                search = end;
            }
            None => search = after_open,
        }
    }
    pieces.push((false, &text[start..]));
    pieces.retain(|(_, piece)| !piece.is_empty());
    pieces
}

fn backtick_run(text: &str) -> usize {
    text.bytes().take_while(|&byte| byte == b'`').count()
}

/// Where in `text` a run of exactly `ticks` backticks starts, if one does.
fn closing_run(text: &str, ticks: usize) -> Option<usize> {
    let mut at = 0;
    while let Some(found) = text[at..].find('`') {
        let run_start = at + found;
        let run = backtick_run(&text[run_start..]);
        if run == ticks {
            return Some(run_start);
        }
        at = run_start + run;
    }
    None
}

/// The ids mdBook 0.5 gives a page's headings, in order and before repeats are numbered
/// (`id_from_content` in `mdbook-html`): an explicit `{#id}` wins; otherwise the heading's
/// text, its links read as their words, trimmed and lowercased, letters, digits, `-` and `_`
/// kept, whitespace turned into `-`, anything else dropped. Headings inside fenced code
/// blocks are not headings. Emphasis written with `_` would keep its underscores here, so a
/// heading that needs it should carry an explicit `{#id}`.
pub fn heading_anchors(page: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut fence: Option<&str> = None;
    for line in page.lines() {
        let trimmed = line.trim_start();
        let opens = ["```", "~~~"]
            .into_iter()
            .find(|marker| trimmed.starts_with(marker));
        match (fence, opens) {
            (None, Some(marker)) => fence = Some(marker),
            (Some(open), Some(marker)) if open == marker => fence = None,
            (None, None) => anchors.extend(heading_id(line)),
            _ => {}
        }
    }
    anchors
}

/// The ids a link can reach on a page: [`heading_anchors`], a repeated one numbered `-1`,
/// `-2`, … as mdBook numbers it (`unique_id`).
pub fn heading_ids(page: &str) -> std::collections::BTreeSet<String> {
    let mut ids = std::collections::BTreeSet::new();
    for id in heading_anchors(page) {
        let mut unique = id.clone();
        let mut counter = 1;
        while !ids.insert(unique.clone()) {
            unique = format!("{id}-{counter}");
            counter += 1;
        }
    }
    ids
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

/// Panics naming every anchor two headings of `page` share: mdBook would give the second a
/// suffix (`-1`), and a link meant for it would land on the first.
pub fn assert_unique_anchors(page: &str) {
    let mut seen = std::collections::BTreeSet::new();
    let shared: Vec<String> = heading_anchors(page)
        .into_iter()
        .filter(|anchor| !seen.insert(anchor.clone()))
        .collect();
    assert!(
        shared.is_empty(),
        "headings share these anchors (give one an explicit {{#id}}): {shared:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::{
        PLAIN, TAGS, doc_for_book, escape_outside_code, heading_anchors, heading_ids, table_cell,
    };

    #[test]
    fn intra_doc_links_become_plain_text() {
        assert_eq!(
            doc_for_book("see [`crate::signer`] and [the wheel](crate::wheel), [a page](../x.md)"),
            "see `crate::signer` and the wheel, [a page](../x.md)"
        );
        assert_eq!(doc_for_book("a [b] c"), "a [b] c");
    }

    #[test]
    fn markup_is_escaped_outside_code_spans_only() {
        assert_eq!(
            escape_outside_code("KADENCE_<SECTION> or `a <b>`, ``x`y``", TAGS),
            "KADENCE_\\<SECTION\\> or `a <b>`, ``x`y``"
        );
        assert_eq!(
            escape_outside_code("GLUE_* and `*/5 * *` [x], DO_NOTHING", PLAIN),
            "GLUE\\_\\* and `*/5 * *` \\[x\\], DO_NOTHING"
        );
        assert_eq!(
            escape_outside_code("KADENCE_<SECTION>__<FIELD>", PLAIN),
            "KADENCE\\_\\<SECTION\\>\\_\\_\\<FIELD\\>"
        );
        assert_eq!(escape_outside_code("a ` b <c>", TAGS), "a ` b \\<c\\>");
    }

    #[test]
    fn a_table_cell_is_one_line_with_its_pipes_escaped() {
        assert_eq!(table_cell("one\ntwo `a|b` c\\|d"), "one two `a\\|b` c\\|d");
    }

    #[test]
    fn anchors_are_explicit_or_mdbooks() {
        let page = "# Title\n## `kadence job add`\n```text\n# not a heading\n```\n\
                    ### GET /api/jobs/{id} {#get-api-jobs-id}\n## Signing keys\n";
        assert_eq!(
            heading_anchors(page),
            [
                "title",
                "kadence-job-add",
                "get-api-jobs-id",
                "signing-keys"
            ]
        );
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
    }
}
