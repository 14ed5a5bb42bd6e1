#!/usr/bin/env bash
# Installs what BMQ needs on a fresh Debian/Ubuntu machine: system packages (only for tests),
# a virtualenv in .venv and the package itself. Safe to run again; it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=${1:-}

need=()
# pip compiles bmq's C modules (setup.py lists them: the Spark decoder, the views' filter, the
# cleaner's offset map, Index Query's scanner, scheduled delivery's record rewriting): that needs a
# C compiler and Python's headers (python3-dev for Debian's python3).
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
python3 -c 'import os, sysconfig; os.stat(sysconfig.get_paths()["include"] + "/Python.h")' \
  2>/dev/null || need+=(python3-dev)
need_java=""
# The README's examples use kcat.
command -v kcat >/dev/null 2>&1 || need+=(kcat)
if [ "$with_tests" = "--tests" ]; then
  # tests/index runs the README's Index Query examples, which query the HTTP port with curl.
  command -v curl >/dev/null 2>&1 || need+=(curl)
  # tests/security make their TLS certificates with the openssl command.
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  # tests/cluster runs a real ZooKeeper (it brings Java); started by the tests, not systemd.
  ls /usr/share/java/zookeeper.jar >/dev/null 2>&1 || need+=(zookeeper)
  # tests/spark run PySpark 4, which needs Java 17 or 21: Debian 12 and Ubuntu ship
  # openjdk-17-jre-headless, Debian 13 only Java 21 (its default-jre-headless).
  command -v java >/dev/null 2>&1 || need_java=yes
  # tests that need HDFS run Hadoop's MiniDFSCluster (tools/hdfs), which Maven fetches.
  command -v mvn >/dev/null 2>&1 || need+=(maven)
  # tests/faults puts each process of a cluster on its own host (a network namespace, made
  # with iproute2's ip) and injects faults: nftables drops packets (partitions, loss); a
  # host's wall clock steps through a small preloaded library the tests compile with cc.
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v nft >/dev/null 2>&1 || need+=(nftables)
  # tests/console drive Debian's Chromium headless with Playwright (no browser download).
  [ -x /usr/bin/chromium ] || need+=(chromium)
fi
if [ ${#need[@]} -gt 0 ] || [ -n "$need_java" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  if [ -n "$need_java" ]; then
    if apt-cache show openjdk-17-jre-headless >/dev/null 2>&1; then
      need+=(openjdk-17-jre-headless)
    else
      need+=(default-jre-headless)
    fi
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --upgrade pip
if [ "$with_tests" = "--tests" ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
else
  .venv/bin/pip install -q --disable-pip-version-check -e .
fi
# The editable install leaves bmq uncompiled, and with PYTHONDONTWRITEBYTECODE set nothing ever
# writes its bytecode: every process would compile the package again, which was most of a
# broker's start-up time (seconds on a loaded machine). Stale files are simply recompiled.
.venv/bin/python -m compileall -q bmq >/dev/null
if [ "$with_tests" = "--tests" ]; then
  # A real HDFS for the tests: Maven fetches Hadoop's MiniDFSCluster (org.apache.hadoop:
  # hadoop-client-minicluster, about 150 MB) into its local repository (~/.m2/repository, kept
  # between runs) and builds the launcher into tools/hdfs/target; done once, skipped after.
  scripts/hdfs.sh build
  scripts/kafka.sh build   # Kafka 4.4's tools, broker, Connect (tools/kafka): tests/kafka_tools, kafka_connect, bench
  scripts/java_clients.sh build   # kafka-clients from Maven Central, the tests/java programs
  # Old Java clients of tests/compat (issue #36): one build per kafka-clients version it runs.
  for version in 0.10.2.2 0.11.0.3 1.1.1 2.0.1 2.8.2; do
    scripts/legacy_java_client.sh build "$version"
  done
fi
