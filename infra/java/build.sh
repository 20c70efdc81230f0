# Sourced by infra/java-executor.sh and infra/java-sample.sh (not run on its own): builds parts
# of the Java executor SDK (executors/java) only when their sources changed.
#
#   java_build_when_stale STAMP OUTPUT... -- MAVEN_ARGUMENTS...
#
# runs `mvn -B -q MAVEN_ARGUMENTS` in executors/java (the local repository in ~/.m2, its output
# on standard error) unless every OUTPUT exists and STAMP holds the hash of the sources: the
# Java sources, resources and POMs of every module and the Avro schemas the SDK copies into its
# jar. After a build STAMP holds the hash it was built from. Needs $repo_root.

# The hash of everything a build of executors/java reads.
java_sources_hash() {
  (cd "$repo_root" && find executors/java schemas/avro -type f \
    \( -name '*.java' -o -name 'pom.xml' -o -name '*.avsc' -o -path '*/src/main/resources/*' \) \
    -not -path '*/target/*' | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -d' ' -f1
}

java_build_when_stale() {
  local stamp=$1 outputs=() output stale=no hash
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do outputs+=("$1"); shift; done
  shift # the --
  hash=$(java_sources_hash)
  [ "$(cat "$stamp" 2>/dev/null)" = "$hash" ] || stale=yes
  for output in "${outputs[@]}"; do [ -e "$output" ] || stale=yes; done
  if [ "$stale" = yes ]; then
    echo "building the Java executor SDK: mvn -B -q $* (in executors/java)" >&2
    (cd "$repo_root/executors/java" && mvn -B -q "$@" >&2)
    mkdir -p "$(dirname "$stamp")"
    echo "$hash" >"$stamp"
  fi
}
