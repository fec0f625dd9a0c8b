#!/usr/bin/env bash
# Load with restarts: K clients sync random edits with one `lnote relay` (a child process on
# 127.0.0.1, SQLite database in a temporary directory) for T seconds while the relay is
# SIGKILLed N times at random moments and restarted on the same database and port; then
# every client syncs until nothing moves and the run is checked (see lnote-load --help).
#   scripts/load.sh                                    4 clients × 20 s, 3 kills, a random seed
#   scripts/load.sh --clients 32 --seconds 60 --kills 10 [--seed S]
#   scripts/load.sh --postgres --relays 3 --clients 8 --seconds 30
#                       the PostgreSQL soak (issue 17): a throwaway PostgreSQL cluster started
#                       here (initdb as the postgres user, Unix socket only, removed at the end),
#                       3 `lnote relay --postgres` processes on its one database, each client's
#                       every sync round through one of them at random, one relay SIGKILLed and
#                       restarted every 4 s or so (one at a time; --kills N to choose)
#   ... --db-restart    also stop PostgreSQL once mid-run (pg_ctl stop -m fast, a pause, start):
#                       rounds overlapping it may fail, every check must still hold
# After each kill (and the database restart) every acknowledged operation must be in the database.
# Prints the seed (rerun one with --seed), lost / unexpected operations, divergent clients,
# sync latency percentiles, rounds, kills and failures while the relay was down (expected).
# Exit status 1 on any loss, unexpected operation, divergence, crash or hang. With
# LNOTE_REPORT_DIR set, appends its row to $LNOTE_REPORT_DIR/rows.jsonl (RELIABILITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# Debug build, the one the tests use (no second full build); the relay is the lnote binary beside it.
swift build --product lnote -Xswiftc -index-ignore-system-modules >&2
swift build --product lnote-load -Xswiftc -index-ignore-system-modules >&2
bin="$(swift build --show-bin-path)"
exec "$bin/lnote-load" --lnote "$bin/lnote" "$@"
