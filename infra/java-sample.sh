#!/usr/bin/env bash
# Builds the Java SDK's sample Spring Boot service (executors/java/kadence-sample, with the SDK
# and the starter it runs on) when their sources changed, and prints the command that starts it:
#   export KADENCE_TEST_JAVA_SAMPLE=$(infra/java-sample.sh)      # tests/e2e/java_sample.rs
#   $(infra/java-sample.sh)                                       # with KADENCE_* set, by hand
# The command is `java -jar` of the executable jar Spring Boot's Maven plugin repackages (every
# dependency inside, no Maven at run time); the service reads the variables every Kadence
# executor reads (KADENCE_BROKERS, KADENCE_APP (default sample), KADENCE_TRUSTED_KEYS,
# KADENCE_EXECUTOR_KEY, ...: kadence-sample/src/main/resources/application.properties lists
# them). The build (mvn -B -q package -DskipTests -pl kadence-sample -am, the local repository
# in ~/.m2) is skipped while a hash of the sources, POMs and Avro schemas matches the one kept
# beside the jar (infra/java/build.sh). Everything but the command goes to standard error.
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=infra/java/build.sh
. "$repo_root/infra/java/build.sh"
target="$repo_root/executors/java/kadence-sample/target"
jar="$target/kadence-sample-0.1.0.jar"

java_build_when_stale "$target/.sources-hash" "$jar" -- package -DskipTests -pl kadence-sample -am
echo "java -jar $jar"
