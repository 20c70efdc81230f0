#!/usr/bin/env bash
# Builds the Java executor SDK (executors/java) when its sources changed and prints the command
# that starts its test executor, for the conformance suite:
#   export KADENCE_TEST_JAVA_EXECUTOR=$(infra/java-executor.sh)
# The command is whitespace-separated words (java, -cp, the classpath, the main class): the
# harness splits it so. The build (mvn -B -q package -DskipTests -pl kadence-executor, the local repository in
# ~/.m2) goes to executors/java/kadence-executor/target and is skipped while a hash of the
# sources, POMs and Avro schemas matches the one kept beside it (infra/java/build.sh). Everything
# but the command goes to standard error.
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=infra/java/build.sh
. "$repo_root/infra/java/build.sh"
target="$repo_root/executors/java/kadence-executor/target"
jar="$target/kadence-executor-0.1.0.jar"

java_build_when_stale "$target/.sources-hash" "$jar" "$target/lib" -- package -DskipTests -pl kadence-executor
echo "java -cp $jar:$target/lib/* io.kadence.executor.demo.TestExecutor"
