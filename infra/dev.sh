#!/usr/bin/env bash
# The dev stack on the embedded defaults: a broker (unless KADENCE_BROKERS names an existing
# cluster), the scheduler on a SQLite file, and the demo executor (handlers `hello` and
# `fail`). On first start it creates the app `demo` and a job running `hello` every 5 s.
# Prints where the API listens; Ctrl-C (or SIGTERM) stops everything it started, gracefully:
# each process gets SIGTERM and up to 45 s to drain before SIGKILL.
#
# The first admin's password is made on the first start and kept in
# .kadence/dev/admin-password (mode 0600); the script logs the CLI in with it.
#
# The scheduler signs every trigger; the demo executor trusts the scheduler's active signing
# keys (KADENCE_TRUSTED_KEYS, read from `kadence key list` at start), so it runs only triggers
# the scheduler signed. After `kadence key rotate`, restart the stack so the executor learns
# the new key.
#
# The book: when mdbook is on the PATH (or in ~/.cargo/bin), the script builds it
# (`mdbook build docs`, into docs/book) and the scheduler serves it at /docs/ (api.book_dir),
# where the console's help links lead; without mdbook it says so once and goes on, and the
# console shows no help links.
#
# The demo executor signs what it writes (results, log lines, beats) with an executor key of
# the app `demo`, made on the first start (`kadence executor-key create`) and kept in
# .kadence/dev/executor-key (mode 0600); a later start reuses it while it is not revoked.
#
# Options:
#   --java         also build and run the Java SDK's sample Spring Boot service
#                  (executors/java/kadence-sample, built by infra/java-sample.sh: needs a JDK 17+
#                  and Maven) as the executor of the app `sample` (made with 2 partitions on the
#                  first such start), beside the demo executor: handlers demoJobHandler,
#                  shardingJobHandler and reportJobHandler. It trusts the same keys and signs
#                  with an executor key of `sample`, made and kept like the demo's in
#                  .kadence/dev/sample-executor-key; its log is .kadence/dev/sample.log. No job
#                  is made for it: one that fired while the stack ran without --java would pile
#                  triggers up in its partition for the next start. The summary prints the
#                  command that makes a cron job on demoJobHandler every 10 s.
#   --prometheus   also run Prometheus (Debian's package, installed when missing) on
#                  127.0.0.1:9090 (KADENCE_PROMETHEUS_PORT), scraping the scheduler's /metrics
#                  and the demo executor's (127.0.0.1:9464; with --java the sample's too,
#                  127.0.0.1:9465) every 5 s, with the alert rules of dashboards/alerts.yml
#                  loaded; point Grafana at it (see docs/src/guides/observability.md).
#
# Environment: KADENCE_BROKERS (use this cluster instead of starting a broker),
# KADENCE_BROKER_KIND (the broker to start: tansu, the default, or kafka for one Apache Kafka
# node, or kafka-cluster for three; see infra/broker.sh),
# KADENCE_API_PORT (default 8080), KADENCE_OTLP_ENDPOINT (export the scheduler's and the
# executor's spans to this OTLP/HTTP endpoint, e.g. a local Jaeger at http://127.0.0.1:4318).
# State lives in .kadence/dev.
set -euo pipefail

with_prometheus=no
with_java=no
for argument in "$@"; do
  case "$argument" in
    --java) with_java=yes ;;
    --prometheus) with_prometheus=yes ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $argument (try --help)" >&2; exit 2 ;;
  esac
done

repo_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo_root"
export PATH="$HOME/.cargo/bin:$PATH"
state="$repo_root/.kadence/dev"
mkdir -p "$state"
api_port="${KADENCE_API_PORT:-8080}"
api="http://127.0.0.1:$api_port"
prometheus_port="${KADENCE_PROMETHEUS_PORT:-9090}"
executor_metrics="127.0.0.1:9464"
sample_metrics="127.0.0.1:9465"
children=()
child_names=()
started_broker=no
# SIGTERM is a graceful stop for the scheduler and the executor (the executor lets its running
# jobs finish and reports their results); this is how long they get before SIGKILL. Longer than
# the executor's drain timeout (30 s), so that its own deadline cancels what still runs first.
stop_timeout=45

stop_all() {
  trap - INT TERM EXIT
  echo
  echo "stopping the dev stack..."
  for pid in "${children[@]}"; do kill "$pid" 2>/dev/null || true; done
  local deadline=$((SECONDS + stop_timeout)) i pid
  for i in "${!children[@]}"; do
    pid=${children[$i]}
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "the ${child_names[$i]} (pid $pid) did not stop within ${stop_timeout}s of SIGTERM; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  if [ "$started_broker" = yes ]; then infra/broker.sh stop --state "$state/broker"; fi
}
trap stop_all INT TERM EXIT

echo "building Kadence (the first build takes a few minutes)..."
cargo build --locked -p kadence-scheduler -p kadence-executor --bin kadence --example demo
if [ "$with_java" = yes ]; then
  for tool in java mvn; do
    command -v "$tool" >/dev/null || { echo "--java needs a JDK 17+ and Maven ($tool is not on the PATH; on Debian: apt-get install openjdk-17-jdk-headless maven)" >&2; exit 1; }
  done
  echo "building the Java sample service (infra/java-sample.sh; Maven fetches its dependencies the first time)..."
  sample_command_line=$(infra/java-sample.sh)
  read -ra sample_command <<<"$sample_command_line"
fi

if [ -n "${KADENCE_BROKERS:-}" ]; then
  brokers="$KADENCE_BROKERS"
  # An existing cluster is taken for Apache Kafka unless KADENCE_BROKER_KIND says tansu.
  broker_kind="${KADENCE_BROKER_KIND:-kafka}"
  echo "using the Kafka cluster at $brokers"
else
  brokers=$(infra/broker.sh start --state "$state/broker")
  started_broker=yes
  broker_kind=$(cat "$state/broker/kind")
  echo "broker ($broker_kind) started at $brokers (logs: $state/broker)"
fi
# The scheduler and the executor work round tansu's quirks when told it is tansu
# (kafka.broker_kind, KADENCE_BROKER_KIND); a Kafka cluster of three is Kafka to them.
[ "$broker_kind" = tansu ] || broker_kind=kafka

book_dir=""
if command -v mdbook >/dev/null; then
  echo "building the book (mdbook build docs)..."
  if mdbook build docs >"$state/mdbook.log" 2>&1; then
    book_dir="$repo_root/docs/book"
  else
    echo "mdbook could not build the book (its log: $state/mdbook.log); going on without it" >&2
  fi
else
  echo "mdbook is not installed (cargo install mdbook): going on without the book at /docs/"
fi

password_file="$state/admin-password"
if [ ! -s "$password_file" ]; then
  (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(18))' >"$password_file")
fi

scheduler_env=(
  KADENCE_AUTH__ADMIN_PASSWORD="$(cat "$password_file")"
  KADENCE_DATABASE__URL="sqlite://$state/kadence.db"
  KADENCE_KAFKA__BROKERS="$brokers"
  KADENCE_KAFKA__BROKER_KIND="$broker_kind"
  KADENCE_API__LISTEN="127.0.0.1:$api_port"
)
if [ -n "${KADENCE_OTLP_ENDPOINT:-}" ]; then
  scheduler_env+=(KADENCE_TELEMETRY__OTLP_ENDPOINT="$KADENCE_OTLP_ENDPOINT")
fi
if [ -n "$book_dir" ]; then scheduler_env+=(KADENCE_API__BOOK_DIR="$book_dir"); fi
env "${scheduler_env[@]}" target/debug/kadence serve >"$state/scheduler.log" 2>&1 &
children+=($!)
child_names+=(scheduler)
for _ in $(seq 1 100); do
  curl -fsS "$api/health" >/dev/null 2>&1 && break
  kill -0 "${children[0]}" 2>/dev/null || { echo "the scheduler exited; its log follows" >&2; tail -n 30 "$state/scheduler.log" >&2; exit 1; }
  sleep 0.2
done

export KADENCE_API_URL="$api"
target/debug/kadence login --user admin --password-stdin <"$password_file" >/dev/null
if ! target/debug/kadence app list | grep -q '^demo '; then
  target/debug/kadence app add demo --partitions 2 --title "Dev stack demo"
  target/debug/kadence job add --app demo --handler hello --cron "*/5 * * * * ?" --params "from the dev stack" --start
fi
if [ "$with_java" = yes ] && ! target/debug/kadence app list | grep -q '^sample '; then
  target/debug/kadence app add sample --partitions 2 --title "Java sample service (Spring Boot)"
fi

# Public keys of the active signing keys (RETIRED is "-"), comma separated.
trusted_keys=$(target/debug/kadence key list | awk 'NR > 1 && $4 == "-" { print $2 }' | paste -sd, -)
if [ -z "$trusted_keys" ]; then
  echo "the scheduler listed no active signing key; its log follows" >&2
  tail -n 30 "$state/scheduler.log" >&2
  exit 1
fi

# An app's executor key, kept in a file: the one kept from an earlier start while
# `executor-key list` shows it unrevoked (REVOKED is "-"), else a new one.
keep_executor_key() {
  local app=$1 key_file=$2 key_id
  key_id=$(cut -d. -f1 "$key_file" 2>/dev/null || true)
  if [ -z "$key_id" ] || ! target/debug/kadence executor-key list --app "$app" \
      | awk -v id="$key_id" 'NR > 1 && $1 == id && $5 == "-" { found = 1 } END { exit !found }'; then
    (umask 077 && target/debug/kadence executor-key create --app "$app" --quiet >"$key_file")
  fi
}
key_file="$state/executor-key"
keep_executor_key demo "$key_file"

executor_env=(KADENCE_BROKERS="$brokers" KADENCE_BROKER_KIND="$broker_kind" KADENCE_APP=demo KADENCE_TRUSTED_KEYS="$trusted_keys" KADENCE_EXECUTOR_KEY="$(cat "$key_file")")
if [ "$with_prometheus" = yes ]; then executor_env+=(KADENCE_METRICS_ADDRESS="$executor_metrics"); fi
if [ -n "${KADENCE_OTLP_ENDPOINT:-}" ]; then executor_env+=(KADENCE_OTLP_ENDPOINT="$KADENCE_OTLP_ENDPOINT"); fi
env "${executor_env[@]}" target/debug/examples/demo >"$state/executor.log" 2>&1 &
children+=($!)
child_names+=(executor)

sample_line=""
if [ "$with_java" = yes ]; then
  sample_key_file="$state/sample-executor-key"
  keep_executor_key sample "$sample_key_file"
  sample_env=(KADENCE_BROKERS="$brokers" KADENCE_BROKER_KIND="$broker_kind" KADENCE_APP=sample KADENCE_TRUSTED_KEYS="$trusted_keys" KADENCE_EXECUTOR_KEY="$(cat "$sample_key_file")")
  if [ "$with_prometheus" = yes ]; then sample_env+=(KADENCE_METRICS_ADDRESS="$sample_metrics"); fi
  env "${sample_env[@]}" "${sample_command[@]}" >"$state/sample.log" 2>&1 &
  children+=($!)
  child_names+=("Java sample")
  # Spring Boot says "Started SampleApplication" once the context, hence the executor, is up;
  # a refused setting ends the process with its report in the log.
  echo "starting the Java sample service..."
  for _ in $(seq 1 300); do
    grep -q "Started SampleApplication" "$state/sample.log" 2>/dev/null && break
    kill -0 "${children[-1]}" 2>/dev/null || { echo "the Java sample service exited; its log follows" >&2; tail -n 40 "$state/sample.log" >&2; exit 1; }
    sleep 0.2
  done
  sample_line="  Java:       the sample service (executors/java/kadence-sample) runs app sample's jobs:
              demoJobHandler, shardingJobHandler, reportJobHandler (log: $state/sample.log)
"
fi

sample_try=""
if [ "$with_java" = yes ]; then
  sample_try="  target/debug/kadence job add --app sample --handler demoJobHandler --cron \"*/10 * * * * ?\" --start
  target/debug/kadence job runs <its id>     (then: target/debug/kadence job log <a log id>)
"
fi

book_line=""
if [ -n "$book_dir" ]; then
  book_line="  book:       $api/docs/   (the console's help links lead here)
"
fi

prometheus_line=""
if [ "$with_prometheus" = yes ]; then
  if ! command -v prometheus >/dev/null; then
    echo "installing Debian's prometheus package..."
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null
  fi
  mkdir -p "$state/prometheus"
  executor_targets="\"$executor_metrics\""
  if [ "$with_java" = yes ]; then executor_targets+=", \"$sample_metrics\""; fi
  cat >"$state/prometheus/prometheus.yml" <<EOC
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - $repo_root/dashboards/alerts.yml
scrape_configs:
  - job_name: kadence-scheduler
    static_configs: [{targets: ["127.0.0.1:$api_port"]}]
  - job_name: kadence-executor
    static_configs: [{targets: [$executor_targets]}]
EOC
  prometheus --config.file="$state/prometheus/prometheus.yml" \
    --storage.tsdb.path="$state/prometheus/data" \
    --web.listen-address="127.0.0.1:$prometheus_port" >"$state/prometheus/prometheus.log" 2>&1 &
  children+=($!)
  child_names+=(prometheus)
  prometheus_line="  prometheus: http://127.0.0.1:$prometheus_port (alerts: /alerts; Grafana data source: this URL)"
fi

cat <<EOT

Kadence dev stack is running.
  API:        $api   (export KADENCE_API_URL=$api for the CLI; it is logged in)
  console:    $api/   (in a browser)
  admin:      user admin, password in $password_file
  signing:    the executors trust $trusted_keys
  broker:     $brokers
  database:   $state/kadence.db
  logs:       $state/scheduler.log, $state/executor.log
$sample_line$book_line$prometheus_line

Try:
  target/debug/kadence job list
  target/debug/kadence job runs 1
  target/debug/kadence job add --app demo --handler fail --manual
  target/debug/kadence job trigger 2 --params hello
$sample_try
Ctrl-C stops everything.
EOT
wait "${children[0]}"
