#!/usr/bin/env bash
# Runs the benchmark in release mode; arguments are passed on (see BENCHMARKS.md):
#   scripts/bench.sh                      the full run (a few minutes)
#   scripts/bench.sh --quick              a smoke test (under a minute)
#   scripts/bench.sh --json out.json      also write the figures as JSON
set -euo pipefail
cd "$(dirname "$0")/.."
# Case 10 runs the lnote binary of the same build as separate processes.
swift build -c release --product lnote
exec swift run -c release lnote-bench "$@"
