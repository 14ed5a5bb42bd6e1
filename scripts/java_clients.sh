#!/usr/bin/env bash
# Kafka's Java client and Kafka Streams against BMQ (tests/java): small programs that run
# client scenarios and print JSON, which the pytest tests in tests/java assert on. Needs Java
# 17+ and Maven (scripts/setup.sh --tests installs both).
#
#   scripts/java_clients.sh build        fetch kafka-clients and kafka-streams with Maven (cached
#                                        in ~/.m2/repository) and build the programs
#                                        into tests/java/target
#   scripts/java_clients.sh classpath    build if needed, then print the class path to run them
#                                        with: java -cp "$(scripts/java_clients.sh classpath)"
#                                        bmq.clients.ProducerScenarios BOOTSTRAP - idempotent=TOPIC
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
. "$here/scripts/maven_module.sh"
module="$here/tests/java"
jar="$module/target/bmq-java-clients-1.jar"

maven_module_command "$module" "$jar" "${1:-}" || {
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
