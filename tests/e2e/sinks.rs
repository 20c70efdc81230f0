//! Local servers that receive alarms in tests: an SMTP sink that speaks just enough of the
//! protocol for a real client (greeting, EHLO, MAIL, RCPT, DATA, QUIT) and keeps each message,
//! and an HTTP server that keeps each JSON body POSTed to it (and has a route that redirects
//! there and one that always fails).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// An SMTP server on 127.0.0.1 that accepts every message.
pub struct SmtpSink {
    pub port: u16,
    messages: Arc<Mutex<Vec<String>>>,
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&messages);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve_smtp(socket, Arc::clone(&kept)));
            }
        });
        SmtpSink { port, messages }
    }

    /// Every message received so far (headers and body, as sent).
    pub fn messages(&self) -> Vec<String> {
        self.messages.lock().unwrap().clone()
    }
}

async fn serve_smtp(socket: tokio::net::TcpStream, messages: Arc<Mutex<Vec<String>>>) {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    if write.write_all(b"220 sink ESMTP ready\r\n").await.is_err() {
        return;
    }
    while let Ok(Some(line)) = lines.next_line().await {
        let command = line.to_ascii_uppercase();
        let reply: &[u8] = if command.starts_with("EHLO") || command.starts_with("HELO") {
            b"250-sink greets you\r\n250 8BITMIME\r\n"
        } else if command.starts_with("DATA") {
            if write
                .write_all(b"354 end with <CRLF>.<CRLF>\r\n")
                .await
                .is_err()
            {
                return;
            }
            let mut message = Vec::new();
            while let Ok(Some(data)) = lines.next_line().await {
                if data == "." {
                    break;
                }
                message.push(data);
            }
            messages.lock().unwrap().push(message.join("\n"));
            b"250 queued\r\n"
        } else if command.starts_with("QUIT") {
            let _ = write.write_all(b"221 bye\r\n").await;
            return;
        } else {
            b"250 OK\r\n"
        };
        if write.write_all(reply).await.is_err() {
            return;
        }
    }
}

/// An HTTP server on 127.0.0.1 that keeps the JSON bodies POSTed to `/hook`; `/moved`
/// redirects there (307, which keeps the method and body) and `/broken` answers 500.
pub struct WebhookSink {
    pub addr: SocketAddr,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl WebhookSink {
    pub async fn start() -> WebhookSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let router = axum::Router::new()
            .route(
                "/hook",
                axum::routing::post(
                    |State(bodies): State<Arc<Mutex<Vec<Value>>>>, Json(body): Json<Value>| async move {
                        bodies.lock().unwrap().push(body);
                        "ok"
                    },
                ),
            )
            .route(
                "/moved",
                axum::routing::any(|| async {
                    (
                        axum::http::StatusCode::TEMPORARY_REDIRECT,
                        [(axum::http::header::LOCATION, "/hook")],
                    )
                }),
            )
            .route(
                "/broken",
                axum::routing::any(|| async { axum::http::StatusCode::INTERNAL_SERVER_ERROR }),
            )
            .with_state(Arc::clone(&bodies));
        tokio::spawn(async move { axum::serve(listener, router).await });
        WebhookSink { addr, bodies }
    }

    pub fn url(&self) -> String {
        self.url_of("/hook")
    }

    /// The URL of `path` on this server.
    pub fn url_of(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every body received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}
