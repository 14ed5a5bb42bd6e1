#!/usr/bin/env bash
# Apache Kafka's own command-line tools (and its broker) from the Maven jars (tools/kafka), without
# a Kafka distribution. Needs Java 17+ and Maven (scripts/setup.sh --tests installs both).
#
#   scripts/kafka.sh build                 fetch Kafka's jars with Maven (cached in
#                                          ~/.m2/repository) and write their class path to
#                                          tools/kafka/target
#   scripts/kafka.sh classpath             the class path (after build)
#   scripts/kafka.sh run-class CLASS ARGS  run a main class, as Kafka's bin/kafka-run-class.sh
#   scripts/kafka.sh TOOL ARGS             run a tool by the name of its bin/ script, e.g.
#                                          kafka-topics --bootstrap-server localhost:9092 --list
#                                          (kafka-topics.sh works too), or Kafka Connect's
#                                          worker: connect-distributed worker.properties
#   scripts/kafka.sh connect-plugins       the directory of the file connectors, for a worker's
#                                          plugin.path (after build)
#   scripts/kafka.sh bin DIR               write DIR/bin/kafka-*.sh, one wrapper a tool (and
#                                          kafka-run-class.sh, connect-distributed.sh), and
#                                          DIR/libs/*.jar, links to the jars: for programs
#                                          that take a Kafka distribution's directory
#                                          ($KAFKA_PATH)
#   scripts/kafka.sh tools                 list the tool names
#
# Environment, as Kafka's scripts read it: KAFKA_HEAP_OPTS [-Xmx256M; the broker -Xmx1G -Xms1G;
# connect-distributed -Xms256M -Xmx2G], KAFKA_OPTS, and
# KAFKA_LOG_LEVEL, the level of the logs on stderr [warn, as Kafka's tools-log4j2.yaml;
# connect-distributed info, as connect-log4j2.yaml].
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
. "$here/scripts/maven_module.sh"
module="$here/tools/kafka"
jar="$module/target/bmq-kafka-tools-1.jar"
classpath_file="$module/target/classpath.txt"
connect_plugins="$module/target/connect-plugins"

# A class-data archive of the tools' classes (AppCDS): a tool then starts in about half the CPU
# time, which adds up over the tests' hundred tool runs on a shared 2-core machine. The first
# quick tool run writes it, with the classes it loaded. It belongs to one JDK (named after the
# java binary and its time stamp) and one class path (one older than the class path Maven wrote
# is written again); a JVM that cannot use it anyway runs without it, silently (-Xlog:cds=off:
# no warning in the tool's output).
java_bin="$(readlink -f "$(command -v java)")"
archive="$module/target/tools-$(stat -c '%n %Y' "$java_bin" | cksum | cut -d' ' -f1).jsa"

build() {
  maven_module_build "$module" "$jar"
}

# Each tool's main class, as Kafka 4.4's bin/*.sh name them.
main_class() {
  case "${1%.sh}" in
    connect-distributed) echo org.apache.kafka.connect.cli.ConnectDistributed ;;
    kafka-acls) echo org.apache.kafka.tools.AclCommand ;;
    kafka-broker-api-versions) echo org.apache.kafka.tools.BrokerApiVersionsCommand ;;
    kafka-client-metrics) echo org.apache.kafka.tools.ClientMetricsCommand ;;
    kafka-cluster) echo org.apache.kafka.tools.ClusterTool ;;
    kafka-configs) echo org.apache.kafka.tools.ConfigCommand ;;
    kafka-console-consumer) echo org.apache.kafka.tools.consumer.ConsoleConsumer ;;
    kafka-console-producer) echo org.apache.kafka.tools.ConsoleProducer ;;
    kafka-console-share-consumer) echo org.apache.kafka.tools.consumer.ConsoleShareConsumer ;;
    kafka-consumer-groups) echo org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
    kafka-consumer-perf-test) echo org.apache.kafka.tools.ConsumerPerformance ;;
    kafka-delete-records) echo org.apache.kafka.tools.DeleteRecordsCommand ;;
    kafka-features) echo org.apache.kafka.tools.FeatureCommand ;;
    kafka-get-offsets) echo org.apache.kafka.tools.GetOffsetShell ;;
    kafka-groups) echo org.apache.kafka.tools.GroupsCommand ;;
    kafka-leader-election) echo org.apache.kafka.tools.LeaderElectionCommand ;;
    kafka-log-dirs) echo org.apache.kafka.tools.LogDirsCommand ;;
    kafka-metadata-quorum) echo org.apache.kafka.tools.MetadataQuorumCommand ;;
    kafka-producer-perf-test) echo org.apache.kafka.tools.ProducerPerformance ;;
    kafka-reassign-partitions) echo org.apache.kafka.tools.reassign.ReassignPartitionsCommand ;;
    kafka-server-start) echo kafka.Kafka ;;
    kafka-share-consumer-perf-test) echo org.apache.kafka.tools.ShareConsumerPerformance ;;
    kafka-share-groups) echo org.apache.kafka.tools.consumer.group.ShareGroupCommand ;;
    kafka-storage) echo kafka.tools.StorageTool ;;
    kafka-streams-groups) echo org.apache.kafka.tools.streams.StreamsGroupCommand ;;
    kafka-topics) echo org.apache.kafka.tools.TopicCommand ;;
    kafka-transactions) echo org.apache.kafka.tools.TransactionsCommand ;;
    *) return 1 ;;
  esac
}

tools() {
  sed -n 's/^    \(\(kafka\|connect\)-[a-z-]*\)) echo .*/\1/p' "$0"
}

# run_class [--quick] CLASS ARGS: --quick for the tools that run a few requests and exit: the
# JIT's first tier only, which is all they have time for (not the broker or the perf tests).
run_class() {
  build
  local level="${KAFKA_LOG_LEVEL:-warn}" extra=()
  if [ "${1:-}" = "--quick" ]; then
    extra+=(-XX:TieredStopAtLevel=1)
    shift
  fi
  # The JVM options of kafka-run-class.sh; KAFKA_HEAP_OPTS and KAFKA_OPTS unquoted on purpose
  # (several options each), as there; a CLASSPATH in the environment goes first, as there.
  # shellcheck disable=SC2206
  local jvm=(java "${extra[@]}" ${KAFKA_HEAP_OPTS:--Xmx256M} -XX:+UseG1GC
    -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true
    -Dorg.slf4j.simpleLogger.defaultLogLevel="$level" -Dorg.slf4j.simpleLogger.showDateTime=true
    -cp "${CLASSPATH:+$CLASSPATH:}$jar:$(cat "$classpath_file")" ${KAFKA_OPTS:-})
  # An archive of an admin tool's run holds some 16 MB of classes; `--version` or `--help`
  # loads a tenth of that, too few to be worth using: the next quick run writes a fuller one.
  local have=0
  [ -f "$archive" ] && [ "$archive" -nt "$classpath_file" ] && have="$(stat -c %s "$archive")"
  if [ "$have" -ge 8000000 ]; then
    exec "${jvm[@]}" -XX:SharedArchiveFile="$archive" -Xlog:cds=off -Xlog:cds+dynamic=off "$@"
  elif [ ${#extra[@]} -gt 0 ]; then
    # A quick tool and no full archive yet: this run writes one (renamed into place if it holds
    # more than the one there, as tools may run side by side).
    local code=0 dump="$archive.$$"
    "${jvm[@]}" -XX:ArchiveClassesAtExit="$dump" -Xlog:cds=off -Xlog:cds+dynamic=off "$@" \
      || code=$?
    if [ -f "$dump" ] && [ "$(stat -c %s "$dump")" -gt "$have" ]; then
      mv -f "$dump" "$archive"
    fi
    rm -f "$dump"
    exit $code
  fi
  exec "${jvm[@]}" "$@"
}

case "${1:-}" in
  build) build ;;
  classpath) maven_module_classpath "$module" "$jar" ;;
  run-class) shift; run_class "$@" ;;
  tools) tools ;;
  connect-plugins) build; echo "$connect_plugins" ;;
  bin)
    [ $# -eq 2 ] || { echo "usage: kafka.sh bin DIR" >&2; exit 2; }
    build
    # DIR/libs: the jars, as in a Kafka distribution (programs compile against libs/*.jar).
    mkdir -p "$2/bin" "$2/libs"
    tr ':' '\n' <"$classpath_file" | while read -r lib; do ln -sf "$lib" "$2/libs/"; done
    for tool in $(tools) run-class; do
      name="$tool"
      [ "$tool" = run-class ] && name=kafka-run-class
      printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$here/scripts/kafka.sh" "$tool" >"$2/bin/$name.sh"
      chmod +x "$2/bin/$name.sh"
    done
    ;;
  kafka-* | connect-*)
    class="$(main_class "$1")" || {
      echo "kafka.sh: no such tool: $1 (see: kafka.sh tools)" >&2; exit 2; }
    case "$1" in
      kafka-server-start*) quick=(); export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}" ;;
      # A worker runs until stopped (SIGTERM stops it cleanly), logging at connect-log4j2.yaml's
      # level; the heap of connect-distributed.sh.
      connect-distributed*)
        quick=()
        export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256M -Xmx2G}"
        export KAFKA_LOG_LEVEL="${KAFKA_LOG_LEVEL:-info}"
        ;;
      *-perf-test*) quick=() ;;
      *) quick=(--quick) ;;
    esac
    shift
    run_class "${quick[@]}" "$class" "$@"
    ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
