#!/usr/bin/env bash
# Runs the benchmark in release mode; arguments are passed on (see BENCHMARKS.md):
#   scripts/bench.sh                      the full run (a few minutes)
#   scripts/bench.sh --quick              a smoke test (under a minute)
#   scripts/bench.sh --json out.json      also write the figures as JSON
#   scripts/bench.sh --only 15,16         the relay on PostgreSQL (issue 17): each case starts and
#                                         removes a throwaway PostgreSQL cluster (needs the server
#                                         binaries: scripts/setup.sh --deps-only)
set -euo pipefail
cd "$(dirname "$0")/.."
# Cases 10, 15 and 16 run the lnote binary of the same build as separate processes.
swift build -c release --product lnote
exec swift run -c release lnote-bench "$@"
