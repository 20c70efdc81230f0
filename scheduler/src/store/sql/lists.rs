//! Lists of values bound into a statement: ` IN (…)` and the app scope of a listing.

/// `AND {column} IN (…apps)` on a `QueryBuilder` when the listing is limited to some apps
/// (`Some`, see [`AppScope`](super::AppScope)); `AND false` when that is none at all.
macro_rules! push_app_scope {
    ($query:expr, $column:literal, $apps:expr) => {
        if let Some(apps) = $apps {
            if apps.is_empty() {
                $query.push(" AND false");
            } else {
                $query.push(concat!(" AND ", $column, " IN ("));
                let mut names = $query.separated(", ");
                for app in apps {
                    names.push_bind(app.as_str().to_owned());
                }
                names.push_unseparated(")");
            }
        }
    };
}
pub(crate) use push_app_scope;

/// ` IN (…)` on a `QueryBuilder`, one bind per value of `$values`; the caller keeps a chunk
/// of them below the bind limits ([`UPDATE_CHUNK`](super::UPDATE_CHUNK)).
macro_rules! push_in_list {
    ($query:expr, $values:expr) => {{
        $query.push(" IN (");
        let mut separated = $query.separated(", ");
        for value in $values {
            separated.push_bind(value);
        }
        separated.push_unseparated(")");
    }};
}
pub(crate) use push_in_list;
