//! A real headless Chromium driven through WebDriver (ChromeDriver, `fantoccini`), for the
//! console's tests. Each [`Browser`] runs its own ChromeDriver on a free loopback port with
//! its own profile, so tests run side by side; every wait has a deadline and says what it
//! waited for. Screenshots go to `target/test-artifacts/console/` (or
//! `$KADENCE_TEST_ARTIFACTS/console/`), where CI keeps them.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// How long a wait for an element or a text lasts before the test fails.
const WAIT: Duration = Duration::from_secs(20);

/// One browser session and the ChromeDriver behind it (killed when dropped).
pub struct Browser {
    client: Client,
    _driver: Child,
    _profile: tempfile::TempDir,
}

/// Where a test's screenshots go.
pub fn artifacts_dir() -> PathBuf {
    let base = std::env::var_os("KADENCE_TEST_ARTIFACTS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts"),
        PathBuf::from,
    );
    base.join("console")
}

impl Browser {
    /// A headless Chromium whose language is `language` (`en-US`, `zh-CN`): what the
    /// console reads as the browser's language.
    pub async fn start(language: &str) -> Browser {
        let port = kadence_tests::free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect(
                "chromedriver runs (infra/test.sh installs Debian's chromium and \
                 chromium-driver; or apt-get install chromium chromium-driver)",
            );
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--window-size=1366,900", format!("--lang={language}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
                "prefs": { "intl.accept_languages": language },
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(error) if started.elapsed() < WAIT => {
                    tracing::debug!(%error, "ChromeDriver not ready yet");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => panic!("no browser session from ChromeDriver at {url}: {error}"),
            }
        };
        Browser {
            client,
            _driver: driver,
            _profile: profile,
        }
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("the page opens");
    }

    /// Resizes the window (a narrow window shows the menu button instead of the sidebar).
    pub async fn resize(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .expect("the window resizes");
    }

    /// The first element matching `css`, waiting for it to appear.
    pub async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("no element {css} within {WAIT:?}: {error}"))
    }

    /// Every element matching `css` now (none is fine).
    pub async fn all(&self, css: &str) -> Vec<Element> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .expect("a search of the page")
    }

    /// Clicks the element matching `css`.
    pub async fn click(&self, css: &str) {
        self.find(css)
            .await
            .click()
            .await
            .unwrap_or_else(|error| panic!("click on {css}: {error}"));
    }

    /// Replaces the text of the input matching `css` with `text`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let input = self.find(css).await;
        input.clear().await.expect("the input clears");
        input
            .send_keys(text)
            .await
            .unwrap_or_else(|error| panic!("typing into {css}: {error}"));
    }

    /// Chooses `value` in the `<select>` matching `css`.
    pub async fn select(&self, css: &str, value: &str) {
        self.find(css)
            .await
            .select_by_value(value)
            .await
            .unwrap_or_else(|error| panic!("choosing {value} in {css}: {error}"));
    }

    /// The text of the element matching `css` once `accept` takes it.
    pub async fn wait_for_text(
        &self,
        css: &str,
        what: &str,
        accept: impl Fn(&str) -> bool,
    ) -> String {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < WAIT {
            if let Some(element) = self.all(css).await.into_iter().next() {
                last = element.text().await.unwrap_or_default();
                if accept(&last) {
                    return last;
                }
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        panic!("{css} never showed {what} within {WAIT:?}; it last read {last:?}")
    }

    /// Waits until nothing matches `css`.
    pub async fn wait_gone(&self, css: &str) {
        let started = Instant::now();
        while started.elapsed() < WAIT {
            if self.all(css).await.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        panic!("{css} still there after {WAIT:?}");
    }

    /// Runs `script` (a function body; `arguments[n]` are `args`) in the page and returns
    /// what it returns; a returned promise is awaited.
    pub async fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute_async(
                &format!(
                    "const done = arguments[arguments.length - 1];
                     Promise.resolve((async () => {{ {script} }})()).then(done, (error) => done(String(error)));"
                ),
                args,
            )
            .await
            .expect("the script runs")
    }

    /// Saves a screenshot of the window as `{name}.png` in [`artifacts_dir`].
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("a screenshot");
        let dir = artifacts_dir();
        std::fs::create_dir_all(&dir).expect("the artifacts directory");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("the screenshot is saved");
    }

    /// Ends the session and the browser.
    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}
