//! The two SQL dialects the shared store code is written for.
//!
//! - `ansi`: PostgreSQL and SQLite, which read the same statements: `RETURNING`,
//!   `ON CONFLICT`, `UPDATE … FROM (VALUES …)`.
//! - `mysql`: MySQL 8 and MariaDB 10.11+, which have none of those: `ON DUPLICATE KEY UPDATE`, `UPDATE … JOIN`, and no `RETURNING` on an update (MySQL has
//!   none at all), so a statement that returns what it changed becomes a locking read and a
//!   write in the same transaction.
//!
//! MySQL's locking reads name the index they must use (`FORCE INDEX (PRIMARY)`, or the
//! trigger-id key): InnoDB locks every entry a locking read scans, and waits for those another
//! transaction holds, before it applies the condition, so a read that the optimizer served
//! from another index (`jobs_due` covers `id, status, next_fire_ms`) locked other nodes'
//! rows and deadlocked two scans. Locked by key, a transaction holds only its own rows.
//!
//! Statements both dialects read are written once, with `$n` placeholders each used once
//! and in order; SQLite and MySQL read them as `?` ([`Placeholders`]). Where the
//! dialects differ, a `match B::DIALECT` keeps both versions side by side in the one function
//! that does the work, so a change to an operation is made in one place for every backend.
//! A batch that updates by key joins a derived table of its rows: `WITH v(…) AS (VALUES …)`
//! in `ansi`, [`Statement::push_mysql_rows`](super::statement::Statement::push_mysql_rows) in
//! `mysql`.

use std::borrow::Cow;

/// The dialect a backend reads (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL and SQLite.
    Ansi,
    /// MySQL and MariaDB.
    MySql,
}

impl Dialect {
    /// The type a `CAST` to a 64-bit integer names.
    pub(crate) const fn bigint(self) -> &'static str {
        match self {
            Dialect::Ansi => "BIGINT",
            Dialect::MySql => "SIGNED",
        }
    }
}

/// How a backend marks the parameters of a statement. Statements are written with `$1`,
/// `$2`, … whatever the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholders {
    /// `$1`, `$2`, …, as written (PostgreSQL).
    Numbered,
    /// `?`, bound in order ([`in_order_placeholders`]): MySQL reads nothing else. SQLite reads
    /// `$1` too, but as a parameter *named* `$1`, and binding looks up each parameter's name
    /// in a list: a 500-row insert of a batch's runs, 13 000 parameters, took a quadratic
    /// 84 million steps to bind and held the fire path to 1 500–2 200 triggers a second. `?`
    /// has no name to look up.
    InOrder,
}

impl Placeholders {
    /// `text`, written with `$1`, `$2`, … placeholders, as a backend of this kind reads it.
    pub(crate) fn text(self, text: &str) -> Cow<'_, str> {
        match self {
            Placeholders::Numbered => Cow::Borrowed(text),
            Placeholders::InOrder => Cow::Owned(in_order_placeholders(text)),
        }
    }
}

/// `text` with its `$1`, `$2`, … placeholders as `?`.
///
/// `?` binds by position, so the placeholders must appear once each and in order (the
/// shared statements are written so); anything else is a defect in the statement, caught by
/// the store suite on SQLite and MySQL, and panics rather than binding a value to the wrong place.
/// A `$` inside a quoted literal is left alone.
pub(crate) fn in_order_placeholders(text: &str) -> String {
    let mut rewritten = String::with_capacity(text.len());
    let mut next_expected = 1_u32;
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(open), _) if c == open => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '$') if chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut number = 0_u32;
                while let Some(digit) = chars.peek().and_then(|next| next.to_digit(10)) {
                    number = number * 10 + digit;
                    chars.next();
                }
                assert_eq!(
                    number, next_expected,
                    "placeholder ${number} out of order (expected ${next_expected}) in: {text}"
                );
                next_expected += 1;
                rewritten.push('?');
                continue;
            }
            (None, _) => {}
        }
        rewritten.push(c);
    }
    rewritten
}

#[cfg(test)]
mod tests {
    use super::in_order_placeholders;

    #[test]
    fn placeholders_become_question_marks_in_order() {
        assert_eq!(
            in_order_placeholders("SELECT a FROM t WHERE b = $1 AND c IN ($2, $3) LIMIT $4"),
            "SELECT a FROM t WHERE b = ? AND c IN (?, ?) LIMIT ?"
        );
        assert_eq!(
            in_order_placeholders(
                "SELECT 1 FROM t WHERE x = $1 OR y = $2 OR z = $3 OR w = $4 OR v = $5 OR u = $6 OR s = $7 OR r = $8 OR q = $9 OR p = $10"
            ),
            "SELECT 1 FROM t WHERE x = ? OR y = ? OR z = ? OR w = ? OR v = ? OR u = ? OR s = ? OR r = ? OR q = ? OR p = ?"
        );
    }

    #[test]
    fn quoted_dollars_are_text() {
        assert_eq!(
            in_order_placeholders("SELECT '$1 costs', name FROM t WHERE id = $1"),
            "SELECT '$1 costs', name FROM t WHERE id = ?"
        );
        assert_eq!(
            in_order_placeholders("SELECT 'it''s' FROM t"),
            "SELECT 'it''s' FROM t"
        );
    }

    #[test]
    #[should_panic(expected = "out of order")]
    fn a_reused_placeholder_is_a_defect() {
        in_order_placeholders("SELECT 1 FROM t WHERE $1 IS NULL OR app = $1");
    }

    #[test]
    #[should_panic(expected = "out of order")]
    fn placeholders_out_of_order_are_a_defect() {
        in_order_placeholders("UPDATE t SET a = $2 WHERE id = $1");
    }
}
