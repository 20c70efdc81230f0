//! A TCP proxy the harness can cut: every connection through it closed at once and new ones
//! refused until it is mended, the way a peer that went away looks to its clients. Put in
//! front of the broker (which advertises the proxy, so every connection goes through it) or
//! of the database server (without stopping the server other tests share).

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::watch;

use super::stack::{log_file, terminate};
use crate::free_port;

/// A proxy on `127.0.0.1:{port}` to a target on the loopback interface.
pub struct CuttableProxy {
    port: u16,
    /// Bumped by every cut: connections of an older generation are closed.
    generation: watch::Sender<u64>,
    refusing: Arc<AtomicBool>,
}

impl CuttableProxy {
    /// Listens on a port the kernel gives it (held from the start, so nothing can take it
    /// between its choice and the bind) and forwards each connection to
    /// `127.0.0.1:{target_port}`.
    pub async fn start(target_port: u16) -> CuttableProxy {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("the proxy's port");
        let port = listener.local_addr().expect("the proxy's address").port();
        let (generation, _) = watch::channel(0_u64);
        let refusing = Arc::new(AtomicBool::new(false));
        tokio::spawn(forward(
            listener,
            target_port,
            generation.clone(),
            Arc::clone(&refusing),
        ));
        CuttableProxy {
            port,
            generation,
            refusing,
        }
    }

    /// Where clients connect.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Closes every connection and refuses new ones until [`mend`](Self::mend).
    pub fn cut(&self) {
        self.refusing.store(true, Ordering::SeqCst);
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// Accepts connections again.
    pub fn mend(&self) {
        self.refusing.store(false, Ordering::SeqCst);
    }
}

/// Forwards each accepted connection to the target until the generation changes; while
/// refusing, closes each one as it comes.
async fn forward(
    listener: TcpListener,
    target_port: u16,
    generation: watch::Sender<u64>,
    refusing: Arc<AtomicBool>,
) {
    while let Ok((mut client, _)) = listener.accept().await {
        if refusing.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let mut cut = generation.subscribe();
        tokio::spawn(async move {
            let Ok(mut target) = TcpStream::connect(("127.0.0.1", target_port)).await else {
                return;
            };
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut target) => {}
                _ = cut.changed() => {}
            }
        });
    }
}

/// Where the broker's output goes (standard output, then standard error): nowhere, unless
/// the scenario keeps its logs ([`KEEP_LOGS`](super::KEEP_LOGS)); then to a file it names on
/// stdout.
fn broker_log(port: u16) -> (Stdio, Stdio) {
    if std::env::var_os(super::KEEP_LOGS).is_none() {
        return (Stdio::null(), Stdio::null());
    }
    let path = std::env::temp_dir().join(format!("kfaults-broker-{port}.log"));
    println!("broker log: {}", path.display());
    (log_file(&path), log_file(&path))
}

/// A tansu broker of its own that clients reach through a [`CuttableProxy`]: it advertises
/// the proxy's address, so every connection, bootstrap or not, goes through it. Its storage
/// is memory, or a SQLite file that outlives a [`restart`](Self::restart). Killed when
/// dropped.
pub struct ProxiedBroker {
    /// `host:port` for clients.
    pub address: String,
    /// The proxy in front of it.
    pub proxy: CuttableProxy,
    broker: Child,
    broker_port: u16,
    /// The SQLite storage's directory (tansu takes the file relative to its working
    /// directory); `None` for memory storage.
    storage: Option<tempfile::TempDir>,
}

impl ProxiedBroker {
    /// Starts tansu on memory storage and its proxy; returns once the broker accepts
    /// connections.
    pub async fn start() -> ProxiedBroker {
        ProxiedBroker::start_on(None).await
    }

    /// [`start`](Self::start) on SQLite storage, which keeps topics, offsets and groups
    /// across a [`restart`](Self::restart).
    pub async fn start_on_sqlite() -> ProxiedBroker {
        let directory = tempfile::tempdir().expect("a directory for the broker's storage");
        ProxiedBroker::start_on(Some(directory)).await
    }

    async fn start_on(storage: Option<tempfile::TempDir>) -> ProxiedBroker {
        let broker_port = free_port();
        let proxy = CuttableProxy::start(broker_port).await;
        let proxy_port = proxy.port();
        let broker = spawn_tansu(broker_port, proxy_port, storage.as_ref()).await;
        ProxiedBroker {
            address: format!("127.0.0.1:{proxy_port}"),
            proxy,
            broker,
            broker_port,
            storage,
        }
    }

    /// Stops the broker (SIGTERM, SIGKILL after 10 s), waits `down`, and starts it again on
    /// the same port and storage; the proxy refuses connections meanwhile, as a stopped
    /// broker's port does. Returns once it accepts connections.
    pub async fn restart(&mut self, down: Duration) {
        self.proxy.cut();
        terminate(&mut self.broker, Duration::from_secs(10)).await;
        tokio::time::sleep(down).await;
        self.broker = spawn_tansu(self.broker_port, self.proxy.port(), self.storage.as_ref()).await;
        self.proxy.mend();
    }
}

/// tansu on `broker_port`, advertising `proxy_port`, on SQLite storage in `storage` (memory
/// storage without one); returns once it accepts connections.
async fn spawn_tansu(
    broker_port: u16,
    proxy_port: u16,
    storage: Option<&tempfile::TempDir>,
) -> Child {
    let (stdout, stderr) = broker_log(broker_port);
    let mut command = Command::new("tansu");
    command
        .arg("broker")
        .arg("--listener-url")
        .arg(format!("tcp://127.0.0.1:{broker_port}"))
        .arg("--advertised-listener-url")
        .arg(format!("tcp://127.0.0.1:{proxy_port}"))
        .arg("--storage-engine");
    match storage {
        Some(directory) => command
            .arg("sqlite://broker.db")
            .current_dir(directory.path()),
        None => command.arg("memory://tansu/"),
    };
    let broker = command
        .stdout(stdout)
        .stderr(stderr)
        // Its group coordinator's decisions (members joining, heartbeats missed) are at
        // info; the rest of its info is a line per request.
        .env("RUST_LOG", "warn,tansu_broker::coordinator=info")
        .kill_on_drop(true)
        .spawn()
        .expect("tansu runs (infra/broker.sh install)");
    for _ in 0..300 {
        if TcpStream::connect(("127.0.0.1", broker_port)).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    broker
}
