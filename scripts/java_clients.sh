#!/usr/bin/env bash
# Kafka's Java client against BMQ (tests/java): small programs that run client scenarios and
# print JSON, which the pytest tests in tests/java assert on. Needs Java 17+ and Maven
# (scripts/setup.sh --tests installs both).
#
#   scripts/java_clients.sh build        fetch kafka-clients with Maven (cached in Maven's local
#                                        repository, ~/.m2/repository) and build the programs
#                                        into tests/java/target
#   scripts/java_clients.sh classpath    build if needed, then print the class path to run them
#                                        with: java -cp "$(scripts/java_clients.sh classpath)"
#                                        bmq.clients.ProducerScenarios BOOTSTRAP - idempotent=TOPIC
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
module="$here/tests/java"
jar="$module/target/bmq-java-clients-1.jar"
classpath_file="$module/target/classpath.txt"

build() {
  # Rebuilt only when the programs' sources or pom are newer than the jar.
  if [ -f "$jar" ] && [ -f "$classpath_file" ] && \
     [ -z "$(find "$module/pom.xml" "$module/src" -newer "$jar" -print -quit)" ]; then
    return
  fi
  command -v mvn >/dev/null 2>&1 || { echo "java_clients.sh: Maven (mvn) is not installed" >&2; exit 1; }
  mvn -B -q -f "$module/pom.xml" package >&2
}

case "${1:-}" in
  build) build ;;
  classpath) build; echo "$jar:$(cat "$classpath_file")" ;;
  *) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
