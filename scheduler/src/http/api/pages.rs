//! Pages of listings: every list endpoint answers `{"items": [...], "next": …}` for a bounded
//! `limit` (default 100, at most 1 000), and `next` — the key of the last item, as text — is
//! passed back as `after` for the following page (`null` on the last page). Keyset
//! pagination: a deep page costs what the first one does, and items added meanwhile never
//! shift a page.

use serde::{Deserialize, Serialize};

use super::ApiError;
use crate::store::PageRequest;

/// Items per page when the request names no limit.
pub const DEFAULT_PAGE_SIZE: u32 = 100;
/// Items per page at most.
pub const MAX_PAGE_SIZE: u32 = 1_000;

/// Query of the list endpoints without filters: a page.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Items at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

/// One page of a listing.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Page<T> {
    /// The items, in the listing's order.
    pub items: Vec<T>,
    /// Pass as `after` for the next page; `null` when this page is the last.
    pub next: Option<String>,
}

impl<T> Page<T> {
    /// A page of `items` asked for with `limit`; `key` gives the cursor of an item.
    pub(crate) fn new(items: Vec<T>, limit: u32, key: impl Fn(&T) -> String) -> Page<T> {
        let next = (items.len() >= limit as usize)
            .then(|| items.last().map(key))
            .flatten();
        Page { items, next }
    }
}

impl<T> Page<T> {
    /// The same page with each item converted.
    pub(crate) fn map<U>(self, convert: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(convert).collect(),
            next: self.next,
        }
    }
}

/// The `limit` of a request, checked.
pub(crate) fn page_size(limit: Option<u32>) -> Result<u32, ApiError> {
    match limit {
        None => Ok(DEFAULT_PAGE_SIZE),
        Some(limit) if (1..=MAX_PAGE_SIZE).contains(&limit) => Ok(limit),
        Some(limit) => Err(ApiError::BadRequest(format!(
            "limit must be between 1 and {MAX_PAGE_SIZE}, not {limit}"
        ))),
    }
}

/// A page request from the query's `after` and `limit`, the cursor read by `parse`.
pub(crate) fn page_request<K>(
    after: Option<&str>,
    limit: Option<u32>,
    parse: impl FnOnce(&str) -> Option<K>,
) -> Result<PageRequest<K>, ApiError> {
    let after = match after {
        None => None,
        Some(text) => Some(parse(text).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "after {text:?} is not a cursor of this listing: pass the `next` of the previous page"
            ))
        })?),
    };
    Ok(PageRequest {
        after,
        limit: page_size(limit)?,
    })
}

/// Cursor of a key made of several parts: `/` between them (app names and numbers never hold
/// one; the last part may).
pub(crate) fn join_key(parts: &[&str]) -> String {
    parts.join("/")
}

/// The parts of a [`join_key`] cursor, `count` of them.
pub(crate) fn split_key(text: &str, count: usize) -> Option<Vec<&str>> {
    let parts: Vec<&str> = text.splitn(count, '/').collect();
    (parts.len() == count).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_page_points_at_its_last_item() {
        let page = Page::new(vec![1, 2, 3], 3, ToString::to_string);
        assert_eq!(page.next.as_deref(), Some("3"));
        let last = Page::new(vec![4], 3, ToString::to_string);
        assert_eq!(last.next, None);
        assert_eq!(Page::<i32>::new(vec![], 3, ToString::to_string).next, None);
    }

    #[test]
    fn limits_and_cursors_are_checked() {
        assert_eq!(page_size(None).unwrap(), DEFAULT_PAGE_SIZE);
        assert!(page_size(Some(0)).is_err());
        assert!(page_size(Some(MAX_PAGE_SIZE + 1)).is_err());
        let request = page_request(Some("42"), Some(10), |text| text.parse::<i64>().ok()).unwrap();
        assert_eq!(request.after, Some(42));
        assert!(page_request(Some("x"), None, |text| text.parse::<i64>().ok()).is_err());
        assert_eq!(
            split_key(&join_key(&["billing", "host/1"]), 2),
            Some(vec!["billing", "host/1"])
        );
        assert_eq!(split_key("billing", 2), None);
    }
}
