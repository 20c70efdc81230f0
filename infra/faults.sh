#!/usr/bin/env bash
# Kadence under injected faults: each scenario starts the parts it needs (its own
# broker, `kadence serve`, executors), injects one fault while jobs fire every second, and
# prints what it counted from the trigger topic and the API: fires due, emitted, completed,
# emitted twice, lost (must be 0), time to recover. Exits non-zero when a fire was lost or a
# check failed.
#
# On tansu (the development broker):
#   infra/faults.sh broker-cut   [--jobs 30] [--before-secs 10] [--outage-secs 10] [--after-secs 15]
#   infra/faults.sh broker-restart  (the same; the broker on SQLite storage, stopped and started)
#   infra/faults.sh database-cut [--jobs 20] [--before-secs 10] [--outage-secs 30] [--after-secs 20]
#   infra/faults.sh disk-full    (the same options and defaults; needs root: it mounts a tmpfs)
#   infra/faults.sh node-pause   [--jobs 30] [--before-secs 15] [--outage-secs 20] [--after-secs 15]
#   infra/faults.sh executor-hang   [--jobs 20] [--before-secs 10] [--outage-secs 20] [--after-secs 20]
#   infra/faults.sh rebalance-storm [--jobs 20] [--before-secs 10] [--outage-secs 60] [--after-secs 20]
#                                   (executors leave by SIGTERM)
#   infra/faults.sh hostile-input   [--jobs 10] [--before-secs 10] [--outage-secs 45] [--after-secs 10]
#   infra/faults.sh soak            [--jobs 2000] [--before-secs 60] [--outage-secs 3600]
#                                   (--outage-secs: how long it lasts; release build; not in
#                                   the test command)
# On Apache Kafka 4 (infra/broker.sh --kind kafka or kafka-cluster, started by the scenario):
#   infra/faults.sh kafka-executor-hang   (executor-hang's options; one node; the frozen
#                                         executor's partitions must be handed over)
#   infra/faults.sh kafka-rebalance-storm (rebalance-storm's options; one node; executors leave
#                                         by kill -9 and SIGTERM in turn)
#       both run the classic and the KIP-848 consumer group protocol side by side, a row each;
#       [--group-protocol classic|consumer] runs one
#   infra/faults.sh kafka-cluster [--jobs 20] [--before-secs 10] [--outage-secs 15] [--after-secs 10]
#                                 [--group-protocol classic|consumer]  (default classic)
#       on three nodes (replication factor 3, min.insync.replicas=2), four faults in turn, a
#       row each: the leader of the trigger topic's partition 0 killed (SIGKILL) and started
#       again after the outage; the active KRaft controller the same; that leader frozen
#       (SIGSTOP) for the outage; a rolling restart (SIGTERM, start, all replicas in sync
#       before the next node; takes its own time)
#   infra/faults.sh kafka-leader-kill | kafka-controller-kill | kafka-broker-freeze |
#                   kafka-rolling-restart   (one of the four on a cluster of its own; the same
#                                           options)
#   infra/faults.sh kafka-bridge-kill [--jobs 20] [--before-secs 10] [--outage-secs 20] [--after-secs 40]
#       on one node, two XXL-JOB bridges of an app (kadence bridge xxl-job, each the other's
#       --peer) and two XXL-JOB executors (xxl-job-core 3.3.2) calling the first bridge first:
#       that bridge killed (SIGKILL) and started again after the outage; the executors' command
#       from KADENCE_TEST_XXL_JOB_3_3, else from infra/xxl-job-executor.sh 3.3.2 (Maven builds
#       it the first time); classic group protocol only
#
# database-cut and node-pause need PostgreSQL (KADENCE_TEST_POSTGRES_URL, default
# postgres://postgres@127.0.0.1:5432/test); it makes a database of its own and drops it.
# KADENCE_FAULTS_KEEP_LOGS=1 keeps every process's log (the broker's too), passed or not.
# The harness is tests/src/faults/ (binary tests/src/bin/faults.rs); the book's fault runs
# page (docs/src/measurements/faults.md) lists the scenarios with their latest figures.
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo_root"
export PATH="$HOME/.cargo/bin:$PATH"

# Only the broker the scenario runs on (tansu takes ~10 minutes to build the first time).
case "${1:-}" in
  kafka-*) infra/broker.sh install --kind kafka ;;
  *) infra/broker.sh install --kind tansu ;;
esac
# The soak measures memory and lateness over an hour: on the build users run (release); the
# others on the test build the test command already made.
if [ "${1:-}" = soak ]; then
  cargo build --quiet --release -p kadence-tests --bins
  exec target/release/faults "$@"
fi
cargo build --quiet -p kadence-tests --bins
exec target/debug/faults "$@"
