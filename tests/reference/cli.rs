//! The book's command-line page, `docs/src/reference/cli.md`, rendered from the `kadence`
//! command's clap tree (`kadence_scheduler::cli::Cli`), so that a subcommand, flag, default
//! or accepted value that changes changes the page.
//!
//! The page, in order: its opening (for operators and scripts); what every client
//! subcommand shares (the API it talks to, the token it sends, exit status); the
//! **Environment** the command reads; **Commands**, every subcommand as a nested list of
//! links; the **Global options**; then one section per command, depth first in clap's order,
//! `## kadence job` above `### kadence job add`, each with its description, usage, arguments
//! and options (default, accepted values, environment variable, repeatable, conflicts).
//!
//! Why a walk of its own over `clap::Command` rather than `clap-markdown`: clap-markdown
//! (0.1) copies help text into the page as it is, so `KADENCE_<SECTION>__<FIELD>` in
//! `kadence serve`'s help became two unclosed HTML tags that mdBook warns about; it heads
//! every "Options:" and "Subcommands:" list with the same `######` heading (a hundred
//! anchors mdBook has to suffix); it leaves out the environment variable an option reads
//! (`--api`, `KADENCE_API_URL`); and none of its options changes any of that. Help text is
//! written for a terminal, so here every character Markdown would read as markup is escaped
//! outside `` `code` ``.
//!
//! The variables the command reads outside clap (the token, where the login is kept, the
//! node's settings and log filter) are listed by hand in [`OTHER_VARIABLES`];
//! `every_variable_the_cli_names_is_on_its_page` holds that list to the CLI's source.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command, CommandFactory};
use expect_test::expect_file;
use kadence_scheduler::cli::Cli;

use crate::markdown::{
    PLAIN, assert_unique_anchors, escape_outside_code, page_opening, table_cell,
};

/// The environment variables the command reads that no clap argument declares: (variable,
/// which subcommands read it, what for), in Markdown.
const OTHER_VARIABLES: [(&str, &str, &str); 5] = [
    (
        "`KADENCE_TOKEN`",
        "every client subcommand",
        "The token sent to the API, before the one `kadence login` saved: an API token for \
         automation ([`kadence token create`](#kadence-token-create)).",
    ),
    (
        "`KADENCE_CONFIG_DIR`",
        "every client subcommand, `login`, `logout`",
        "The directory of `credentials.json`, where `kadence login` keeps its session token, \
         one per API URL, readable by its owner only (0600). When unset: \
         `$XDG_CONFIG_HOME/kadence`, else `$HOME/.config/kadence`.",
    ),
    (
        "`XDG_CONFIG_HOME`, `HOME`",
        "every client subcommand, `login`, `logout`",
        "Where that directory is when `KADENCE_CONFIG_DIR` is not set.",
    ),
    (
        "`KADENCE_<SECTION>__<FIELD>`",
        "`serve`",
        "A setting of the node, over the `--config` file (`KADENCE_KAFKA__BROKERS`): see \
         [Configuration](configuration.md).",
    ),
    (
        "`RUST_LOG`",
        "`serve`",
        "Which log lines the node writes to standard error, as a `tracing` filter \
         (`info`, `kadence_scheduler=debug`); `info` when unset.",
    ),
];

#[test]
fn the_cli_page_matches_clap() {
    let rendered = render();
    assert_unique_anchors(&rendered);
    expect_file!["../../docs/src/reference/cli.md"].assert_eq(&rendered);
}

/// Every `"KADENCE_…"` string in the CLI's source is a variable it reads (clap's `env = …`
/// included); each must be in the page's environment table, so that a new one cannot go
/// undocumented.
#[test]
fn every_variable_the_cli_names_is_on_its_page() {
    let listed = listed_variables(&render());
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../scheduler/src/cli");
    let mut missing = quoted_variables(std::path::Path::new(source));
    missing.retain(|variable| !listed.contains(variable));
    assert!(
        missing.is_empty(),
        "the CLI reads {missing:?}: add them to OTHER_VARIABLES in {}",
        file!()
    );
}

/// The variables the page's environment table lists: the code spans of its first column.
fn listed_variables(page: &str) -> Vec<String> {
    let table = page
        .split_once("## Environment\n\n")
        .map(|(_, after)| after)
        .unwrap_or_default();
    table
        .lines()
        .take_while(|line| line.starts_with('|'))
        .filter_map(|row| row.split('|').nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_owned))
        .collect()
}

/// The `"KADENCE_…"` string literals in the `.rs` files under `directory`.
fn quoted_variables(directory: &std::path::Path) -> Vec<String> {
    let mut variables = Vec::new();
    let entries = std::fs::read_dir(directory).expect("the CLI's source is readable");
    for path in entries.map(|entry| entry.expect("a directory entry").path()) {
        if path.is_dir() {
            variables.extend(quoted_variables(&path));
            continue;
        }
        if path.extension().is_none_or(|extension| extension != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("a source file is readable");
        for (_, rest) in source
            .match_indices("\"KADENCE_")
            .map(|(at, _)| source.split_at(at + 1))
        {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if rest[name.len()..].starts_with('"') {
                variables.push(name);
            }
        }
    }
    variables
}

/// The page.
fn render() -> String {
    let mut root = Cli::command();
    // Builds the tree as `--help` would see it: every subcommand knows its full name
    // (`kadence job add`) for its usage line.
    root.build();
    let mut page = page_opening(
        "Command line",
        "operators and scripts driving a Kadence scheduler with the `kadence` command",
        "you can find any subcommand, its arguments and options with their defaults and \
         accepted values, and the environment variables the command reads",
        "the `kadence` command's clap definition (`kadence_scheduler::cli::Cli`)",
    );
    page.push_str(&introduction());
    page.push_str(&environment(&root));
    page.push_str("## Commands\n\n");
    for command in subcommands(&root) {
        page.push_str(&index(command, 0));
    }
    page.push_str("\n## Global options\n\n");
    page.push_str(&arguments(&root, true));
    for command in subcommands(&root) {
        page.push_str(&sections(command, 2));
    }
    page.truncate(page.trim_end().len());
    page.push('\n');
    page
}

fn introduction() -> String {
    "`kadence serve` runs a scheduler node. Every other subcommand is a client of a node's \
     [HTTP API](http-api.md), at `--api`, and sends a token: `KADENCE_TOKEN`, else the one \
     `kadence login` saved for that API. `kadence openapi` and `kadence preview` need no \
     node.\n\n\
     Every command takes `--help`, and `kadence --version` prints the version. A command \
     that fails prints `error: …` on standard error and exits with a non-zero status (2 for \
     arguments clap refuses); output piped into a reader that stops early (`| head -1`) \
     ends the command quietly.\n\n"
        .to_owned()
}

/// The variables clap's arguments read (`env = …`): the global ones, which every client
/// subcommand reads, then those of each subcommand, depth first; then [`OTHER_VARIABLES`].
fn environment(root: &Command) -> String {
    let mut out =
        String::from("## Environment\n\n| Variable | Read by | Meaning |\n|---|---|---|\n");
    write_variables(&mut out, root, "every client subcommand", true);
    for (variable, read_by, meaning) in OTHER_VARIABLES {
        let _ = writeln!(out, "| {variable} | {read_by} | {meaning} |");
    }
    out.push('\n');
    out
}

/// One row per argument of `command` that reads a variable (a global one only where it is
/// declared, at the root), then the same for the commands under it.
fn write_variables(out: &mut String, command: &Command, read_by: &str, at_root: bool) {
    let own = (command.get_arguments()).filter(|arg| at_root || !arg.is_global_set());
    for arg in own.filter(|arg| arg.get_env().is_some()) {
        let variable = arg
            .get_env()
            .map(|env| env.to_string_lossy())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{variable}` | {read_by} | The value of `--{}` when it is not given: {} |",
            arg.get_long().unwrap_or_default(),
            table_cell(&help(arg)),
        );
    }
    for sub in command.get_subcommands() {
        let name = format!("[`{}`](#{})", full_name(sub), command_anchor(sub));
        write_variables(out, sub, &name, false);
    }
}

/// `command` and the commands under it as a nested list of links.
fn index(command: &Command, depth: usize) -> String {
    let mut out = format!(
        "{}- [`{}`](#{}): {}\n",
        "  ".repeat(depth),
        full_name(command),
        command_anchor(command),
        about(command)
    );
    for subcommand in subcommands(command) {
        out.push_str(&index(subcommand, depth + 1));
    }
    out
}

/// `command`'s section (a heading of `level`), then its subcommands' a level below.
fn sections(command: &Command, level: usize) -> String {
    let mut out = format!(
        "{} `{}` {{#{}}}\n\n",
        "#".repeat(level.min(6)),
        full_name(command),
        command_anchor(command)
    );
    let description = command.get_long_about().or(command.get_about());
    if let Some(text) = description {
        let _ = write!(out, "{}\n\n", sentence(&text.to_string()));
    }
    let _ = write!(out, "```text\n{}\n```\n\n", usage(command));
    let children: Vec<&Command> = subcommands(command).collect();
    if !children.is_empty() {
        out.push_str("Subcommands:\n\n");
        for child in &children {
            let _ = writeln!(
                out,
                "- [`{}`](#{}): {}",
                child.get_name(),
                command_anchor(child),
                about(child)
            );
        }
        out.push('\n');
    }
    out.push_str(&arguments(command, false));
    if let Some(text) = command.get_after_long_help().or(command.get_after_help()) {
        let _ = write!(out, "{}\n\n", escape(&text.to_string()));
    }
    for child in children {
        out.push_str(&sections(child, level + 1));
    }
    out
}

/// The subcommands a user sees: not hidden, and not clap's own `help`.
fn subcommands(command: &Command) -> impl Iterator<Item = &Command> {
    command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
}

/// `kadence job add`.
fn full_name(command: &Command) -> String {
    command
        .get_bin_name()
        .unwrap_or(command.get_name())
        .to_owned()
}

/// A command's anchor: its full name with hyphens (`kadence-job-add`), as mdBook would make
/// it from the heading, written out so that links and heading agree.
fn command_anchor(command: &Command) -> String {
    full_name(command).replace(' ', "-")
}

/// The short description, as one sentence.
fn about(command: &Command) -> String {
    command
        .get_about()
        .map(|text| sentence(&text.to_string()))
        .unwrap_or_default()
}

/// The usage clap prints, without its `Usage: `: one line per form.
fn usage(command: &Command) -> String {
    let usage = command.clone().render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
    // clap indents the second form of a command that takes arguments or a subcommand.
    usage.lines().map(str::trim).collect::<Vec<_>>().join("\n")
}

/// A command's positional arguments, then its options, each a list. A global option is
/// shown once, under the root that declares it (clap copies it into every subcommand).
fn arguments(command: &Command, root: bool) -> String {
    let shown = |arg: &&Arg| {
        !arg.is_hide_set()
            && !matches!(
                arg.get_action(),
                ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
            )
            && (root || !arg.is_global_set())
    };
    let mut out = String::new();
    for (title, positional) in [("Arguments", true), ("Options", false)] {
        let args: Vec<&Arg> = command
            .get_arguments()
            .filter(shown)
            .filter(|arg| arg.is_positional() == positional)
            .collect();
        if args.is_empty() {
            continue;
        }
        let _ = write!(out, "{title}:\n\n");
        for arg in args {
            out.push_str(&argument(command, arg));
        }
        out.push('\n');
    }
    out
}

/// One argument: how it is written, whether it is required, its help, and the rules on
/// its value.
fn argument(command: &Command, arg: &Arg) -> String {
    let mut out = format!("- `{}`", spec(arg));
    if arg.is_positional() && !arg.is_required_set() {
        out.push_str(" (optional)");
    } else if !arg.is_positional() && arg.is_required_set() {
        out.push_str(" (required)");
    }
    let _ = write!(out, ": {}", help(arg));
    let details = details(command, arg);
    if !details.is_empty() {
        let _ = write!(out, " {}", details.join(" "));
    }
    out.push('\n');
    out
}

/// `--app <APP>`, `-o, --output <FILE>`, `--start`, `<ID>`.
fn spec(arg: &Arg) -> String {
    let value = arg
        .get_value_names()
        .and_then(|names| names.first())
        .map_or_else(
            || arg.get_id().as_str().to_ascii_uppercase(),
            ToString::to_string,
        );
    let many = arg
        .get_num_args()
        .is_some_and(|range| range.max_values() > 1);
    let value = format!("<{value}>{}", if many { "..." } else { "" });
    let name = match (arg.get_short(), arg.get_long()) {
        (Some(short), Some(long)) => format!("-{short}, --{long}"),
        (Some(short), None) => format!("-{short}"),
        (None, Some(long)) => format!("--{long}"),
        (None, None) => return value,
    };
    if arg.get_action().takes_values() {
        format!("{name} {value}")
    } else {
        name
    }
}

/// The sentences after an argument's help: default, accepted values, environment variable,
/// repetition, separator, conflicts.
fn details(command: &Command, arg: &Arg) -> Vec<String> {
    let code_list = |values: Vec<String>| {
        values
            .iter()
            .map(|value| format!("`{value}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut details = Vec::new();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|value| value.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && !arg.is_hide_default_value_set() && arg.get_action().takes_values() {
        if defaults.iter().all(String::is_empty) {
            details.push("Default empty.".to_owned());
        } else {
            details.push(format!("Default {}.", code_list(defaults)));
        }
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|value| !value.is_hide_set())
        .map(|value| value.get_name().to_owned())
        .collect();
    if !values.is_empty() && !arg.is_hide_possible_values_set() && arg.get_action().takes_values() {
        let case = if arg.is_ignore_case_set() {
            " (any case)"
        } else {
            ""
        };
        details.push(format!("One of {}{case}.", code_list(values)));
    }
    if let Some(variable) = arg.get_env().filter(|_| !arg.is_hide_env_set()) {
        details.push(format!(
            "From `{}` when not given.",
            variable.to_string_lossy()
        ));
    }
    if matches!(arg.get_action(), ArgAction::Append | ArgAction::Count) {
        details.push("May be given more than once.".to_owned());
    }
    if let Some(separator) = arg.get_value_delimiter() {
        details.push(format!("Values separated by `{separator}`."));
    }
    let conflicts: Vec<String> = command
        .get_arg_conflicts_with(arg)
        .into_iter()
        .map(spec_name)
        .collect();
    if !conflicts.is_empty() {
        details.push(format!("Not together with {}.", code_list(conflicts)));
    }
    details
}

/// How an argument is named where another refers to it: `--fix-rate`, `ID`.
fn spec_name(arg: &Arg) -> String {
    arg.get_long().map_or_else(
        || arg.get_id().as_str().to_ascii_uppercase(),
        |long| format!("--{long}"),
    )
}

/// An argument's help, long if it has one, as Markdown: continuation lines indented to
/// stay in the list item.
fn help(arg: &Arg) -> String {
    let text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    sentence(&text).replace("\n\n", "\n\n  ")
}

/// Help text as Markdown, ending as a sentence does (clap drops the period of a short help).
fn sentence(text: &str) -> String {
    let text = escape(text.trim());
    if text.is_empty() || text.ends_with(['.', '…', '!', '?']) {
        text
    } else {
        format!("{text}.")
    }
}

/// Terminal text as Markdown: markup characters escaped outside `` `code` ``.
fn escape(text: &str) -> String {
    escape_outside_code(text, PLAIN)
}
