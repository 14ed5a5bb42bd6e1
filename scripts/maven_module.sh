# Sourced by the scripts that build a Maven module of this repository and run its programs
# without Maven (scripts/hdfs.sh, scripts/java_clients.sh, scripts/kafka.sh). The module's pom
# writes its run-time class path to target/classpath.txt (maven-dependency-plugin's
# build-classpath); Maven keeps the dependencies in its local repository (~/.m2/repository), so
# later builds need no network.
#
#   maven_module_build MODULE JAR [ARG...]  build MODULE/pom.xml (Maven's ARGs, e.g. -Dx=y),
#                                       unless JAR and the class path beside it are newer than
#                                       the pom and the sources
#   maven_module_classpath MODULE JAR [ARG...]  build if needed, then print JAR and its
#                                       dependencies
#   maven_module_command MODULE JAR CMD [ARG...]  one of the two by the scripts' command names,
#                                       "build" or "classpath"; returns 2 for any other

maven_module_build() {
  local module=$1 jar=$2
  shift 2
  local sources=("$module/pom.xml")
  [ -d "$module/src" ] && sources+=("$module/src")   # a module may only resolve jars
  if [ -f "$jar" ] && [ -f "$(dirname "$jar")/classpath.txt" ] && \
     [ -z "$(find "${sources[@]}" -newer "$jar" -print -quit)" ]; then
    return
  fi
  command -v mvn >/dev/null 2>&1 || {
    echo "$(basename "$0"): Maven (mvn) is not installed" >&2; exit 1; }
  # Exits, not returns: callers test maven_module_command's status for a wrong command name,
  # and a function run in a test (`||`) does not stop at a failure under set -e.
  mvn -B -q -f "$module/pom.xml" "$@" package >&2 || exit $?
}

maven_module_classpath() {
  maven_module_build "$@"
  echo "$2:$(cat "$(dirname "$2")/classpath.txt")"
}

maven_module_command() {
  local module=$1 jar=$2 command=$3
  shift 3
  case "$command" in
    build) maven_module_build "$module" "$jar" "$@" ;;
    classpath) maven_module_classpath "$module" "$jar" "$@" ;;
    *) return 2 ;;
  esac
}
