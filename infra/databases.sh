#!/usr/bin/env bash
# The database servers the tests need, on loopback, without systemd:
#
#   infra/databases.sh start --state DIR   PostgreSQL on 127.0.0.1:5432 (user postgres, trust
#                                          auth) and MariaDB on 127.0.0.1:3306 (user root, no
#                                          password): a server that already answers on its port
#                                          is reused as it is; otherwise the Debian package is
#                                          installed when missing (postgresql, mariadb-server)
#                                          and a server of our own starts with its data in DIR
#   infra/databases.sh stop --state DIR    stops the servers that `start` started (never one it
#                                          reused), and removes their data
#
# Why servers of our own, not the packages' clusters: the machine is left as it was found
# apart from the packages. Debian's PostgreSQL cluster asks for a password on loopback and
# its MariaDB is reached by root only through the socket; changing their configuration would
# outlive the run. A data directory in DIR starts in seconds and goes with it. Installing the
# packages starts no service (a policy-rc.d says no while apt runs), so nothing of theirs
# keeps running either.
#
# The servers are tuned for tests, not for keeping data through a power cut: PostgreSQL with
# fsync off, MariaDB flushing its log once a second. A process killed with -9 (the crash
# tests kill schedulers, never the database) loses nothing either way.
set -euo pipefail

PG_PORT=5432
MYSQL_PORT=3306
# Every test opens pools of its own and the suites run several tests at once: the servers'
# defaults (100 and 151) are too few.
MAX_CONNECTIONS=500

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_until_answers() {
  local port=$1 what=$2 log=$3
  for _ in $(seq 1 300); do
    answers "$port" && return 0
    sleep 0.1
  done
  echo "databases: $what does not answer on 127.0.0.1:$port after 30 s; its log follows" >&2
  tail -n 40 "$log" >&2 || true
  exit 1
}

apt_updated=""
# Installs Debian packages without letting their scripts start the services: a policy-rc.d
# that refuses every start, put in place only for the install when none exists.
install_packages() {
  local policy=/usr/sbin/policy-rc.d placed=""
  if [ "$(id -u)" != 0 ]; then
    echo "databases: $* missing, and installing Debian packages takes root" >&2
    exit 1
  fi
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    placed=yes
  fi
  [ -n "$apt_updated" ] || { apt-get update -q >&2; apt_updated=yes; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 || {
    [ -z "$placed" ] || rm -f "$policy"
    exit 1
  }
  [ -z "$placed" ] || rm -f "$policy"
}

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

# Runs a PostgreSQL tool as the owner of the data directory: initdb and the server refuse
# root, so under root they run as Debian's `postgres` user.
as_pg_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres() {
  local state=$1
  if answers "$PG_PORT"; then
    echo "databases: PostgreSQL already answers on 127.0.0.1:$PG_PORT; using it" >&2
    return 0
  fi
  [ -n "$(pg_bin)" ] || install_packages postgresql
  local bin data="$state/postgres"
  bin=$(pg_bin)
  mkdir -p "$data"
  [ "$(id -u)" != 0 ] || chown postgres: "$data"
  as_pg_owner "$bin/initdb" --pgdata "$data/data" --username postgres --auth trust \
    --encoding UTF8 --locale C.UTF-8 >"$data/initdb.log" 2>&1 || {
    cat "$data/initdb.log" >&2
    exit 1
  }
  as_pg_owner "$bin/pg_ctl" --pgdata "$data/data" --log "$data/server.log" --silent \
    -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$data" \
    -o "-c max_connections=$MAX_CONNECTIONS -c fsync=off -c synchronous_commit=off" \
    -o "-c full_page_writes=off" start >&2
  wait_until_answers "$PG_PORT" PostgreSQL "$data/server.log"
  echo "$bin" >"$state/postgres.started"
  # The tests' maintenance database (KADENCE_TEST_POSTGRES_URL's default names it), where
  # they connect to create and drop a database each.
  as_pg_owner "$bin/createdb" --host "$data" --port "$PG_PORT" --username postgres test
  echo "databases: PostgreSQL started on 127.0.0.1:$PG_PORT (data in $data)" >&2
}

stop_postgres() {
  local state=$1
  [ -f "$state/postgres.started" ] || return 0
  as_pg_owner "$(cat "$state/postgres.started")/pg_ctl" --pgdata "$state/postgres/data" \
    --mode fast --silent stop >&2 || true
  rm -rf "$state/postgres" "$state/postgres.started"
}

mysql_server() { command -v mariadbd || command -v mysqld || ls /usr/sbin/mariadbd 2>/dev/null || true; }

start_mariadb() {
  local state=$1
  if answers "$MYSQL_PORT"; then
    echo "databases: MySQL/MariaDB already answers on 127.0.0.1:$MYSQL_PORT; using it" >&2
    return 0
  fi
  [ -n "$(mysql_server)" ] || install_packages mariadb-server
  local server data="$state/mariadb" user
  server=$(mysql_server)
  user=$(id -un)
  mkdir -p "$data"
  mariadb-install-db --no-defaults --datadir="$data/data" --user="$user" \
    --auth-root-authentication-method=normal --skip-test-db >"$data/install.log" 2>&1 || {
    cat "$data/install.log" >&2
    exit 1
  }
  nohup "$server" --no-defaults --datadir="$data/data" --user="$user" \
    --bind-address=127.0.0.1 --port="$MYSQL_PORT" --socket="$data/mysqld.sock" \
    --pid-file="$data/mysqld.pid" --log-error="$data/server.log" \
    --max-connections="$MAX_CONNECTIONS" --innodb-flush-log-at-trx-commit=2 \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    >/dev/null 2>&1 &
  echo $! >"$state/mariadb.started"
  wait_until_answers "$MYSQL_PORT" MariaDB "$data/server.log"
  # root exists as root@localhost; a client on 127.0.0.1 is matched by address, so root
  # gets that host too (as the tests connect: mysql://root@127.0.0.1:3306).
  mariadb --no-defaults --socket="$data/mysqld.sock" --user=root -e \
    "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
     GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
  echo "databases: MariaDB started on 127.0.0.1:$MYSQL_PORT (data in $data)" >&2
}

stop_mariadb() {
  local state=$1 pid
  [ -f "$state/mariadb.started" ] || return 0
  pid=$(cat "$state/mariadb.started")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -rf "$state/mariadb" "$state/mariadb.started"
}

command=${1:-}
shift || true
state=""
while [ $# -gt 0 ]; do
  case "$1" in
    --state) state=$2; shift 2 ;;
    *) echo "databases: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$command" in
  start | stop) [ -n "$state" ] || { echo "databases $command: --state DIR is required" >&2; exit 2; } ;;
  *) sed -n '2,11p' "$0" >&2; exit 2 ;;
esac
mkdir -p "$state"
state=$(cd "$state" && pwd)
case "$command" in
  start) chmod 755 "$state"; start_postgres "$state"; start_mariadb "$state" ;;
  stop) stop_postgres "$state"; stop_mariadb "$state" ;;
esac
