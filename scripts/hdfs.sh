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
. "$here/scripts/maven_module.sh"
launcher="$here/tools/hdfs"
jar="$launcher/target/bmq-mini-hdfs-1.jar"

case "${1:-}" in
  run)
    shift
    classpath="$(maven_module_classpath "$launcher" "$jar")"
    args=("$@")
    case " ${args[*]} " in *" --base-dir "*) ;; *) args+=(--base-dir "$PWD/hdfs-data") ;; esac
    case " ${args[*]} " in *" --port "*) ;; *) args+=(--port 8020) ;; esac
    exec java -cp "$classpath" bmq.hdfs.MiniHdfs "${args[@]}"
    ;;
  *) maven_module_command "$launcher" "$jar" "${1:-}" || {
       sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; } ;;
esac
