#!/usr/bin/env bash
# Builds the Java executor SDK (executors/java) when its sources changed and prints the command
# that starts its test executor, for the conformance suite:
#   export KADENCE_TEST_JAVA_EXECUTOR=$(infra/java-executor.sh)
# The command is whitespace-separated words (java, -cp, the classpath, the main class): the
# harness splits it so. The build (mvn -B -q package -DskipTests -pl kadence-executor, the local repository in
# ~/.m2) goes to executors/java/kadence-executor/target and is skipped while a hash of the
# sources, POMs and Avro schemas matches the one kept beside it. Everything but the command goes
# to standard error.
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
project="$repo_root/executors/java"
target="$project/kadence-executor/target"
stamp="$target/.sources-hash"

sources_hash=$( (cd "$repo_root" && find executors/java schemas/avro -type f \
  \( -name '*.java' -o -name 'pom.xml' -o -name '*.avsc' \) -not -path '*/target/*' \
  | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -d' ' -f1)

jar="$target/kadence-executor-0.1.0.jar"
if [[ ! -f "$jar" || ! -d "$target/lib" || "$(cat "$stamp" 2>/dev/null)" != "$sources_hash" ]]; then
  echo "building the Java executor in $project" >&2
  (cd "$project" && mvn -B -q package -DskipTests -pl kadence-executor >&2)
  echo "$sources_hash" > "$stamp"
fi
echo "java -cp $jar:$target/lib/* io.kadence.executor.demo.TestExecutor"
