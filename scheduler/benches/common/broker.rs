//! The brokers a benchmark runs on: the kinds its `--brokers` flag chose, where each one
//! listens, and the broker's own processes on this machine (whose CPU the end-to-end
//! benchmark counts).
//!
//! Addresses come from the environment, one variable per kind: `KADENCE_BENCH_BROKERS_TANSU`
//! and `KADENCE_BENCH_BROKERS_KAFKA` (`infra/bench.sh` starts each broker `--brokers` names
//! and sets its variable). `KADENCE_BENCH_BROKERS` still works for a run on a single broker:
//! it is the address of whichever kind `--brokers` chose (tansu by default), so a broker
//! started by hand is run as before.

use std::collections::HashSet;

use super::parse_choices;

/// A kind of Kafka broker the benchmarks can run on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BrokerKind {
    /// tansu, the Kafka-compatible broker of the dev stack (`infra/broker.sh --kind tansu`).
    Tansu,
    /// Apache Kafka 4, one KRaft node (`infra/broker.sh --kind kafka`).
    Kafka,
}

impl BrokerKind {
    /// The names `--brokers` takes.
    const NAMES: [(&str, BrokerKind); 2] =
        [("tansu", BrokerKind::Tansu), ("kafka", BrokerKind::Kafka)];

    /// `tansu,kafka` → both, in that order.
    pub fn parse_list(list: &str) -> Vec<BrokerKind> {
        parse_choices("--brokers", list, &BrokerKind::NAMES)
    }

    /// Its name in a table.
    pub fn label(self) -> &'static str {
        match self {
            BrokerKind::Tansu => "tansu",
            BrokerKind::Kafka => "Apache Kafka",
        }
    }

    /// What Kadence's processes are told the broker is (`kafka.broker_kind`,
    /// `KADENCE_BROKER_KIND` of the executors): tansu's readers and executors work round it.
    pub fn setting(self) -> &'static str {
        match self {
            BrokerKind::Tansu => "tansu",
            BrokerKind::Kafka => "kafka",
        }
    }

    /// The environment variable holding the bootstrap address of this kind's broker.
    fn address_variable(self) -> &'static str {
        match self {
            BrokerKind::Tansu => "KADENCE_BENCH_BROKERS_TANSU",
            BrokerKind::Kafka => "KADENCE_BENCH_BROKERS_KAFKA",
        }
    }
}

/// A broker a benchmark runs on.
#[derive(Debug, Clone)]
pub struct Broker {
    pub kind: BrokerKind,
    /// Its bootstrap list, `host:port[,host:port…]`, as clients and `kadence serve` take it.
    pub bootstrap: String,
}

impl Broker {
    /// The brokers of `kinds`, each at the address its environment variable gives (see the
    /// module docs); panics naming the variable to set when one is missing.
    pub fn chosen(kinds: &[BrokerKind]) -> Vec<Broker> {
        let single = match kinds {
            [_] => std::env::var("KADENCE_BENCH_BROKERS").ok(),
            _ => None,
        };
        kinds
            .iter()
            .map(|&kind| {
                let variable = kind.address_variable();
                let bootstrap = std::env::var(variable)
                    .ok()
                    .or_else(|| single.clone())
                    .unwrap_or_else(|| {
                        panic!(
                            "set {variable} to the address of the {} broker to run on \
                             (infra/bench.sh starts each broker --brokers names and sets it)",
                            kind.label()
                        )
                    });
                Broker { kind, bootstrap }
            })
            .collect()
    }

    /// The processes on this machine listening on its bootstrap ports: the broker itself, one
    /// per node (tansu's process, Kafka's JVM). Found by the socket, not by the process name,
    /// so that other brokers on the machine (another suite's tansu, the other kind's broker of
    /// this run) are not counted as this one. Empty when the broker runs elsewhere.
    pub fn processes(&self) -> Vec<u32> {
        let ports: HashSet<u16> = self
            .bootstrap
            .split(',')
            .filter_map(|address| address.trim().rsplit_once(':')?.1.parse().ok())
            .collect();
        let sockets = listening_sockets(&ports);
        if sockets.is_empty() {
            return Vec::new();
        }
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| holds_any_socket(pid, &sockets))
            .collect()
    }
}

/// The inodes of the TCP sockets (IPv4 and IPv6: a JVM may listen on a dual-stack socket)
/// that listen on one of `ports`, from the kernel's tables in `/proc/net`.
fn listening_sockets(ports: &HashSet<u16>) -> HashSet<u64> {
    /// `st` of a listening socket in `/proc/net/tcp`.
    const LISTEN: &str = "0A";
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1) // the header
                .filter_map(|line| {
                    // sl, local_address (hex ip:port), rem_address, st, …, inode (10th).
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let port = u16::from_str_radix(fields.get(1)?.rsplit_once(':')?.1, 16).ok()?;
                    if *fields.get(3)? != LISTEN || !ports.contains(&port) {
                        return None;
                    }
                    fields.get(9)?.parse().ok()
                })
                .collect::<Vec<u64>>()
        })
        .collect()
}

/// Whether process `pid` has one of `sockets` (inodes) among its open files.
fn holds_any_socket(pid: u32, sockets: &HashSet<u64>) -> bool {
    let Ok(descriptors) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    descriptors.filter_map(Result::ok).any(|descriptor| {
        std::fs::read_link(descriptor.path()).is_ok_and(|target| {
            target
                .to_str()
                .and_then(|text| text.strip_prefix("socket:[")?.strip_suffix(']'))
                .and_then(|inode| inode.parse().ok())
                .is_some_and(|inode| sockets.contains(&inode))
        })
    })
}
