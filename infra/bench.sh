#!/usr/bin/env bash
# A scheduler benchmark on fresh brokers and the local PostgreSQL (started when none runs). The first arguments may
# name the benchmark (default: throughput); the rest go to it (see
# scheduler/benches/throughput.rs, api_load.rs and end_to_end.rs), e.g.
#   infra/bench.sh --jobs 1000,10000 --seconds 20 --backends sqlite,postgres
#   infra/bench.sh --jobs 1000 --seconds 10 --backends sqlite --brokers tansu,kafka
#   infra/bench.sh --bench api_load --clients 0,200 --seconds 25
#   infra/bench.sh --bench end_to_end --jobs 1000,5000,10000 --routes consistent_hash,first
# (end_to_end also runs two executor processes, test-executor's release build, and reports
# scheduled -> handler start, results recorded, executor CPU per 1 000 triggers)
#
# Brokers: every benchmark takes `--brokers tansu,kafka` (default tansu) and runs each
# configuration on each broker named. This script reads that same flag from the arguments it
# passes on (one flag, so the brokers started are always the brokers measured), starts each
# broker named with infra/broker.sh in a state dir of its own (tansu with memory storage;
# kafka: Apache Kafka 4, one KRaft node, resolved by Maven the first time, about a minute),
# hands their addresses to the benchmark as KADENCE_BENCH_BROKERS_TANSU and
# KADENCE_BENCH_BROKERS_KAFKA, and stops them all when it exits. They all run for the whole
# benchmark: while one broker is measured, the other idles beside it.
set -euo pipefail
repo_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo_root"
export PATH="$HOME/.cargo/bin:$PATH"
bench=throughput
if [ "${1:-}" = "--bench" ]; then
  bench=${2:?--bench needs a name: throughput, api_load or end_to_end}
  shift 2
fi

# The brokers the arguments name (the benchmark takes `--brokers LIST`, never `--brokers=`).
brokers=tansu
args=("$@")
for i in "${!args[@]}"; do
  if [ "${args[$i]}" = "--brokers" ]; then
    brokers=${args[$((i + 1))]:?--brokers needs a list: tansu, kafka or tansu,kafka}
  fi
done
kinds=()
for kind in ${brokers//,/ }; do
  case "$kind" in
    tansu | kafka) ;;
    *) echo "bench: --brokers takes tansu and kafka, not $kind" >&2; exit 2 ;;
  esac
  [[ " ${kinds[*]} " == *" $kind "* ]] || kinds+=("$kind")
done
[ ${#kinds[@]} -gt 0 ] || { echo "bench: --brokers names no broker" >&2; exit 2; }

# Build first: on a busy machine the build can take many minutes, which brokers started
# before it would spend idle (and a build that fails starts none).
cargo bench --locked -p kadence-scheduler --bench "$bench" --no-run

states=()
databases=$(mktemp -d "${TMPDIR:-/tmp}/kadence-bench-databases.XXXXXX")
chmod 755 "$databases" # the database servers run as their own users
cleanup() {
  local state
  for state in "${states[@]}"; do
    infra/broker.sh stop --state "$state" || true
    rm -rf "$state"
  done
  infra/databases.sh stop --state "$databases" || true
  rm -rf "$databases"
}
trap cleanup EXIT
# The PostgreSQL (and MariaDB) the backends run on: installed and started when missing, a
# server already answering on its port reused (infra/databases.sh).
infra/databases.sh start --state "$databases" >&2
for kind in "${kinds[@]}"; do
  state=$(mktemp -d "${TMPDIR:-/tmp}/kadence-bench-$kind.XXXXXX")
  states+=("$state")
  address=$(infra/broker.sh start --kind "$kind" --state "$state")
  echo "bench: $kind at $address" >&2
  export "KADENCE_BENCH_BROKERS_${kind^^}=$address"
done
cargo bench --locked -p kadence-scheduler --bench "$bench" -- "$@"
