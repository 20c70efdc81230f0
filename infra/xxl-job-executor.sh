#!/usr/bin/env bash
# Builds the XXL-JOB sample executor (tests/xxl-job-executor, a frameless executor on
# com.xuxueli:xxl-job-core) for one xxl-job-core VERSION when its sources changed, and prints the
# command that starts it, for the bridge's tests:
#   export KADENCE_TEST_XXL_JOB_2_4=$(infra/xxl-job-executor.sh 2.4.2)
#   export KADENCE_TEST_XXL_JOB_3_3=$(infra/xxl-job-executor.sh 3.3.2)
# VERSION is 2.4.2 (the most deployed line) or 3.3.2 (the newest on Maven Central); anything
# else exits 2. The command is whitespace-separated words (java, -cp, the classpath, the main
# class); the executor reads XXL_JOB_* variables (tests/xxl-job-executor/README.md).
# Each version builds with `mvn -B -q package -Dxxl-job.version=VERSION` (the local repository in
# ~/.m2) into target/xxl-job-executor/VERSION, its runtime dependencies in lib/ beside the jar,
# and is skipped while a hash of the sample's sources and POM matches the one kept there.
# Everything but the command goes to standard error.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 VERSION   (VERSION: 2.4.2 or 3.3.2, the xxl-job-core to build against)" >&2
  exit 2
fi
version=$1
case "$version" in
  2.4.2 | 3.3.2) ;;
  *)
    echo "$0: unknown xxl-job-core version '$version': the sample executor is built for 2.4.2 or 3.3.2" >&2
    exit 2
    ;;
esac

repo_root=$(cd "$(dirname "$0")/.." && pwd)
project="$repo_root/tests/xxl-job-executor"
out="$repo_root/target/xxl-job-executor/$version"
jar="$out/xxl-job-sample-executor.jar"
stamp="$out/.sources-hash"

hash=$(cd "$project" && find . -type f \( -name '*.java' -o -name 'pom.xml' -o -path './src/main/resources/*' \) \
  | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)

if [[ ! -e "$jar" || ! -d "$out/lib" || "$(cat "$stamp" 2>/dev/null)" != "$hash" ]]; then
  echo "building the XXL-JOB sample executor for xxl-job-core $version into $out" >&2
  # lib/ is refilled from scratch: a jar left from an older POM would sit on the classpath too.
  rm -rf "$out/lib" "$stamp"
  # Maven 3.8's Jansi writes ESC[0m resets to both streams even with style.color=never and -q;
  # jansi.noreset (a JVM property, so through MAVEN_OPTS) stops them.
  (cd "$project" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" \
    mvn -B -q -Dstyle.color=never package "-Dxxl-job.version=$version" "-Dxxl-job.build.directory=$out" >&2)
  echo "$hash" >"$stamp"
fi
echo "java -cp $jar:$out/lib/* io.kadence.xxljob.SampleExecutor"
