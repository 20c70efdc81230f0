#!/usr/bin/env bash
# A scheduler benchmark on a fresh broker (memory storage) and the local PostgreSQL. The
# first arguments may name the benchmark (default: throughput); the rest go to it (see
# scheduler/benches/throughput.rs, api_load.rs and end_to_end.rs), e.g.
#   infra/bench.sh --jobs 1000,10000 --seconds 20 --backends sqlite,postgres
#   infra/bench.sh --bench api_load --clients 0,200 --seconds 25
#   infra/bench.sh --bench end_to_end --jobs 1000,5000,10000 --routes consistent_hash,first
# (end_to_end also runs two executor processes, test-executor's release build, and reports
# scheduled -> handler start, results recorded, executor CPU per 1 000 triggers)
set -euo pipefail
repo_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo_root"
export PATH="$HOME/.cargo/bin:$PATH"
bench=throughput
if [ "${1:-}" = "--bench" ]; then
  bench=${2:?--bench needs a name: throughput, api_load or end_to_end}
  shift 2
fi
state=$(mktemp -d "${TMPDIR:-/tmp}/kadence-bench-broker.XXXXXX")
cleanup() { infra/broker.sh stop --state "$state" || true; rm -rf "$state"; }
trap cleanup EXIT
KADENCE_BENCH_BROKERS=$(infra/broker.sh start --state "$state")
export KADENCE_BENCH_BROKERS
cargo bench --locked -p kadence-scheduler --bench "$bench" -- "$@"
