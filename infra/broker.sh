#!/usr/bin/env bash
# Installs, starts and stops the Kafka-compatible broker Kadence develops and tests against:
# tansu 0.6.0 from crates.io, built with the storage engines (`dynostore,libsql`) — the
# default features build a broker with no storage engine at all.
#
#   infra/broker.sh install                      build and install tansu unless present
#   infra/broker.sh start [--port P] [--state DIR] [--storage memory|sqlite]
#                                                start on 127.0.0.1 (a free port unless given),
#                                                wait until it answers, print host:port
#   infra/broker.sh stop  [--state DIR]          stop the broker started with that state dir
#
# State (pid, port, log, SQLite file) lives in --state, default .kadence/broker in the repo.
set -euo pipefail

TANSU_VERSION=0.6.0
repo_root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"

broker_installed() {
  command -v tansu >/dev/null 2>&1 && [ -f "$HOME/.cargo/.crates.toml" ] \
    && grep -q "^\"tansu $TANSU_VERSION " "$HOME/.cargo/.crates.toml"
}

install_broker() {
  broker_installed && return 0
  # Several scripts may start a broker at once on a fresh machine (test suites side by
  # side): one builds, the others wait for it on this lock instead of each building tansu.
  mkdir -p "$HOME/.cargo"
  exec 9>"$HOME/.cargo/.kadence-tansu-install.lock"
  flock 9
  if ! broker_installed; then
    echo "broker: installing tansu $TANSU_VERSION (takes about 10 minutes the first time)..." >&2
    cargo install tansu --version "$TANSU_VERSION" --locked --features dynostore,libsql >&2
  fi
  flock -u 9
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_broker() {
  local port="" state="$repo_root/.kadence/broker" storage=memory
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) port=$2; shift 2 ;;
      --state) state=$2; shift 2 ;;
      --storage) storage=$2; shift 2 ;;
      *) echo "broker start: unknown option $1" >&2; exit 2 ;;
    esac
  done
  install_broker
  mkdir -p "$state"
  state=$(cd "$state" && pwd)
  if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
    echo "127.0.0.1:$(cat "$state/port")"
    return 0
  fi
  [ -n "$port" ] || port=$(free_port)
  local engine
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
  for _ in $(seq 1 300); do
    if answers "$port"; then
      echo "127.0.0.1:$port"
      return 0
    fi
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

stop_broker() {
  local state="$repo_root/.kadence/broker"
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) state=$2; shift 2 ;;
      *) echo "broker stop: unknown option $1" >&2; exit 2 ;;
    esac
  done
  [ -f "$state/pid" ] || return 0
  local pid
  pid=$(cat "$state/pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$state/pid" "$state/port"
}

case "${1:-}" in
  install) install_broker ;;
  start) shift; start_broker "$@" ;;
  stop) shift; stop_broker "$@" ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
