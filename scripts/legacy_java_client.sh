#!/usr/bin/env bash
# Old Kafka Java clients against BMQ (tests/compat/java, issue #36): kafka-clients 0.10.2.2
# (message format v1) by default, or the VERSION given. Needs Java 17+ and Maven
# (scripts/setup.sh --tests installs both and builds every VERSION the tests use).
#
#   scripts/legacy_java_client.sh build [VERSION]      fetch kafka-clients VERSION with Maven
#                                                      (cached in ~/.m2/repository) and build
#                                                      the program into tests/compat/java/target
#   scripts/legacy_java_client.sh classpath [VERSION]  build if needed, then print the class
#                                                      path: java -cp "$(...)"
#                                                      bmq.legacy.LegacyClient produce ...
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
. "$here/scripts/maven_module.sh"
module="$here/tests/compat/java"
version="${2:-0.10.2.2}"
jar="$module/target/$version/bmq-legacy-java-client-1.jar"

maven_module_command "$module" "$jar" "${1:-}" "-Dkafka.version=$version" || {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
