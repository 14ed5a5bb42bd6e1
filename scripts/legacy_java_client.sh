#!/usr/bin/env bash
# An old Kafka Java client against BMQ (tests/compat/java, issue #36): kafka-clients 0.10.2.2,
# message format v1. Needs Java 17+ and Maven (scripts/setup.sh --tests installs both).
#
#   scripts/legacy_java_client.sh build        fetch kafka-clients 0.10.2.2 with Maven (cached in
#                                              ~/.m2/repository) and build the program into
#                                              tests/compat/java/target
#   scripts/legacy_java_client.sh classpath    build if needed, then print the class path:
#                                              java -cp "$(scripts/legacy_java_client.sh
#                                              classpath)" bmq.legacy.LegacyClient produce ...
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
. "$here/scripts/maven_module.sh"
module="$here/tests/compat/java"
jar="$module/target/bmq-legacy-java-client-1.jar"

maven_module_command "$module" "$jar" "${1:-}" || {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
