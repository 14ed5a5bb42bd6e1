# Sourced by the scripts that build a Maven module of this repository and run its programs
# without Maven (scripts/hdfs.sh, scripts/java_clients.sh, scripts/kafka.sh). The module's pom
# writes its run-time class path to target/classpath.txt (maven-dependency-plugin's
# build-classpath); Maven keeps the dependencies in its local repository (~/.m2/repository), so
# later builds need no network.
#
#   maven_module_build MODULE JAR       build MODULE/pom.xml into MODULE/target, unless JAR and
#                                       the class path are newer than the pom and the sources
#   maven_module_classpath MODULE JAR   build if needed, then print JAR and its dependencies
#   maven_module_command MODULE JAR CMD one of the two by the scripts' command names, "build"
#                                       or "classpath"; returns 2 for any other

maven_module_build() {
  local module=$1 jar=$2
  local sources=("$module/pom.xml")
  [ -d "$module/src" ] && sources+=("$module/src")   # a module may only resolve jars
  if [ -f "$jar" ] && [ -f "$module/target/classpath.txt" ] && \
     [ -z "$(find "${sources[@]}" -newer "$jar" -print -quit)" ]; then
    return
  fi
  command -v mvn >/dev/null 2>&1 || {
    echo "$(basename "$0"): Maven (mvn) is not installed" >&2; exit 1; }
  # Exits, not returns: callers test maven_module_command's status for a wrong command name,
  # and a function run in a test (`||`) does not stop at a failure under set -e.
  mvn -B -q -f "$module/pom.xml" package >&2 || exit $?
}

maven_module_classpath() {
  maven_module_build "$1" "$2"
  echo "$2:$(cat "$1/target/classpath.txt")"
}

maven_module_command() {
  case "$3" in
    build) maven_module_build "$1" "$2" ;;
    classpath) maven_module_classpath "$1" "$2" ;;
    *) return 2 ;;
  esac
}
