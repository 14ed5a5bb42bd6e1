#!/usr/bin/env bash
# Runs librdkafka's own integration test suite (its tests/ directory, quick mode, broker tests
# only) against a throw-away `bmq serve`, and prints what passed, failed and was skipped.
#
#   scripts/librdkafka_suite.sh                 # every quick broker test (about 15 min; the
#                                               # first run builds librdkafka: 10 more)
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
#   TEST_KAFKA_VERSION  the broker version the suite assumes [4.0.0: BMQ answers as Kafka 4
#                       does, so the suite leaves out what Kafka 4 removed (0052's and 0092's
#                       message format v0/v1 producers) and expects Kafka 4's error codes
#                       (0081); the suite's own default, 2.4.0.0, expects a 2.4 broker's]
#
# The source is built once (./configure, make libs, make -C tests build) into the cache and
# reused; nothing of librdkafka is ever written into this repository. The broker is
# `bmq serve` with 4 partitions per auto-created topic (the suite's default scenario), on a
# free port of 127.0.0.1 and a temporary data directory, stopped when the script exits.
# Tests that call Kafka's own tools (kafka-topics.sh, kafka-acls.sh) or its Java client (0098)
# run the real ones, Kafka 4.4's from Maven Central (scripts/kafka.sh), and the runner is
# started again for the tests it never started when it gave up after a timeout.
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
export TEST_KAFKA_VERSION="${TEST_KAFKA_VERSION:-4.0.0}"

# Build dependencies: a C/C++ tool chain and the codecs' headers, so that the library has
# the same features (gzip, lz4, zstd, TLS) as the one the wheel ships.
need=()
for pair in cc:gcc c++:g++ make:make pkg-config:pkg-config git:git; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
# RapidJSON: without it the tests that read the statistics JSON (0053, 0098, 0101, 0110) skip.
for pair in zlib:zlib1g-dev libzstd:libzstd-dev liblz4:liblz4-dev openssl:libssl-dev \
            RapidJSON:rapidjson-dev; do
  pkg-config --exists "${pair%%:*}" 2>/dev/null || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The stamp names what the build was configured with: a cache from before a new dependency
# is rebuilt instead of silently skipping the tests that need it.
stamp="built with rapidjson"
if [ "$(cat "$cache/build.ok" 2>/dev/null)" != "$stamp" ] || [ ! -x "$src/tests/test-runner" ]; then
  echo "== building librdkafka v$version in $src (once; several minutes)"
  rm -rf "$src"
  mkdir -p "$cache"
  git -c advice.detachedHead=false clone -q --depth 1 --branch "v$version" "$repo" "$src"
  jobs="$(nproc)"
  (cd "$src" && ./configure --prefix="$cache/prefix" >"$cache/configure.log" 2>&1 \
     && make -j"$jobs" libs >"$cache/make-libs.log" 2>&1 \
     && make -j"$jobs" -C tests build >"$cache/make-tests.log" 2>&1) \
    || { echo "build failed: see the logs in $cache" >&2; exit 2; }
  echo "$stamp" >"$cache/build.ok"
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
# ACLs on, open to all until an ACL says otherwise (the suite's ACL tests add DENY ACLs with
# kafka-acls.sh and expect them enforced; every other test runs as without an authorizer).
BMQ_NUM_PARTITIONS=4 BMQ_AUTO_CREATE_TOPICS_ENABLE=true \
  BMQ_AUTHORIZER_CLASS_NAME=bmq BMQ_ALLOW_EVERYONE_IF_NO_ACL_FOUND=true \
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

# Some tests run Kafka's own tools from $KAFKA_PATH/bin (kafka-topics.sh, kafka-acls.sh): Kafka
# 4.4's, each bin/ script a wrapper of scripts/kafka.sh. They take --bootstrap-server $BROKERS,
# which the suite passes to brokers of 3.0 and later (TEST_KAFKA_VERSION); Kafka 4's tools have
# no --zookeeper. 0098 compiles its Java producer against $KAFKA_PATH/libs/kafka-clients-*.jar
# and runs it with bin/kafka-run-class.sh.
"$root/scripts/kafka.sh" bin "$work/kafka"
# Told it talks to a broker before 3.0 (TEST_KAFKA_VERSION=2.4.0, for the message format v0/v1
# producers of 0052 and 0092), the suite runs kafka-topics.sh --zookeeper $ZK_ADDRESS, which
# Kafka 4's tool lacks and `bmq serve` (no ZooKeeper) could not answer: the same command is
# run with --bootstrap-server, as Kafka's tool takes it since 2.2 (KIP-377).
export ZK_ADDRESS="127.0.0.1:$port"
mv "$work/kafka/bin/kafka-topics.sh" "$work/kafka/bin/kafka-topics-bootstrap.sh"
cat >"$work/kafka/bin/kafka-topics.sh" <<'EOF'
#!/usr/bin/env bash
args=()
for arg in "$@"; do
  [ "$arg" = --zookeeper ] && arg=--bootstrap-server
  args+=("$arg")
done
exec "$(dirname "$0")/kafka-topics-bootstrap.sh" "${args[@]}"
EOF
chmod +x "$work/kafka/bin/kafka-topics.sh"

# The runner gives up on every test still to run when one times out: it is started again for
# the tests that did not start, until each has a result. Then the summary.
log="$cache/last-run.log"
: >"$log"
set +e
RDKAFKA_TEST_CONF="$work/test.conf" KAFKA_PATH="$work/kafka" BROKERS="127.0.0.1:$port" \
  LIBRDKAFKA_VERSION="$version" \
  "$py" - "$src/tests" "$log" "$run_args" "${TESTS:-}" <<'EOF'
import os, re, subprocess, sys
tests_dir, log_path, run_args, only = sys.argv[1:5]
row = re.compile(r"\|\s*(\d{4}\S*)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|[^|]*\|\s*(.*)")
results: dict[str, tuple[str, str]] = {}
# Manual tests (8000_idle runs forever) never start without TESTS: never restart them either.
table = open(os.path.join(tests_dir, "test.c"), errors="replace").read()
manual = set(re.findall(r"_TEST\((\d{4})\w*,\s*[^,)]*TEST_F_MANUAL", table))
todo = only
while True:
    env = dict(os.environ, TESTS=todo) if todo else dict(os.environ)
    # The summary table is read from stdout alone (the tests' progress lines on stderr would
    # cut into its rows), line-buffered: the runner aborts when a test leaves client threads
    # behind, and a block-buffered summary would be lost with it.
    with open(log_path, "ab") as log:
        run = subprocess.run(["stdbuf", "-oL", "./run-test.sh", *run_args.split()],
                             cwd=tests_dir, env=env,
                             stdout=subprocess.PIPE, stderr=log)
        log.write(run.stdout)
    text = run.stdout.decode(errors="replace")
    for line in re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines():
        m = row.match(line)
        if m and m.group(1)[:4] not in manual and (m.group(2) != "DNS"
                                                   or m.group(1) not in results):
            results[m.group(1)] = (m.group(2), m.group(3).strip())
    left = sorted({name[:4] for name, (state, _) in results.items() if state == "DNS"})
    if run.returncode == 0 or not left or ",".join(left) == todo:
        break  # done, or a round that started nothing new (the runner itself is broken)
    todo = ",".join(left)
    print(f"(the runner stopped early; starting it again for {len(left)} tests)", flush=True)
# The tests -L (local, broker-less) and -E (socket emulation) leave out are no broker tests.
left_out = {n for n, (s, why) in results.items() if s == "SKIPPED" and "negative test flags" in why}
for state in ("FAILED", "RUNNING", "DNS", "SKIPPED"):
    for name, (s, reason) in sorted(results.items()):
        if s == state and name not in left_out:
            print(f"{state:8} {name}: {reason}")
count = {s: sum(1 for n, v in results.items() if v[0] == s and n not in left_out)
         for s in ("PASSED", "FAILED", "SKIPPED", "RUNNING", "DNS")}
failed = count["FAILED"] + count["RUNNING"] + count["DNS"]
print(f"({len(left_out)} local or socket-emulation tests left out by {run_args})")
print(f"librdkafka v{os.environ['LIBRDKAFKA_VERSION']} suite against BMQ: "
      f"{count['PASSED']} passed, {failed} failed, {count['SKIPPED']} skipped")
sys.exit(1 if failed else 0)
EOF
status=$?
set -e
cp "$work/bmq.log" "$cache/last-run-bmq.log"
echo "full log: $log (bmq's: $cache/last-run-bmq.log)"
exit $status
