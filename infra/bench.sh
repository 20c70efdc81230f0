#!/usr/bin/env bash
# The scheduler throughput benchmark on a fresh broker (memory storage) and the local
# PostgreSQL; arguments go to the benchmark (see scheduler/benches/throughput.rs), e.g.
#   infra/bench.sh --jobs 1000,10000 --seconds 20 --backends sqlite,postgres
set -euo pipefail
repo_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo_root"
export PATH="$HOME/.cargo/bin:$PATH"
state=$(mktemp -d "${TMPDIR:-/tmp}/kadence-bench-broker.XXXXXX")
cleanup() { infra/broker.sh stop --state "$state" || true; rm -rf "$state"; }
trap cleanup EXIT
KADENCE_BENCH_BROKERS=$(infra/broker.sh start --state "$state")
export KADENCE_BENCH_BROKERS
cargo bench --locked -p kadence-scheduler --bench throughput -- "$@"
