#!/usr/bin/env bash
# A real HDFS on this machine: Hadoop's MiniDFSCluster (tools/hdfs), a NameNode and DataNodes in one
# JVM on 127.0.0.1. Needs Java 17+ and Maven (scripts/setup.sh --tests installs both).
#
#   scripts/hdfs.sh build        fetch Hadoop with Maven (cached in Maven's local repository,
#                                ~/.m2/repository) and build the launcher into tools/hdfs/target
#   scripts/hdfs.sh run [ARGS]   build if needed, then run until Ctrl-C; ARGS are the launcher's:
#                                --base-dir DIR (default ./hdfs-data, wiped at each start)
#                                --datanodes N (3) --port P (8020; 0 picks a free one)
#                                --info-file FILE --block-size BYTES --stdin-commands
#   scripts/hdfs.sh classpath    the class path to run bmq.hdfs.MiniHdfs with (after build)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
launcher="$here/tools/hdfs"
jar="$launcher/target/bmq-mini-hdfs-1.jar"
classpath_file="$launcher/target/classpath.txt"

build() {
  # Rebuilt only when the launcher's sources or pom are newer than the jar.
  if [ -f "$jar" ] && [ -f "$classpath_file" ] && \
     [ -z "$(find "$launcher/pom.xml" "$launcher/src" -newer "$jar" -print -quit)" ]; then
    return
  fi
  command -v mvn >/dev/null 2>&1 || { echo "hdfs.sh: Maven (mvn) is not installed" >&2; exit 1; }
  mvn -B -q -f "$launcher/pom.xml" package >&2
}

case "${1:-}" in
  build) build ;;
  classpath) build; echo "$jar:$(cat "$classpath_file")" ;;
  run)
    shift
    build
    args=("$@")
    case " ${args[*]} " in *" --base-dir "*) ;; *) args+=(--base-dir "$PWD/hdfs-data") ;; esac
    case " ${args[*]} " in *" --port "*) ;; *) args+=(--port 8020) ;; esac
    exec java -cp "$jar:$(cat "$classpath_file")" bmq.hdfs.MiniHdfs "${args[@]}"
    ;;
  *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
