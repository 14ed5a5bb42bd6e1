#!/usr/bin/env bash
# Runs librdkafka's own integration test suite (its tests/ directory, quick mode, broker tests
# only) against a throw-away `bmq serve`, and prints what passed, failed and was skipped.
#
#   scripts/librdkafka_suite.sh                 # every quick broker test (about 15 min)
#   TESTS=0011,0081 scripts/librdkafka_suite.sh # only these tests
#
# Settings (environment):
#   LIBRDKAFKA_VERSION  the librdkafka release to test with [the one inside the installed
#                       confluent-kafka wheel: confluent_kafka.libversion()]
#   LIBRDKAFKA_REPO     where to clone the tag v$LIBRDKAFKA_VERSION from [librdkafka's public
#                       GitHub repository]; any git URL or local clone works
#   BMQ_LIBRDKAFKA_CACHE  build cache, one directory a version [~/.cache/bmq-librdkafka]
#   TESTS               test numbers to run, comma-separated [all]
#   RUN_ARGS            test-runner arguments [-p1 -Q -E -L: one test at a time, quick mode,
#                       no socket-emulation tests, no broker-less tests]
#   TEST_KAFKA_VERSION  the broker version the suite assumes [its own default, 2.4.0.0]
#
# The source is built once (./configure, make libs, make -C tests build) into the cache and
# reused; nothing of librdkafka is ever written into this repository. The broker is
# `bmq serve` with 4 partitions per auto-created topic (the suite's default scenario), on a
# free port of 127.0.0.1 and a temporary data directory, stopped when the script exits.
# Exit status: 0 when no test failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="$root/.venv/bin/python"
[ -x "$root/.venv/bin/bmq" ] || "$root/scripts/setup.sh" --tests

version="${LIBRDKAFKA_VERSION:-$("$py" -c 'import confluent_kafka; print(confluent_kafka.libversion()[0])')}"
repo="${LIBRDKAFKA_REPO:-https://github.com/confluentinc/librdkafka.git}"
cache="${BMQ_LIBRDKAFKA_CACHE:-$HOME/.cache/bmq-librdkafka}/v$version"
src="$cache/librdkafka"
run_args="${RUN_ARGS:--p1 -Q -E -L}"

# Build dependencies: a C/C++ tool chain and the codecs' headers, so that the library has
# the same features (gzip, lz4, zstd, TLS) as the one the wheel ships.
need=()
for pair in cc:gcc c++:g++ make:make pkg-config:pkg-config git:git; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
for pair in zlib:zlib1g-dev libzstd:libzstd-dev liblz4:liblz4-dev openssl:libssl-dev; do
  pkg-config --exists "${pair%%:*}" 2>/dev/null || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x "$src/tests/test-runner" ]; then
  echo "== building librdkafka v$version in $src (once; several minutes)"
  rm -rf "$src"
  mkdir -p "$cache"
  git -c advice.detachedHead=false clone -q --depth 1 --branch "v$version" "$repo" "$src"
  jobs="$(nproc)"
  (cd "$src" && ./configure --prefix="$cache/prefix" >"$cache/configure.log" 2>&1 \
     && make -j"$jobs" libs >"$cache/make-libs.log" 2>&1 \
     && make -j"$jobs" -C tests build >"$cache/make-tests.log" 2>&1) \
    || { echo "build failed: see the logs in $cache" >&2; exit 2; }
fi

work="$(mktemp -d)"
bmq_pid=""
cleanup() {
  if [ -n "$bmq_pid" ]; then
    kill "$bmq_pid" 2>/dev/null || true
    wait "$bmq_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
BMQ_NUM_PARTITIONS=4 BMQ_AUTO_CREATE_TOPICS_ENABLE=true \
  "$root/.venv/bin/bmq" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
  --log-level WARNING >"$work/bmq.log" 2>&1 &
bmq_pid=$!
"$py" - "$port" <<'EOF'
import socket, sys, time
deadline = time.monotonic() + 60
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("bmq serve did not start listening within 60 s")
        time.sleep(0.2)
EOF
echo "== bmq serve on 127.0.0.1:$port (data in $work/data), librdkafka v$version, args $run_args"

# The suite reads its client settings from this file; every line is passed to each client.
cat >"$work/test.conf" <<EOF
metadata.broker.list=127.0.0.1:$port
test.timeout.multiplier=2
EOF

log="$cache/last-run.log"
set +e
(cd "$src/tests" && RDKAFKA_TEST_CONF="$work/test.conf" TEST_REPORT="$work/report.json" \
   ./run-test.sh $run_args) >"$log" 2>&1
status=$?
set -e
cp "$work/bmq.log" "$cache/last-run-bmq.log"

# The runner's summary table: "| <test> | PASSED/FAILED/SKIPPED | duration | reason".
"$py" - "$log" <<'EOF'
import re, sys
text = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1], errors="replace").read())
rows = {}
for line in text.splitlines():
    m = re.match(r"\|\s*(\d{4}\S*)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING)\s*\|[^|]*\|\s*(.*)", line)
    if m:
        rows[m.group(1)] = (m.group(2), m.group(3).strip())
for state in ("FAILED", "RUNNING", "SKIPPED"):
    for name, (s, reason) in sorted(rows.items()):
        if s == state:
            print(f"{state:8} {name}: {reason}")
count = {s: sum(1 for v in rows.values() if v[0] == s) for s in ("PASSED", "FAILED", "SKIPPED")}
count["FAILED"] += sum(1 for v in rows.values() if v[0] == "RUNNING")
print(f"librdkafka suite: {count['PASSED']} passed, {count['FAILED']} failed, "
      f"{count['SKIPPED']} skipped")
EOF
echo "full log: $log (bmq's: $cache/last-run-bmq.log)"
exit $status
