#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script). On a fresh machine
# it installs what is missing, and it leaves the machine as it found it apart from packages
# and caches:
#   1. rustfmt/clippy; the databases (infra/databases.sh: Debian's postgresql and
#      mariadb-server when missing, each started as a server of its own with its data in a
#      temporary folder, or the one already answering on its port reused); the brokers
#      (infra/broker.sh: tansu, ~10 min the first time; Apache Kafka 4 resolved by Maven
#      into ~/.cache/kadence, ~1 min the first time);
#   2. cargo fmt --check, the code-shape check (no file over 500 lines of non-test code, no
#      function over 80, no module cycle), the dashboards being generate.py's output, and
#      cargo clippy --all-targets -D warnings; builds the book (infra/docs.sh: mdBook and
#      hyperlink from the crate registry when missing) and checks its links; installs Debian's prometheus (and promtool)
#      when missing and checks the alert rules; installs Debian's chromium, chromium-driver and a CJK font
#      when missing (the console's browser test, tests/e2e/console.rs); installs Debian's
#      libquartz2-java when missing and runs the differential test of Kadence's cron against
#      Quartz itself (scheduler/tests/quartz_parity);
#   3. installs the Python tools the tests use when missing (confluent-kafka, fastavro), the
#      reference Python executor in a virtual environment of its own (infra/python-executor.sh)
#      and runs its unit tests, builds the Java executor SDK (executors/java, mvn verify: its
#      JUnit tests; infra/java-executor.sh), builds XXL-JOB's frameless sample executor on
#      xxl-job-core 2.4.2 and 3.3.2 for the bridge's tests (infra/xxl-job-executor.sh), and
#      starts the brokers on free loopback ports: one Apache Kafka node and one tansu (memory
#      storage);
#   4. runs every test of the workspace against Apache Kafka, SQLite, PostgreSQL and
#      MariaDB, then the e2e suites whose subject is Kafka behaviour again on tansu (the
#      book's test suite page, docs/src/development/testing.md, says which and why);
#   5. runs the fault scenarios that fit in the test command (infra/faults.sh: every scenario
#      but the soak, side by side in two batches, tansu's and Apache Kafka's) and, beside
#      tansu's, fuzzes the HTTP API with schemathesis against a running scheduler
#      (infra/fuzz-api.sh; installs schemathesis from PyPI when missing);
#   6. stops the brokers and the databases it started, whatever happened.
# PostgreSQL: KADENCE_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test);
# each test creates and drops its own database there. MySQL/MariaDB (the third store backend,
# and XXL-JOB's database for the import tests): KADENCE_TEST_MYSQL_URL (default
# mysql://root@127.0.0.1:3306), the same way. Either URL pointing elsewhere leaves the local
# server alone only if something answers on its port already.
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo_root"
export PATH="$HOME/.cargo/bin:$PATH"
export KADENCE_TEST_POSTGRES_URL="${KADENCE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export KADENCE_TEST_MYSQL_URL="${KADENCE_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"

# Each step says when it began, in minutes since the start: the step times in docs/src/development/testing.md come
# from these lines.
started_at=$SECONDS
step() { printf '\n==> [%d:%02d] %s\n' $(((SECONDS - started_at) / 60)) $(((SECONDS - started_at) % 60)) "$*"; }

# Everything this run starts keeps its state under one folder, stopped and removed at exit.
run_state=$(mktemp -d "${TMPDIR:-/tmp}/kadence-test.XXXXXX")
chmod 755 "$run_state" # the database servers run as their own users
cleanup() {
  infra/broker.sh stop --state "$run_state/kafka" || true
  infra/broker.sh stop --state "$run_state/tansu" || true
  infra/databases.sh stop --state "$run_state/databases" || true
  rm -rf "$run_state"
}
trap cleanup EXIT

step "toolchain components"
for component in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
done

step "databases: PostgreSQL on 127.0.0.1:5432, MariaDB on 127.0.0.1:3306 (infra/databases.sh)"
# Every store test and every e2e test that runs on PostgreSQL runs on MariaDB too, in a
# database of its own; tests/e2e/xxl_import.rs also loads XXL-JOB's schema into one and
# imports from it.
infra/databases.sh start --state "$run_state/databases"

step "brokers: tansu and Apache Kafka (infra/broker.sh install)"
infra/broker.sh install --kind tansu
infra/broker.sh install --kind kafka

step "cargo fmt --check"
cargo fmt --all -- --check

step "code shape (infra/shape.py --check: files, functions, module cycles)"
python3 infra/shape.py --check

step "dashboards: generated, and the alert rules valid"
python3 dashboards/generate.py --check

step "the book: mdBook, warnings as errors, every internal link and anchor (infra/docs.sh)"
# Installs mdbook and hyperlink from the crate registry when missing; the reference pages'
# drift test runs with the other tests (kadence-tests' reference_docs).
infra/docs.sh

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

step "Kadence's cron against Quartz itself (Debian's libquartz2-java, when missing)"
# scheduler/tests/quartz_parity: a fixed-seed set of some 3 000 expressions in nine zones,
# started near their clock changes, answered by Quartz 2.3.2's CronExpression on the JDK
# (the one the Kafka broker runs on) and by Kadence; every difference must be on the test's
# allow-list of deliberate ones. About ten seconds. Without Java or Quartz the test fails and
# says what is missing: it never passes by skipping.
if [ ! -f /usr/share/java/quartz2.jar ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libquartz2-java
fi
cargo test --locked -p kadence-scheduler --test quartz_parity

step "reference Python executor (executors/python): install, unit tests"
# The conformance suite (tests/e2e/conformance) runs it as a process beside the Rust one.
KADENCE_TEST_PYTHON_EXECUTOR=$(infra/python-executor.sh)
export KADENCE_TEST_PYTHON_EXECUTOR
(cd executors/python && "$KADENCE_TEST_PYTHON_EXECUTOR" -m unittest discover --start-directory tests --top-level-directory . --quiet)

step "Java executor SDK (executors/java): build, unit tests"
# mvn verify: compiles with -Werror, runs the JUnit tests (codec, signing, dispatch, offsets, job
# logs), packages the jar and its runtime classpath; the local repository is ~/.m2. The
# conformance suite runs its test executor beside the Rust and Python ones, with the command
# infra/java-executor.sh prints (it packages again only when its stamp of the sources is stale).
(cd executors/java && mvn -B -q verify)
KADENCE_TEST_JAVA_EXECUTOR=$(infra/java-executor.sh)
export KADENCE_TEST_JAVA_EXECUTOR
# The sample Spring Boot service, its executable jar (tests/e2e/java_sample.rs runs it on
# Apache Kafka and on tansu), with the command infra/java-sample.sh prints the same way.
KADENCE_TEST_JAVA_SAMPLE=$(infra/java-sample.sh)
export KADENCE_TEST_JAVA_SAMPLE

step "XXL-JOB's own executor, for the bridge (tests/xxl-job-executor on xxl-job-core 2.4.2 and 3.3.2)"
# tests/e2e/bridge runs `kadence bridge xxl-job` in front of real XXL-JOB executors: the
# frameless sample, built against each xxl-job-core line from Maven Central (the build is
# skipped while its sources are unchanged).
KADENCE_TEST_XXL_JOB_2_4=$(infra/xxl-job-executor.sh 2.4.2)
KADENCE_TEST_XXL_JOB_3_3=$(infra/xxl-job-executor.sh 3.3.2)
export KADENCE_TEST_XXL_JOB_2_4 KADENCE_TEST_XXL_JOB_3_3

step "starting the brokers for the tests: Apache Kafka (one node) and tansu"
KADENCE_TEST_BROKERS=$(infra/broker.sh start --kind kafka --state "$run_state/kafka")
KADENCE_TEST_BROKER_KIND=kafka
export KADENCE_TEST_BROKERS KADENCE_TEST_BROKER_KIND
tansu_brokers=$(infra/broker.sh start --kind tansu --state "$run_state/tansu")
echo "Apache Kafka at $KADENCE_TEST_BROKERS, tansu at $tansu_brokers"

step "cargo test, on Apache Kafka"
# The end-to-end tests mostly wait on the broker and the clock, so run more than one per core.
# All but the API-load test, which runs next on its own, and the differential test against
# Quartz, which ran above.
RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}" cargo test --workspace --locked -- --skip api_load:: \
  --skip kadence_fires_as_quartz_itself

step "the API-load test, one backend at a time, with nothing else running"
# Its subject is 100 clients listing jobs while 50 jobs fire every second: the fire path must
# not starve. Beside five other end-to-end tests (a browser, executors, three databases, all
# on two cores) the starving is the neighbours', and the test failed for them; alone, each
# backend's figures are the API load's own.
cargo test --locked -p kadence-tests --test e2e -- api_load:: --test-threads 1

step "the e2e tests whose subject is Kafka behaviour, again on tansu (the dev stack's broker)"
# The e2e tests on SQLite but those whose subject is the API, the console or the dashboards:
# conformance (Rust, Python and Java executors), rebalances, SIGTERM drain, kills, redelivery, the
# DLQ, sharding broadcast, routing, replays by offset and time, backfills, shadow groups, the
# schema registry. Their PostgreSQL and MariaDB twins prove the stores, which the first pass
# did on the same code. docs/src/development/testing.md says what runs where.
# The consumer group protocol (KIP-848) is Apache Kafka's only: tansu 0.6 never assigns such
# a member a partition. A member joining a tansu group sets off two rebalances where Kafka's
# coordinator makes one, so a long run is handed back twice there: the hand-back contract
# (one hand-back per join) is Kafka's. A log-lines-before-the-result test reads end offsets,
# which trail the records on tansu. tansu's join is no barrier either: the leader's JoinGroup
# answers at once and a follower's after a fixed 3 s pause, whoever else has rejoined. Two
# Java members, one of them handing a long run back for its 3 s wait, rejoin out of step on
# every round and never settle there (librdkafka's members happen to settle after two), so
# the Java run of the handed-back-run log scenario is Kafka's. So is the Java run of the
# kill -9 handover: a member killed while a Java member joins can leave tansu's group with no
# owner of the partition for longer than the scenario waits (the leaderless group tansu keeps
# after kill -9 leaves, which the fault scenarios met first); it passed and failed there by turns.
tansu_skips=(postgres:: mysql:: access:: api_load:: console:: console_api:: console_session::
  prometheus:: xxl_import:: consumer_protocol user_lifecycle:: login_guard:: field_limits::
  hand_back_wait_is_handed_back_once every_line_is_on_the_logs_topic_when_the_result_appears
  logs::java::a_handed_back_run_s_log_is_replaced lifecycle::java::a_run_killed_mid_way_is_redelivered)
KADENCE_TEST_BROKERS=$tansu_brokers KADENCE_TEST_BROKER_KIND=tansu RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}" \
  cargo test --locked -p kadence-tests --test e2e -- "${tansu_skips[@]/#/--skip=}"

step "fault scenarios that fit here (infra/faults.sh; each prints its counters, fails on a lost fire), and the API fuzz beside tansu's"
# Each starts its own broker, scheduler and executors, and spends most of its time waiting
# on its timeline, so a batch runs side by side; each one's table is printed when its batch
# is done. Two batches: the scenarios on tansu (about two minutes), then those on Apache
# Kafka (about seven, set by kafka-cluster's four faults in turn): five JVMs starting beside
# the tansu scenarios starved every process of CPU on two cores, and a broker short of CPU
# misses its sessions, which is not the fault under test. The soak runs on its own
# (infra/faults.sh soak). The schemathesis fuzz of the HTTP API (about a minute, a scheduler
# of its own on the Kafka node) runs beside the tansu batch, which mostly waits. On the
# cluster the four faults take shorter timelines than the scenario's defaults (8 s before,
# 10 s of outage, still past the 6 s broker session, 5 s after): each fault's figures need
# its outage, not the margins.
tansu_scenarios=(broker-cut broker-restart database-cut node-pause executor-hang rebalance-storm hostile-input)
# disk-full mounts a small filesystem of its own, which takes root.
if [ "$(id -u)" = 0 ]; then
  tansu_scenarios+=(disk-full)
else
  echo "disk-full skipped: mounting its small filesystem takes root"
fi
kafka_scenarios=("kafka-cluster --before-secs 8 --outage-secs 10 --after-secs 5" kafka-executor-hang kafka-rebalance-storm
  kafka-bridge-kill)
fault_logs=$(mktemp -d)
failed_scenarios=()
# Each argument: a scenario's name and its options, as one word list.
run_side_by_side() {
  local entry arguments
  for entry in "$@"; do
    read -ra arguments <<<"$entry"
    # (errexit holds in the subshell too: the exit status is written on both branches.)
    (if target/debug/faults "${arguments[@]}" >"$fault_logs/${arguments[0]}.log" 2>&1; then
       echo 0 >"$fault_logs/${arguments[0]}.exit"
     else
       echo "$?" >"$fault_logs/${arguments[0]}.exit"
     fi) &
  done
  wait
  for entry in "$@"; do
    read -ra arguments <<<"$entry"
    cat "$fault_logs/${arguments[0]}.log"
    [ "$(cat "$fault_logs/${arguments[0]}.exit" 2>/dev/null)" = 0 ] || failed_scenarios+=("${arguments[0]}")
  done
}
(if infra/fuzz-api.sh --brokers "$KADENCE_TEST_BROKERS" >"$fault_logs/fuzz.log" 2>&1; then
   echo 0 >"$fault_logs/fuzz.exit"
 else
   echo "$?" >"$fault_logs/fuzz.exit"
 fi) &
run_side_by_side "${tansu_scenarios[@]}" # (its `wait` waits for the fuzz too)
step "API fuzz (schemathesis against a running scheduler, run beside the tansu scenarios)"
cat "$fault_logs/fuzz.log"
fuzz_failed=$([ "$(cat "$fault_logs/fuzz.exit" 2>/dev/null)" = 0 ] || echo yes)
step "fault scenarios on Apache Kafka"
run_side_by_side "${kafka_scenarios[@]}"
rm -rf "$fault_logs"
if [ ${#failed_scenarios[@]} -gt 0 ]; then
  echo "fault scenarios failed: ${failed_scenarios[*]}" >&2
fi
if [ -n "$fuzz_failed" ]; then
  echo "the API fuzz failed (its output is above)" >&2
fi
if [ ${#failed_scenarios[@]} -gt 0 ] || [ -n "$fuzz_failed" ]; then
  exit 1
fi

step "done"
