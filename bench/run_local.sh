#!/usr/bin/env bash
# Benchmark a throw-away local `bmq serve`: starts it on a free port with a
# temporary data dir, runs python -m bench against it and stops it again.
# Defaults are the README's set-up (1 KiB messages, acks=all, 8 partitions,
# produce then consume); any option of `python -m bench` can be added or
# overridden, e.g.
#   bench/run_local.sh --messages 500000 --producers 2 --json out.json
#   bench/run_local.sh --mode e2e --rate 10 --duration 30
#   bench/run_local.sh --profile-server /tmp/broker.svg   # needs py-spy
# PYTHON selects the interpreter (default: the project's .venv, else python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
cd "$root"
exec "$python" -m bench --spawn-server --message-size 1024 --acks all --partitions 8 \
  --mode both "$@"
