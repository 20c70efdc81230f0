#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script):
#   1. installs what is missing: rustfmt/clippy, the broker (tansu, ~10 min the first time),
#      and starts the local PostgreSQL and MariaDB if they are installed but stopped;
#   2. cargo fmt --check, the code-shape check (no file over 500 lines of non-test code, no
#      function over 80, no module cycle), the dashboards being generate.py's output, and
#      cargo clippy --all-targets -D warnings; installs Debian's prometheus (and promtool)
#      when missing and checks the alert rules; installs Debian's chromium, chromium-driver and a CJK font
#      when missing (the console's browser test, tests/e2e/console.rs);
#   3. installs the Python tools the tests use when missing (confluent-kafka, fastavro), the
#      reference Python executor in a virtual environment of its own (infra/python-executor.sh)
#      and runs its unit tests, and starts a broker on a free loopback port (memory storage);
#   4. runs every test of the workspace against it, SQLite and PostgreSQL;
#   5. runs the fault scenarios that fit in the test command (infra/faults.sh: every scenario but the soak, side by side)
#      and fuzzes the HTTP API with schemathesis against a running scheduler
#      (infra/fuzz-api.sh; installs schemathesis from PyPI when missing);
#   6. stops the broker, whatever happened.
# PostgreSQL: KADENCE_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test);
# each test creates and drops its own database there. MySQL/MariaDB (the third store backend,
# and XXL-JOB's database for the import tests): KADENCE_TEST_MYSQL_URL (default
# mysql://root@127.0.0.1:3306), the same way.
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo_root"
export PATH="$HOME/.cargo/bin:$PATH"
export KADENCE_TEST_POSTGRES_URL="${KADENCE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export KADENCE_TEST_MYSQL_URL="${KADENCE_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"

step() { printf '\n==> %s\n' "$*"; }

step "toolchain components"
for component in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
done

step "PostgreSQL"
pg_answers() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
if ! pg_answers; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  fi
  for _ in $(seq 1 50); do pg_answers && break; sleep 0.2; done
  pg_answers || { echo "PostgreSQL is not reachable on 127.0.0.1:5432; the store tests need it" >&2; exit 1; }
fi
echo "PostgreSQL answers on 127.0.0.1:5432"

step "MariaDB (the MySQL store's tests, and XXL-JOB's database for the import tests)"
# Every store test and every e2e test that runs on PostgreSQL runs on it too, in a database
# of its own; tests/e2e/xxl_import.rs also loads XXL-JOB's schema into one and imports from it
# (KADENCE_TEST_MYSQL_URL, default mysql://root@127.0.0.1:3306).
mysql_answers() { (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null; }
if ! mysql_answers; then
  if [ -x /etc/init.d/mariadb ]; then
    service mariadb start || true
  fi
  if ! mysql_answers && command -v mysqld_safe >/dev/null 2>&1; then
    (mysqld_safe >/dev/null 2>&1 &)
  fi
  for _ in $(seq 1 100); do mysql_answers && break; sleep 0.2; done
  mysql_answers || { echo "MariaDB is not reachable on 127.0.0.1:3306; the MySQL store and XXL-JOB import tests need it" >&2; exit 1; }
fi
echo "MariaDB answers on 127.0.0.1:3306"

step "broker (tansu)"
infra/broker.sh install

step "cargo fmt --check"
cargo fmt --all -- --check

step "code shape (infra/shape.py --check: files, functions, module cycles)"
python3 infra/shape.py --check

step "dashboards: generated, and the alert rules valid"
python3 dashboards/generate.py --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "Python test tools (PyPI, when missing)"
# The registry test decodes records with confluent-kafka's stock AvroDeserializer.
# confluent-kafka 2.13.0: later releases need a certifi newer than the mirrors here carry.
python_tools=("confluent-kafka[avro,schemaregistry]==2.13.0" "fastavro==1.13.1")
if ! python3 -c 'import confluent_kafka, fastavro, sys
from confluent_kafka.schema_registry.avro import AvroDeserializer
sys.exit(confluent_kafka.version()[0] != "2.13.0" or fastavro.__version__ != "1.13.1")' 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check "${python_tools[@]}"
fi

step "Prometheus (Debian's prometheus and promtool, when missing)"
# The dashboards and alert rules are checked against a real Prometheus (tests/e2e/prometheus.rs).
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus
fi
promtool check rules dashboards/alerts.yml

step "Chromium, ChromeDriver and a CJK font (Debian's chromium, chromium-driver, fonts-noto-cjk, when missing)"
# The console is tested in a real headless browser through WebDriver (tests/e2e/console.rs);
# its screenshots land in target/test-artifacts/console/.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! fc-list :lang=zh | grep -q .; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver fonts-noto-cjk
fi

step "reference Python executor (executors/python): install, unit tests"
# The conformance suite (tests/e2e/conformance) runs it as a process beside the Rust one.
KADENCE_TEST_PYTHON_EXECUTOR=$(infra/python-executor.sh)
export KADENCE_TEST_PYTHON_EXECUTOR
(cd executors/python && "$KADENCE_TEST_PYTHON_EXECUTOR" -m unittest discover --start-directory tests --top-level-directory . --quiet)

step "starting a broker for the tests"
state=$(mktemp -d "${TMPDIR:-/tmp}/kadence-test-broker.XXXXXX")
cleanup() {
  infra/broker.sh stop --state "$state" || true
  rm -rf "$state"
}
trap cleanup EXIT
KADENCE_TEST_BROKERS=$(infra/broker.sh start --state "$state")
export KADENCE_TEST_BROKERS
echo "broker at $KADENCE_TEST_BROKERS"

step "cargo test"
# The end-to-end tests mostly wait on the broker and the clock, so run more than one per core.
RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}" cargo test --workspace --locked

step "fault scenarios that fit here (infra/faults.sh; each prints its counters, fails on a lost fire)"
# Each starts its own broker, scheduler and executors, and spends most of its time waiting
# on its timeline, so they run side by side (about two minutes in all); each one's table is
# printed when all are done. The soak runs on its own (infra/faults.sh soak).
fault_scenarios=(broker-cut broker-restart database-cut node-pause executor-hang executor-handover rebalance-storm hostile-input)
# disk-full mounts a small filesystem of its own, which takes root.
if [ "$(id -u)" = 0 ]; then
  fault_scenarios+=(disk-full)
else
  echo "disk-full skipped: mounting its small filesystem takes root"
fi
fault_logs=$(mktemp -d)
for scenario in "${fault_scenarios[@]}"; do
  # (errexit holds in the subshell too: the exit status is written on both branches.)
  (if target/debug/faults "$scenario" >"$fault_logs/$scenario.log" 2>&1; then
     echo 0 >"$fault_logs/$scenario.exit"
   else
     echo "$?" >"$fault_logs/$scenario.exit"
   fi) &
done
wait
failed_scenarios=()
for scenario in "${fault_scenarios[@]}"; do
  cat "$fault_logs/$scenario.log"
  [ "$(cat "$fault_logs/$scenario.exit" 2>/dev/null)" = 0 ] || failed_scenarios+=("$scenario")
done
rm -rf "$fault_logs"
if [ ${#failed_scenarios[@]} -gt 0 ]; then
  echo "fault scenarios failed: ${failed_scenarios[*]}" >&2
  exit 1
fi

step "API fuzz (schemathesis against a running scheduler)"
infra/fuzz-api.sh --brokers "$KADENCE_TEST_BROKERS"
