#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script with no argument).
#
#   infra/test.sh              # every stage, in order
#   infra/test.sh STAGE...     # only these stages, with the parts they need
#   infra/test.sh --list       # the stages and what each runs
#
# On a fresh machine it installs what is missing, and it leaves the machine as it found it
# apart from packages and caches. A stage asks for the parts it needs and each part is made
# ready once, on first use:
#   - the databases (infra/databases.sh: Debian's postgresql and mariadb-server when missing,
#     each started as a server of its own with its data in a temporary folder, or the one
#     already answering on its port reused);
#   - the brokers (infra/broker.sh: tansu, ~10 min to build the first time; Apache Kafka 4
#     resolved by Maven into ~/.cache/kadence, ~1 min the first time), started on free
#     loopback ports: one Apache Kafka node and one tansu with memory storage;
#   - Debian's prometheus, chromium (with chromium-driver and a CJK font) and libquartz2-java;
#     PyPI's confluent-kafka and fastavro (and schemathesis, by infra/fuzz-api.sh);
#   - the executors the tests run beside the Rust one: the reference Python executor in a
#     virtual environment of its own (infra/python-executor.sh), the Java SDK's test executor
#     and sample service (infra/java-executor.sh, infra/java-sample.sh), and XXL-JOB's
#     frameless sample executor on xxl-job-core 2.4.2 and 3.3.2 (infra/xxl-job-executor.sh);
#   - the workspace's test build: every test binary, built once with the whole workspace's
#     features, so no later `cargo test` builds again.
# Whatever happens, it stops the brokers and the databases it started.
#
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
# The end-to-end tests mostly wait on the broker and the clock, so more than one runs per core.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}"

# The stages, in the order a whole run takes them, each with one line of what it runs.
stages=(checks quartz sdks kafka api-load tansu faults)
declare -A stage_summary=(
  [checks]="cargo fmt, the code shape, the dashboards and alert rules, the book and its links, clippy"
  [quartz]="Kadence's cron against Quartz itself (the differential test)"
  [sdks]="the Python executor's unit tests; the Java SDK, starter and sample (mvn verify)"
  [kafka]="every test of the workspace on Apache Kafka, SQLite, PostgreSQL and MariaDB"
  [api-load]="the API-load test, one backend at a time, with nothing else running"
  [tansu]="the executor conformance suite and the dev stack's executors again on tansu"
  [faults]="the fault scenarios but the soak (tansu's batch, then Apache Kafka's), and the API fuzz"
)

if [ "${1:-}" = --list ]; then
  for stage in "${stages[@]}"; do printf '%-9s %s\n' "$stage" "${stage_summary[$stage]}"; done
  exit 0
fi
chosen=("$@")
[ ${#chosen[@]} -gt 0 ] || chosen=("${stages[@]}")
for stage in "${chosen[@]}"; do
  [ -n "${stage_summary[$stage]:-}" ] || { echo "unknown stage '$stage'; the stages: ${stages[*]}" >&2; exit 2; }
done

# Each step says when it began, in minutes since the start: the step times in
# docs/src/development/testing.md come from these lines.
started_at=$SECONDS
step() { printf '\n==> [%d:%02d] %s\n' $(((SECONDS - started_at) / 60)) $(((SECONDS - started_at) % 60)) "$*"; }

# Everything this run starts keeps its state under one folder, stopped and removed at exit.
run_state=$(mktemp -d "${TMPDIR:-/tmp}/kadence-test.XXXXXX")
chmod 755 "$run_state" # the database servers run as their own users
cleanup() {
  [ ! -d "$run_state/kafka" ] || infra/broker.sh stop --state "$run_state/kafka" || true
  [ ! -d "$run_state/tansu" ] || infra/broker.sh stop --state "$run_state/tansu" || true
  [ ! -d "$run_state/databases" ] || infra/databases.sh stop --state "$run_state/databases" || true
  rm -rf "$run_state"
}
trap cleanup EXIT

# ---- The parts. Each `need_…` makes its part ready once; a later call does nothing.

declare -A ready=()
# Runs the named preparation unless it already ran: `once NAME command...`.
once() {
  local name=$1
  shift
  [ -z "${ready[$name]:-}" ] || return 0
  "$@"
  ready[$name]=1
}

apt_install() {
  once apt-update apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

need_databases() { once databases start_databases; }
start_databases() {
  step "databases: PostgreSQL on 127.0.0.1:5432, MariaDB on 127.0.0.1:3306 (infra/databases.sh)"
  # Every store test and every e2e test that runs on PostgreSQL runs on MariaDB too, in a
  # database of its own; tests/e2e/xxl_import.rs also loads XXL-JOB's schema into one and
  # imports from it.
  infra/databases.sh start --state "$run_state/databases"
}

need_kafka() { once kafka start_kafka; }
start_kafka() {
  step "broker: one Apache Kafka node (infra/broker.sh)"
  infra/broker.sh install --kind kafka
  KADENCE_TEST_BROKERS=$(infra/broker.sh start --kind kafka --state "$run_state/kafka")
  KADENCE_TEST_BROKER_KIND=kafka
  export KADENCE_TEST_BROKERS KADENCE_TEST_BROKER_KIND
  echo "Apache Kafka at $KADENCE_TEST_BROKERS"
}

need_tansu_installed() { once tansu-installed infra/broker.sh install --kind tansu; }
need_tansu() { once tansu start_tansu; }
start_tansu() {
  step "broker: tansu with memory storage (infra/broker.sh)"
  need_tansu_installed
  tansu_brokers=$(infra/broker.sh start --kind tansu --state "$run_state/tansu")
  echo "tansu at $tansu_brokers"
}

need_python_tools() { once python-tools install_python_tools; }
install_python_tools() {
  # The registry test decodes records with confluent-kafka's stock AvroDeserializer.
  # confluent-kafka 2.13.0: later releases need a certifi newer than the mirrors here carry.
  local tools=("confluent-kafka[avro,schemaregistry]==2.13.0" "fastavro==1.13.1")
  if ! python3 -c 'import confluent_kafka, fastavro, sys
from confluent_kafka.schema_registry.avro import AvroDeserializer
sys.exit(confluent_kafka.__version__ != "2.13.0" or fastavro.__version__ != "1.13.1")' 2>/dev/null; then
    step "Python test tools (PyPI)"
    python3 -m pip install --quiet --disable-pip-version-check "${tools[@]}"
  fi
}

# The dashboards and alert rules are checked against a real Prometheus (tests/e2e/prometheus.rs).
need_prometheus() { once prometheus install_prometheus; }
install_prometheus() {
  if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
    step "Prometheus (Debian's prometheus and promtool)"
    apt_install prometheus
  fi
}

# The console is tested in a real headless browser through WebDriver (tests/e2e/console.rs);
# its screenshots land in target/test-artifacts/console/.
need_chromium() { once chromium install_chromium; }
install_chromium() {
  if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! fc-list :lang=zh | grep -q .; then
    step "Chromium, ChromeDriver and a CJK font (Debian's chromium, chromium-driver, fonts-noto-cjk)"
    apt_install chromium chromium-driver fonts-noto-cjk
  fi
}

need_quartz() { once quartz install_quartz; }
install_quartz() {
  if [ ! -f /usr/share/java/quartz2.jar ]; then
    step "Quartz (Debian's libquartz2-java)"
    apt_install libquartz2-java
  fi
}

# The conformance suite (tests/e2e/conformance) runs the Python and Java executors as
# processes beside the Rust one; tests/e2e/java_sample.rs runs the Java sample service, and
# tests/e2e/bridge runs `kadence bridge xxl-job` in front of real XXL-JOB executors: the
# frameless sample, built against each xxl-job-core line from Maven Central. Each script
# prints the command to run and builds again only when its sources changed.
need_executors() { once executors prepare_executors; }
prepare_executors() {
  step "the Python, Java and XXL-JOB executors the tests start"
  KADENCE_TEST_PYTHON_EXECUTOR=$(infra/python-executor.sh)
  KADENCE_TEST_JAVA_EXECUTOR=$(infra/java-executor.sh)
  KADENCE_TEST_JAVA_SAMPLE=$(infra/java-sample.sh)
  KADENCE_TEST_XXL_JOB_2_4=$(infra/xxl-job-executor.sh 2.4.2)
  KADENCE_TEST_XXL_JOB_3_3=$(infra/xxl-job-executor.sh 3.3.2)
  export KADENCE_TEST_PYTHON_EXECUTOR KADENCE_TEST_JAVA_EXECUTOR KADENCE_TEST_JAVA_SAMPLE \
    KADENCE_TEST_XXL_JOB_2_4 KADENCE_TEST_XXL_JOB_3_3
}

# One build of every test binary. Every `cargo test` below names --workspace, so each one
# resolves the same features and reuses this build: `-p some-crate` would unify a narrower
# feature set and build the dependencies again.
need_test_build() { once test-build build_tests; }
build_tests() {
  step "the workspace's test build"
  cargo test --workspace --locked --no-run
}

# ---- The stages.

stage_checks() {
  step "toolchain components"
  for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
  done
  step "cargo fmt --check"
  cargo fmt --all -- --check
  step "code shape (infra/shape.py --check: files, functions, module cycles)"
  python3 infra/shape.py --check
  step "dashboards: generated, and the alert rules valid"
  python3 dashboards/generate.py --check
  need_prometheus
  promtool check rules dashboards/alerts.yml
  step "the book: mdBook, warnings as errors, every internal link and anchor (infra/docs.sh)"
  # Installs mdbook and hyperlink from the crate registry when missing; the reference pages'
  # drift test runs with the other tests (kadence-tests' reference_docs).
  infra/docs.sh
  step "cargo clippy"
  cargo clippy --workspace --all-targets --locked -- -D warnings
}

stage_quartz() {
  # scheduler/tests/quartz_parity: a fixed-seed set of some 3 000 expressions in nine zones,
  # started near their clock changes, answered by Quartz 2.3.2's CronExpression on the JDK
  # and by Kadence; every difference must be on the test's allow-list of deliberate ones.
  # About ten seconds. Without Java or Quartz the test fails and says what is missing: it
  # never passes by skipping.
  need_quartz
  need_test_build
  step "Kadence's cron against Quartz itself"
  cargo test --workspace --locked --test quartz_parity
}

stage_sdks() {
  step "reference Python executor (executors/python): unit tests"
  local python
  python=$(infra/python-executor.sh)
  (cd executors/python && "$python" -m unittest discover --start-directory tests --top-level-directory . --quiet)
  step "Java executor SDK (executors/java): build, unit tests"
  # mvn verify: compiles with -Werror, runs the JUnit tests (codec, signing, dispatch,
  # offsets, job logs, the starter and the sample), packages the jars; the local repository
  # is ~/.m2.
  (cd executors/java && mvn -B -q verify)
}

stage_kafka() {
  need_databases
  need_kafka
  need_python_tools
  need_prometheus
  need_chromium
  need_quartz
  need_executors
  need_test_build
  step "cargo test, on Apache Kafka"
  # All but the API-load test, which has a stage of its own, and the differential test
  # against Quartz (the quartz stage). The e2e binary takes most of the time and mostly
  # waits, so every other test binary of the workspace runs beside it, one after another,
  # and prints when the e2e tests are done. Those binaries are named from the workspace's
  # metadata, so a new one is never left out.
  local others others_log others_exit
  others=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for package in json.load(sys.stdin)["packages"]:
    for target in package["targets"]:
        if "test" in target["kind"] and target["name"] != "e2e":
            print("--test", target["name"])')
  others_log="$run_state/other-tests.log"
  others_exit="$run_state/other-tests.exit"
  # shellcheck disable=SC2086 # one word per option
  (if cargo test --workspace --locked --lib --bins $others -- --skip kadence_fires_as_quartz_itself \
     >"$others_log" 2>&1; then echo 0 >"$others_exit"; else echo "$?" >"$others_exit"; fi) &
  local e2e_status=0
  cargo test --workspace --locked --test e2e -- --skip api_load:: || e2e_status=$?
  wait
  step "the workspace's other test binaries (run beside the e2e tests) and the doc tests"
  cat "$others_log"
  cargo test --workspace --locked --doc
  [ "$e2e_status" = 0 ] || { echo "the e2e tests failed (above, before this step)" >&2; return 1; }
  [ "$(cat "$others_exit")" = 0 ] || { echo "a test binary beside the e2e tests failed (its output is above)" >&2; return 1; }
}

stage_api_load() {
  # Its subject is 100 clients listing jobs while 50 jobs fire every second: the fire path
  # must not starve. Beside five other end-to-end tests (a browser, executors, three
  # databases, all on two cores) the starving is the neighbours', and the test failed for
  # them; alone, each backend's figures are the API load's own.
  need_databases
  need_kafka
  need_test_build
  step "the API-load test, one backend at a time, with nothing else running"
  cargo test --workspace --locked --test e2e -- api_load:: --test-threads 1
}

stage_tansu() {
  need_tansu
  need_executors
  need_test_build
  step "the executor conformance suite and the dev stack's executors, again on tansu"
  # tansu is the dev stack's broker, so what a developer runs there is tested there: the
  # conformance suite with all three executors (alone and in mixed groups), the Java sample
  # service, and the XXL-JOB bridge. Everything else whose subject is Kafka behaviour
  # (rebalances, SIGTERM drain, kills, the DLQ, broadcasts, replays, backfills, shadow
  # groups, the schema registry) ran on Apache Kafka in the kafka stage, the broker users
  # run; running it again here cost five of the test command's twenty minutes.
  # docs/src/development/testing.md says what runs where.
  #
  # Left out of the conformance suite on tansu, each for a difference of tansu's:
  # - the consumer group protocol (KIP-848): tansu 0.6 never assigns such a member a partition;
  # - one hand-back per joining member: a member joining a tansu group sets off two
  #   rebalances where Kafka's coordinator makes one, so a long run is handed back twice;
  # - every log line on the logs topic when the result appears: it reads end offsets, which
  #   trail the records on tansu;
  # - the Java run of the handed-back run's log: tansu's join is no barrier (the leader's
  #   JoinGroup answers at once and a follower's after a fixed 3 s pause, whoever else has
  #   rejoined), and two Java members, one of them handing a long run back for its 3 s wait,
  #   rejoin out of step on every round and never settle there (librdkafka's members happen
  #   to settle after two);
  # - the Java run of the kill -9 handover: a member killed while a Java member joins can
  #   leave tansu's group with no owner of the partition for longer than the scenario waits
  #   (the leaderless group tansu keeps after kill -9 leaves, which the fault scenarios met
  #   first); it passed and failed there by turns.
  local tansu_skips=(postgres:: mysql:: consumer_protocol hand_back_wait_is_handed_back_once
    every_line_is_on_the_logs_topic_when_the_result_appears
    logs::java::a_handed_back_run_s_log_is_replaced lifecycle::java::a_run_killed_mid_way_is_redelivered)
  KADENCE_TEST_BROKERS=$tansu_brokers KADENCE_TEST_BROKER_KIND=tansu \
    cargo test --workspace --locked --test e2e -- conformance:: java_sample:: bridge:: "${tansu_skips[@]/#/--skip=}"
}

stage_faults() {
  # Each scenario starts its own broker, scheduler and executors, and spends most of its
  # time waiting on its timeline, so a batch runs side by side; each one's table is printed
  # when its batch is done. Two batches: the scenarios on tansu (about two minutes), then
  # those on Apache Kafka (about four, set by kafka-cluster's four faults in turn): five JVMs
  # starting beside the tansu scenarios starved every process of CPU on two cores, and a
  # broker short of CPU misses its sessions, which is not the fault under test. The soak
  # runs on its own (infra/faults.sh soak). The schemathesis fuzz of the HTTP API (about a
  # minute, a scheduler of its own on the Kafka node) runs beside the tansu batch, which
  # mostly waits. On the cluster the four faults take shorter timelines than the scenario's
  # defaults (8 s before, 10 s of outage, still past the 6 s broker session, 5 s after):
  # each fault's figures need its outage, not the margins.
  need_kafka
  need_tansu_installed
  need_executors
  need_test_build
  step "fault scenarios on tansu (infra/faults.sh; each prints its counters, fails on a lost fire), and the API fuzz beside them"
  local tansu_scenarios=(broker-cut broker-restart database-cut node-pause executor-hang rebalance-storm hostile-input)
  # disk-full mounts a small filesystem of its own, which takes root.
  if [ "$(id -u)" = 0 ]; then
    tansu_scenarios+=(disk-full)
  else
    echo "disk-full skipped: mounting its small filesystem takes root"
  fi
  local kafka_scenarios=("kafka-cluster --before-secs 8 --outage-secs 10 --after-secs 5" kafka-executor-hang
    kafka-rebalance-storm kafka-bridge-kill)
  fault_logs="$run_state/faults"
  mkdir -p "$fault_logs"
  failed_scenarios=()
  (if infra/fuzz-api.sh --brokers "$KADENCE_TEST_BROKERS" >"$fault_logs/fuzz.log" 2>&1; then
     echo 0 >"$fault_logs/fuzz.exit"
   else
     echo "$?" >"$fault_logs/fuzz.exit"
   fi) &
  run_side_by_side "${tansu_scenarios[@]}" # (its `wait` waits for the fuzz too)
  step "API fuzz (schemathesis against a running scheduler, run beside the tansu scenarios)"
  cat "$fault_logs/fuzz.log"
  local fuzz_failed
  fuzz_failed=$([ "$(cat "$fault_logs/fuzz.exit" 2>/dev/null)" = 0 ] || echo yes)
  step "fault scenarios on Apache Kafka"
  run_side_by_side "${kafka_scenarios[@]}"
  if [ ${#failed_scenarios[@]} -gt 0 ]; then
    echo "fault scenarios failed: ${failed_scenarios[*]}" >&2
  fi
  if [ -n "$fuzz_failed" ]; then
    echo "the API fuzz failed (its output is above)" >&2
  fi
  [ ${#failed_scenarios[@]} = 0 ] && [ -z "$fuzz_failed" ]
}

# Runs fault scenarios side by side and adds the failed ones to failed_scenarios. Each
# argument: a scenario's name and its options, as one word list.
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

for stage in "${chosen[@]}"; do
  step "stage $stage: ${stage_summary[$stage]}"
  "stage_${stage//-/_}"
done
step "done"
