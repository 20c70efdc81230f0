//! The Kadence book under `/docs/`: the HTML `mdbook build docs` writes (`docs/book`),
//! served from the directory `api.book_dir` names, and what `/docs` says on a node that
//! serves none. The console links its help to it (`scheduler/console/lib/help.js`).
//!
//! Decisions:
//! - **A directory read at run time, not files compiled in** (the console's are): the binary
//!   does not depend on a docs build (cargo cannot see a book built after the binary), a
//!   deployment ships the book beside the binary or leaves it out, and it is optional
//!   without a cargo feature.
//! - **Checked at start** ([`Book::open`]): a `book_dir` that does not exist, is not a
//!   directory or has no `index.html` stops the node with an error naming the key. A node
//!   that started on such a setting would serve nothing, silently.
//! - **Public**: no session, no token. It is documentation, the same for every reader, and
//!   the console's help opens it in a new tab whether or not its reader is signed in.
//! - **Files by `tower-http`'s `ServeDir`**: content types from the file name, `index.html`
//!   for a directory (`/docs/` is the book's `index.html`), no listing, `Last-Modified` and
//!   ranges; a path with a `..` segment is refused (400) before it reaches the file system,
//!   and `ServeDir` itself never leaves the directory either. Symbolic links inside the
//!   directory are followed: the directory is the operator's, as the binary is.
//! - **`GET /docs` redirects to `/docs/`** (307, as `ServeDir` redirects a directory named
//!   without its slash): the book's links are relative, and from `/docs` they would point
//!   beside it rather than into it.
//! - **Outside the API's budgets, with one of its own**: a book page loads a dozen files at
//!   once, which the share of one client address among the routes anyone may call (2) would
//!   refuse. The book's requests have a budget of their own, as large as the authenticated
//!   routes' (`api.max_concurrent_requests`, 503 beyond), so that a flood of them neither
//!   starves the API nor reads the disk without bound (`crate::http::api` wires it).
//! - **Its own content security policy**: mdBook's pages carry inline scripts and styles,
//!   which the console's policy forbids; the book's allows them, and nothing from another
//!   origin. Its files are static and the operator's, with nothing a user typed in them.
//!   It may frame itself (mdBook's table of contents without JavaScript is a frame), nothing
//!   else may frame it.
//! - **Unset, `/docs` and everything under it answer 404** with a short plain text saying
//!   that this node does not serve the book and how to serve it. The console asks
//!   `HEAD /docs/index.html` once at start and shows its help links only when it is served.

use std::path::{Path, PathBuf};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use tower::ServiceExt as _;
use tower_http::services::ServeDir;

/// Where the book is served.
pub const BOOK_PATH: &str = "/docs";

/// The configuration key of the book's directory, and its environment variable, as errors
/// and answers name them.
const BOOK_DIR_KEY: &str = "api.book_dir (KADENCE_API__BOOK_DIR)";

/// What a node that serves no book answers under `/docs`.
const NOT_SERVED: &str = "This node does not serve the Kadence book. To serve it, build it \
     with `mdbook build docs` and set api.book_dir (KADENCE_API__BOOK_DIR) to the directory \
     it writes, docs/book.\n";

/// What the browser may load and run on a book page: inline scripts and styles (mdBook's
/// pages carry them), everything else from this node only; framed by itself only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self' 'unsafe-inline'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; \
     base-uri 'self'; form-action 'none'; frame-ancestors 'self'";

/// Why `api.book_dir` cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum BookDirError {
    /// The directory cannot be read (it does not exist, or the node may not read it).
    #[error(
        "{BOOK_DIR_KEY} is {dir}, which cannot be read ({source}): set it to the directory \
         `mdbook build docs` writes (docs/book), or leave it unset to serve no book"
    )]
    Unreadable {
        /// The directory as configured.
        dir: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// It names a file, not a directory.
    #[error(
        "{BOOK_DIR_KEY} is {dir}, which is not a directory: set it to the directory \
         `mdbook build docs` writes (docs/book), or leave it unset to serve no book"
    )]
    NotADirectory {
        /// The directory as configured.
        dir: PathBuf,
    },
    /// The directory holds no built book.
    #[error(
        "{BOOK_DIR_KEY} is {dir}, which has no index.html, so it is no built book: run \
         `mdbook build docs` and set it to the directory mdbook writes (docs/book), or leave \
         it unset to serve no book"
    )]
    NoIndex {
        /// The directory as configured.
        dir: PathBuf,
    },
}

/// A built book's directory, checked, and the service that reads its files.
#[derive(Debug, Clone)]
pub struct Book {
    dir: PathBuf,
    files: ServeDir,
}

impl Book {
    /// The book in `dir`, if it is a directory holding an `index.html`. The directory is
    /// resolved now, so a relative `dir` is taken from the node's working directory at start.
    pub fn open(dir: &Path) -> Result<Book, BookDirError> {
        let resolved = std::fs::canonicalize(dir).map_err(|source| BookDirError::Unreadable {
            dir: dir.to_owned(),
            source,
        })?;
        if !resolved.is_dir() {
            return Err(BookDirError::NotADirectory {
                dir: dir.to_owned(),
            });
        }
        if !resolved.join("index.html").is_file() {
            return Err(BookDirError::NoIndex {
                dir: dir.to_owned(),
            });
        }
        Ok(Book {
            files: ServeDir::new(&resolved),
            dir: resolved,
        })
    }

    /// The book `book_dir` names, or none when it is unset.
    pub fn configured(book_dir: Option<&Path>) -> Result<Option<Book>, BookDirError> {
        let book = book_dir.map(Book::open).transpose()?;
        if let Some(book) = &book {
            tracing::info!(dir = %book.dir.display(), "the book is served at /docs/");
        }
        Ok(book)
    }

    /// The directory served, resolved.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The routes under [`BOOK_PATH`]: the book's files, or the answer that it is not served.
pub fn router<S: Clone + Send + Sync + 'static>(book: Option<Book>) -> Router<S> {
    let routes = match book {
        Some(book) => Router::new()
            .route(BOOK_PATH, get(into_the_book))
            .route("/docs/", get(page))
            .route("/docs/{*path}", get(page))
            .with_state(book),
        None => Router::new()
            .route(BOOK_PATH, get(not_served))
            .route("/docs/", get(not_served))
            .route("/docs/{*path}", get(not_served)),
    };
    routes.layer(map_response(with_safety_headers))
}

async fn into_the_book() -> Redirect {
    Redirect::temporary("/docs/")
}

async fn not_served() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, NOT_SERVED)
}

/// One file of the book; `path` is the part below `/docs/`, percent-decoded (none for
/// `/docs/` itself).
async fn page(
    State(book): State<Book>,
    path: Option<UrlPath<String>>,
    request: Request,
) -> Response {
    let decoded = path.map(|UrlPath(path)| path).unwrap_or_default();
    if decoded.split(['/', '\\']).any(|segment| segment == "..") {
        return (
            StatusCode::BAD_REQUEST,
            format!(
                "{BOOK_PATH}/{decoded} leaves the book: a path under {BOOK_PATH}/ may not \
                 have a `..` segment\n"
            ),
        )
            .into_response();
    }
    // ServeDir reads the request's path as sent (percent-encoded), from the book's root.
    let (mut parts, body) = request.into_parts();
    let below = parts
        .uri
        .path()
        .strip_prefix(BOOK_PATH)
        .unwrap_or("/")
        .to_owned();
    parts.uri = match Uri::try_from(below.as_str()) {
        Ok(uri) => uri,
        Err(_) => return missing(&decoded),
    };
    let Ok(answer) = book.files.oneshot(Request::from_parts(parts, body)).await;
    match answer.status() {
        StatusCode::NOT_FOUND => missing(&decoded),
        status if status.is_redirection() => {
            // A directory named without its slash: the place is below /docs, as the request's.
            let mut answer = answer.map(Body::new);
            let location = answer
                .headers()
                .get(header::LOCATION)
                .and_then(|location| location.to_str().ok())
                .and_then(|location| HeaderValue::from_str(&format!("{BOOK_PATH}{location}")).ok());
            match location {
                Some(location) => {
                    answer.headers_mut().insert(header::LOCATION, location);
                    answer
                }
                None => missing(&decoded),
            }
        }
        _ => answer.map(Body::new),
    }
}

fn missing(decoded: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!("the book has no page {BOOK_PATH}/{decoded}\n"),
    )
        .into_response()
}

/// Every answer under `/docs`: asked again each time (a rebuilt book shows at once; the
/// file's `Last-Modified` makes the asking cheap), never sniffed, framed only by the book.
async fn with_safety_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CACHE_CONTROL, "no-cache"),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_FRAME_OPTIONS, "SAMEORIGIN"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_book_dir_must_be_a_directory_with_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nowhere");
        let error = Book::open(&missing).unwrap_err().to_string();
        assert!(
            error.starts_with("api.book_dir (KADENCE_API__BOOK_DIR) is "),
            "{error}"
        );
        assert!(
            error.contains("nowhere") && error.contains("cannot be read"),
            "{error}"
        );

        let file = dir.path().join("file.html");
        std::fs::write(&file, "<p>a file</p>").unwrap();
        let error = Book::open(&file).unwrap_err().to_string();
        assert!(
            error.contains("api.book_dir") && error.contains("not a directory"),
            "{error}"
        );

        let error = Book::open(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("api.book_dir") && error.contains("no index.html"),
            "{error}"
        );
        assert!(error.contains("mdbook build docs"), "{error}");

        std::fs::write(dir.path().join("index.html"), "<h1>Kadence</h1>").unwrap();
        let book = Book::open(dir.path()).expect("a directory with an index is a book");
        assert!(book.dir().is_absolute());
        assert!(Book::configured(None).unwrap().is_none());
    }
}
