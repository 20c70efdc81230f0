#!/usr/bin/env bash
# Installs, starts and stops the brokers Kadence is developed and tested against:
#
#   tansu          the Kafka-compatible broker tansu 0.6.0 from crates.io, built with its
#                  storage engines (`dynostore,libsql`; the default features build a broker with
#                  no storage engine at all): the dev stack's embedded default, one process
#   kafka          Apache Kafka 4 (KRaft, no ZooKeeper) from Maven Central, run with the JDK:
#                  one node that is broker and controller, replication factor 1
#   kafka-cluster  three such nodes, one KRaft quorum; replication factor 3 and
#                  min.insync.replicas=2 as the cluster's defaults, so the topics Kadence creates
#                  (which ask for the broker's default) get them
#
#   infra/broker.sh install [--kind K]           install unless present (tansu: ~10 min once;
#                                                Kafka: Maven resolves it once, ~1 min)
#   infra/broker.sh start [--kind K] [--state DIR] [--port P] [--storage memory|sqlite]
#                                                start on 127.0.0.1 (free ports unless --port),
#                                                wait until every node serves, print the
#                                                bootstrap list (host:port[,host:port…])
#   infra/broker.sh stop [--state DIR]           stop every node started with that state dir
#   infra/broker.sh node ACTION N [--state DIR]  one node of a Kafka kind, for fault scenarios:
#                                                stop (SIGTERM), kill (SIGKILL), pause (SIGSTOP),
#                                                resume (SIGCONT), start (again, same data)
#   infra/broker.sh controller [--state DIR]     the node id of the active KRaft controller
#
# State (pids, ports, logs, data) lives in --state, default .kadence/broker in the repo.
# --storage is tansu's (memory, or sqlite kept in the state dir across restarts); Kafka keeps
# its logs in the state dir. KADENCE_BROKER_KIND sets the default kind.
set -euo pipefail

TANSU_VERSION=0.6.0
repo_root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=infra/kafka/kafka.sh
. "$repo_root/infra/kafka/kafka.sh"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Ends a process: SIGTERM, up to `grace` tenths of a second to go, then SIGKILL.
terminate() {
  local pid=$1 grace=${2:-50}
  kill -0 "$pid" 2>/dev/null || return 0
  kill -CONT "$pid" 2>/dev/null || true # a paused process cannot act on SIGTERM
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 "$grace"); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

tansu_installed() {
  command -v tansu >/dev/null 2>&1 && [ -f "$HOME/.cargo/.crates.toml" ] \
    && grep -q "^\"tansu $TANSU_VERSION " "$HOME/.cargo/.crates.toml"
}

install_tansu() {
  tansu_installed && return 0
  # Several scripts may start a broker at once on a fresh machine (test suites side by
  # side): one builds, the others wait for it on this lock instead of each building tansu.
  mkdir -p "$HOME/.cargo"
  exec 9>"$HOME/.cargo/.kadence-tansu-install.lock"
  flock 9
  if ! tansu_installed; then
    echo "broker: installing tansu $TANSU_VERSION (takes about 10 minutes the first time)..." >&2
    cargo install tansu --version "$TANSU_VERSION" --locked --features dynostore,libsql >&2
  fi
  flock -u 9
}

start_tansu() {
  local state=$1 port=$2 storage=$3 engine
  install_tansu
  [ -n "$port" ] || port=$(free_port)
  case "$storage" in
    memory) engine="memory://tansu/" ;;
    sqlite) engine="sqlite://broker.db" ;; # relative to the state dir, kept across restarts
    *) echo "broker start: --storage is memory or sqlite, not $storage" >&2; exit 2 ;;
  esac
  (
    cd "$state"
    nohup tansu broker \
      --listener-url "tcp://127.0.0.1:$port" \
      --advertised-listener-url "tcp://127.0.0.1:$port" \
      --storage-engine "$engine" >"$state/broker.log" 2>&1 &
    echo $! >"$state/pid"
  )
  echo "$port" >"$state/port"
  echo "127.0.0.1:$port" >"$state/bootstrap"
  for _ in $(seq 1 300); do
    answers "$port" && return 0
    if ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      echo "broker: tansu exited during start; its log follows" >&2
      tail -n 40 "$state/broker.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "broker: not answering on 127.0.0.1:$port after 30 s; see $state/broker.log" >&2
  exit 1
}

stop_tansu() {
  local state=$1
  [ -f "$state/pid" ] || return 0
  terminate "$(cat "$state/pid")"
  rm -f "$state/pid" "$state/port"
}

# Reads --state (and the options `start` takes) into globals.
kind="${KADENCE_BROKER_KIND:-tansu}"
state="$repo_root/.kadence/broker"
port=""
storage=memory
parse_options() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --kind) kind=$2; shift 2 ;;
      --state) state=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      --storage) storage=$2; shift 2 ;;
      *) echo "broker: unknown option $1" >&2; exit 2 ;;
    esac
  done
  case "$kind" in
    tansu | kafka | kafka-cluster) ;;
    *) echo "broker: --kind is tansu, kafka or kafka-cluster, not $kind" >&2; exit 2 ;;
  esac
}

state_kind() { cat "$state/kind" 2>/dev/null || echo tansu; }

running() {
  local kind_now
  kind_now=$(state_kind)
  case "$kind_now" in
    tansu) [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null ;;
    *) kafka_all_running "$state" ;;
  esac
}

start() {
  parse_options "$@"
  mkdir -p "$state"
  state=$(cd "$state" && pwd)
  if [ -f "$state/bootstrap" ] && running; then
    if [ "$(state_kind)" != "$kind" ]; then
      echo "broker: $state holds a running $(state_kind), not $kind; stop it first" >&2
      exit 1
    fi
    cat "$state/bootstrap"
    return 0
  fi
  echo "$kind" >"$state/kind"
  case "$kind" in
    tansu) start_tansu "$state" "$port" "$storage" ;;
    kafka) kafka_start_nodes "$state" 1 "$port" ;;
    kafka-cluster) kafka_start_nodes "$state" 3 "$port" ;;
  esac
  cat "$state/bootstrap"
}

stop() {
  parse_options "$@"
  [ -d "$state" ] || return 0
  case "$(state_kind)" in
    tansu) stop_tansu "$state" ;;
    *) kafka_stop_nodes "$state" ;;
  esac
  rm -f "$state/bootstrap"
}

node() {
  local action=${1:-} id=${2:-}
  shift 2 || { echo "broker node: ACTION and N are required" >&2; exit 2; }
  parse_options "$@"
  state=$(cd "$state" && pwd)
  [ "$(state_kind)" != tansu ] || { echo "broker node: $state holds tansu, one process; use stop/start" >&2; exit 2; }
  kafka_node "$state" "$action" "$id"
}

case "${1:-}" in
  install)
    shift; parse_options "$@"
    case "$kind" in tansu) install_tansu ;; *) kafka_install ;; esac ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  node) shift; node "$@" ;;
  controller) shift; parse_options "$@"; kafka_active_controller "$(cd "$state" && pwd)" ;;
  *) sed -n '2,29p' "$0" >&2; exit 2 ;;
esac
