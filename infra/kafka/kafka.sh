# Apache Kafka 4 (KRaft) from Maven Central, run with the JDK: sourced by infra/broker.sh,
# which documents the commands. No ZooKeeper, no tarball: pom.xml beside this file names the
# broker, Maven resolves it and its runtime dependencies once into a cached folder, and each
# node runs `kafka.Kafka` on a generated properties file after `kafka.tools.StorageTool
# format` (the two steps the tarball's kafka-storage.sh and kafka-server-start.sh wrap).
#
# Layout of a state dir: kind, bootstrap, cluster-id, and node-N/ for each node with its
# server.properties, data/ (the log dirs, the KRaft metadata log among them), broker.log,
# pid, port (clients) and controller-port (the quorum).
#
# Every node is broker and controller at once (KRaft's combined mode): three processes make a
# quorum of three and a cluster of three brokers, which is what the fault scenarios need
# (kill the partition leader, kill the active controller, a rolling restart) on two cores.
# Production clusters usually run their controllers apart; nothing in Kadence depends on it.

kafka_dir="$repo_root/infra/kafka"

kafka_version() { sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$kafka_dir/pom.xml"; }

# The cached folder of jars, outside the repo so that every clone and CI run reuses it.
kafka_home() { echo "${KADENCE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kadence}/kafka-$(kafka_version)"; }

kafka_java() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"; else command -v java; fi
}

kafka_install() {
  local home stamp
  home=$(kafka_home)
  # The stamp is the pom's digest: a change of version or dependency resolves again.
  stamp=$(sha256sum "$kafka_dir/pom.xml" | cut -c1-64)
  [ "$(cat "$home/installed" 2>/dev/null)" = "$stamp" ] && return 0
  if ! command -v mvn >/dev/null || [ -z "$(kafka_java)" ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "broker: Apache Kafka needs a JDK (17 or later) and Maven; install them" >&2
      exit 1
    fi
    echo "broker: installing Debian's JDK and Maven (Apache Kafka runs on the JDK)..." >&2
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      default-jdk-headless maven >&2
  fi
  mkdir -p "$home"
  # Test suites and fault scenarios may start brokers at once on a fresh machine: one
  # resolves, the others wait on this lock.
  exec 8>"$home.lock"
  flock 8
  if [ "$(cat "$home/installed" 2>/dev/null)" != "$stamp" ]; then
    echo "broker: resolving Apache Kafka $(kafka_version) from Maven Central into $home..." >&2
    rm -rf "$home/libs"
    mvn --batch-mode --quiet -Dstyle.color=never --file "$kafka_dir/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$home/libs" >&2
    echo "$stamp" >"$home/installed"
  fi
  flock -u 8
}

# A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid form).
kafka_cluster_id() {
  python3 -c 'import base64, os
while True:
    text = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
    if not text.startswith("-"):
        print(text)
        break'
}

# Replaces the calling shell with a JVM of `heap` running the Kafka class and arguments given:
# call it in the background (`kafka_exec_java … &`), so that $! is the JVM itself.
kafka_exec_java() {
  local heap=$1
  shift
  exec "$(kafka_java)" "-Xms$heap" "-Xmx$heap" -XX:+UseG1GC -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$kafka_dir/log4j2.properties" \
    -cp "$(kafka_home)/libs/*" "$@"
}

# server.properties of node `id` of `count`.
kafka_write_properties() {
  local node_dir=$1 id=$2 count=$3 voters=$4 port controller_port replicas min_isr
  port=$(cat "$node_dir/port")
  controller_port=$(cat "$node_dir/controller-port")
  replicas=$count
  min_isr=$((count > 1 ? 2 : 1))
  cat >"$node_dir/server.properties" <<EOF
# Written by infra/broker.sh: node $id of $count, broker and controller (KRaft combined mode).
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$node_dir/data
# Topics created with the broker's default replication (Kadence's do) get every replica the
# cluster has, and a write is acknowledged by two in-sync replicas (acks=all) on three nodes.
num.partitions=1
default.replication.factor=$replicas
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$replicas
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$replicas
share.coordinator.state.topic.min.isr=$min_isr
# A classic group's first join waits 3 s by default for more members: tests form groups by
# the hundred, so form them at once (the documented setting for development and tests).
group.initial.rebalance.delay.ms=0
# Groups of the consumer protocol (KIP-848, group.protocol=consumer) take their session
# and heartbeat from the broker, not from the client (the client may not set them). A
# production broker's defaults are 45 s and 5 s; the tests' executors run classic groups with
# a 6 s session and a heartbeat at a tenth of it, so the new protocol gets the same here.
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=6000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=600
# Fault scenarios stop and kill nodes: a stopped node hands its leaderships over first
# (controlled shutdown, the default) and leaves the quorum's view within seconds.
broker.session.timeout.ms=6000
broker.heartbeat.interval.ms=1000
EOF
}

kafka_start_node() {
  local state=$1 id=$2 node_dir="$1/node-$2" heap=512m
  [ "$(ls -d "$state"/node-* | wc -l)" = 1 ] || heap=384m
  kafka_exec_java "$heap" kafka.Kafka "$node_dir/server.properties" \
    >>"$node_dir/broker.log" 2>&1 </dev/null &
  echo $! >"$node_dir/pid"
}

# Waits until node `id` says it started (the broker is registered and unfenced by then, so a
# topic created with three replicas finds three brokers), or fails with its log.
kafka_wait_started() {
  local node_dir=$1 from_line=$2 pid
  pid=$(cat "$node_dir/pid")
  for _ in $(seq 1 1200); do
    if tail -n "+$from_line" "$node_dir/broker.log" 2>/dev/null | grep -q 'Kafka Server started'; then
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "broker: Kafka node in $node_dir exited during start; its log follows" >&2
      tail -n 40 "$node_dir/broker.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "broker: Kafka node in $node_dir not started after 120 s; see its broker.log" >&2
  exit 1
}

kafka_start_nodes() {
  local state=$1 count=$2 first_port=$3 id voters="" cluster_id bootstrap="" lines=()
  kafka_install
  cluster_id=$(kafka_cluster_id)
  echo "$cluster_id" >"$state/cluster-id"
  for id in $(seq 1 "$count"); do
    mkdir -p "$state/node-$id"
    if [ "$id" = 1 ] && [ -n "$first_port" ]; then echo "$first_port"; else free_port; fi >"$state/node-$id/port"
    free_port >"$state/node-$id/controller-port"
    voters+="${voters:+,}$id@127.0.0.1:$(cat "$state/node-$id/controller-port")"
    bootstrap+="${bootstrap:+,}127.0.0.1:$(cat "$state/node-$id/port")"
  done
  for id in $(seq 1 "$count"); do
    kafka_write_properties "$state/node-$id" "$id" "$count" "$voters"
  done
  # Formatting starts a JVM per node: side by side.
  for id in $(seq 1 "$count"); do
    kafka_exec_java 128m kafka.tools.StorageTool format --cluster-id "$cluster_id" \
      --config "$state/node-$id/server.properties" --ignore-formatted \
      >"$state/node-$id/format.log" 2>&1 &
  done
  wait || { cat "$state"/node-*/format.log >&2; exit 1; }
  for id in $(seq 1 "$count"); do
    touch "$state/node-$id/broker.log"
    lines+=("$(($(wc -l <"$state/node-$id/broker.log") + 1))")
    kafka_start_node "$state" "$id"
  done
  for id in $(seq 1 "$count"); do
    kafka_wait_started "$state/node-$id" "${lines[$((id - 1))]}"
  done
  echo "$bootstrap" >"$state/bootstrap"
}

kafka_all_running() {
  local state=$1 node_dir
  for node_dir in "$state"/node-*; do
    [ -f "$node_dir/pid" ] && kill -0 "$(cat "$node_dir/pid")" 2>/dev/null || return 1
  done
}

kafka_stop_nodes() {
  local state=$1 node_dir
  # All at once: one at a time, each would wait for the others to take its leaderships.
  for node_dir in "$state"/node-*; do
    [ -f "$node_dir/pid" ] || continue
    terminate "$(cat "$node_dir/pid")" 150 &
  done
  wait
  rm -f "$state"/node-*/pid
}

kafka_node() {
  local state=$1 action=$2 id=$3 node_dir="$1/node-$3" pid lines
  [ -d "$node_dir" ] || { echo "broker node: no node $id in $state" >&2; exit 2; }
  pid=$(cat "$node_dir/pid" 2>/dev/null || echo "")
  case "$action" in
    stop) [ -z "$pid" ] || terminate "$pid" 300; rm -f "$node_dir/pid" ;;
    kill) [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true; rm -f "$node_dir/pid" ;;
    pause) kill -STOP "$pid" ;;
    resume) kill -CONT "$pid" ;;
    start)
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then return 0; fi
      lines=$(($(wc -l <"$node_dir/broker.log") + 1))
      kafka_start_node "$state" "$id"
      kafka_wait_started "$node_dir" "$lines"
      ;;
    *) echo "broker node: ACTION is stop, kill, pause, resume or start, not $action" >&2; exit 2 ;;
  esac
}

# The active controller is the KRaft quorum's leader. Each node keeps the leader it last
# saw in its metadata log's quorum-state file; the live node with the newest epoch knows.
kafka_active_controller() {
  local state=$1
  python3 - "$state" <<'EOF'
import glob, json, os, sys
best = None
for node_dir in sorted(glob.glob(os.path.join(sys.argv[1], "node-*"))):
    try:
        pid = int(open(os.path.join(node_dir, "pid")).read())
        os.kill(pid, 0)
        quorum = json.load(open(os.path.join(node_dir, "data", "__cluster_metadata-0", "quorum-state")))
    except (OSError, ValueError):
        continue
    leader, epoch = quorum.get("leaderId", -1), quorum.get("leaderEpoch", -1)
    if leader >= 0 and (best is None or epoch > best[1]):
        best = (leader, epoch)
if best is None:
    sys.exit("broker controller: no live node knows a leader")
print(best[0])
EOF
}
