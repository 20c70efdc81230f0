//! A small client of the HTTP API that sends the caller's token (`KADENCE_TOKEN`, else the
//! one `kadence login` saved), turns error bodies into readable errors and follows pages.

use anyhow::Context as _;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::credentials::{TOKEN_VARIABLE, token_for};
use crate::http::api::{MAX_PAGE_SIZE, Page};

/// A small client of the HTTP API that turns error bodies into readable errors.
pub(super) struct ApiClient {
    pub(super) base: String,
    pub(super) http: reqwest::Client,
    token: Option<String>,
}

impl ApiClient {
    pub(super) fn new(base: &str) -> Self {
        ApiClient {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            token: token_for(base.trim_end_matches('/')),
        }
    }

    /// The same API, called with `token` instead.
    pub(super) fn with_token(&self, token: String) -> Self {
        ApiClient {
            base: self.base.clone(),
            http: self.http.clone(),
            token: Some(token),
        }
    }

    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    /// One page of a listing at `path` with the query `query` (empty values are left out).
    pub(super) async fn page<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, Option<String>)],
    ) -> anyhow::Result<Page<T>> {
        self.get_with(path, query).await
    }

    /// `GET path` with the query `query` (empty values are left out).
    pub(super) async fn get_with<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, Option<String>)],
    ) -> anyhow::Result<T> {
        let query: Vec<(&str, String)> = query
            .iter()
            .filter_map(|(name, value)| value.clone().map(|value| (*name, value)))
            .collect();
        self.send(self.http.get(format!("{}{path}", self.base)).query(&query))
            .await
    }

    /// Every item of a listing, page after page (for the short ones: apps, executors).
    pub(super) async fn all<T: DeserializeOwned>(
        &self,
        path: &str,
        filter: &[(&str, Option<String>)],
    ) -> anyhow::Result<Vec<T>> {
        let mut items = Vec::new();
        let mut after = None;
        loop {
            let mut query = filter.to_vec();
            query.push(("limit", Some(MAX_PAGE_SIZE.to_string())));
            query.push(("after", after));
            let page: Page<T> = self.page(path, &query).await?;
            items.extend(page.items);
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(items),
            }
        }
    }

    pub(super) async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(body))
            .await
    }

    pub(super) async fn put<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        self.send(self.http.put(format!("{}{path}", self.base)).json(body))
            .await
    }

    pub(super) async fn delete<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.send(self.http.delete(format!("{}{path}", self.base)))
            .await
    }

    /// Sends `request` with the caller's token; the answer's JSON, or `null` for an empty
    /// answer (204), as `T`.
    pub(super) async fn send<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<T> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().await.with_context(|| {
            format!(
                "cannot reach the Kadence API at {} (is `kadence serve` running? set --api or KADENCE_API_URL)",
                self.base
            )
        })?;
        let status = response.status();
        let body = response.text().await.context("reading the API response")?;
        if !status.is_success() {
            let message = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|value| value.get("error")?.as_str().map(str::to_owned))
                .unwrap_or(body);
            // The API's own answer names the header; a CLI user needs the command.
            if status == reqwest::StatusCode::UNAUTHORIZED
                && message.starts_with("credentials needed")
            {
                anyhow::bail!(
                    "not logged in to {}: run `kadence login` (or set {TOKEN_VARIABLE} to an API \
                     token)",
                    self.base
                );
            }
            anyhow::bail!("{message} (HTTP {})", status.as_u16());
        }
        let body = if body.is_empty() {
            "null"
        } else {
            body.as_str()
        };
        serde_json::from_str(body).with_context(|| format!("unexpected API response: {body}"))
    }
}
