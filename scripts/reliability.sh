#!/usr/bin/env bash
# Regenerates RELIABILITY.md: one row per family of fault, abuse, convergence, fuzzing and load
# cases (every-byte cuts, bit flips, syscall faults, SIGKILL rounds, convergence seeds, abuse,
# hostile files, full disk, load with restarts, each fuzzer), with the cases tried, how many
# were lost, corrupted, crashed or hung, the goal and whether it was met.
#   scripts/reliability.sh                  the goal scale: 1,000 kills, 10,000 convergence seeds,
#                                           10 minutes per fuzzer, 32 clients × 60 s, and the
#                                           PostgreSQL load: 3 relays, 8 clients × 30 s, a database
#                                           restart (hours: it prints an estimate first)
#   scripts/reliability.sh --quick          a small version of every row (about 20 minutes; its
#                                           PostgreSQL load run: 3 relays, 4 clients × 10 s, 2
#                                           kills, one database restart, about 40 s)
#   options: --out FILE (default RELIABILITY.md), --report-dir DIR (keep the evidence there;
#            default a temporary directory), --render-only DIR (write the report from DIR's
#            evidence without running anything). A report put together from goal-scale runs made
#            one by one: put their rows.jsonl lines and commands.tsv lines in DIR, write
#            "assembled" to DIR/mode and what was run to DIR/provenance.txt (one line each),
#            touch DIR/started older than the fuzz runs to include, then --render-only DIR.
# The evidence: tests and lnote-load call ReliabilityReport.record, which appends to
# $LNOTE_REPORT_DIR/rows.jsonl; scripts/fuzz.sh leaves Fuzz/runs/TARGET.json. The whole test
# suite runs once (scripts/test.sh) with LNOTE_REPORT_DIR set, so every family's tests report,
# including those of other families than the ones named here; a family nobody recorded shows
# "not run". Exit status 1 when a step failed (the report is still written).
# Knobs: LNOTE_FUZZ_SECONDS (seconds per fuzzer; 600 full; 0 skips fuzzing; --quick without it
# runs each fuzzer's fixed CI budget from a fixed seed, `scripts/fuzz.sh all --ci`),
# LNOTE_LOAD (arguments of scripts/load.sh), LNOTE_LOAD_PG (arguments of the PostgreSQL load run,
# scripts/load.sh --postgres ...; "skip" leaves it out), LNOTE_TEST_ARGS (more arguments for the test run,
# e.g. "--filter 'KillTests|FrameTests'" to run only some suites; the report names them).
set -uo pipefail
cd "$(dirname "$0")/.."

mode=full; out=RELIABILITY.md; dir=""; render_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick ;;
    --out) out="$2"; shift ;;
    --report-dir) dir="$2"; shift ;;
    --render-only) render_only="$2"; shift ;;
    *) echo "usage: scripts/reliability.sh [--quick] [--out FILE] [--report-dir DIR] [--render-only DIR]" >&2; exit 2 ;;
  esac
  shift
done

# The fuzz targets scripts/fuzz.sh knows, from its own list.
fuzz_targets="$(sed -n 's/^targets=(\(.*\))$/\1/p' scripts/fuzz.sh)"

render() {  # DIR MODE
  swift build --product lnote-reliability -Xswiftc -index-ignore-system-modules >&2 || return 1
  local commit
  commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  git diff --quiet HEAD -- . ':(exclude)RELIABILITY.md' 2>/dev/null || commit="$commit (with uncommitted changes)"
  "$(swift build --show-bin-path)/lnote-reliability" --rows "$1" --fuzz-runs Fuzz/runs --fuzz-targets "$fuzz_targets" \
    --mode "$2" --commit "$commit" --out "$out" --since "$1/started"
}

if [ -n "$render_only" ]; then
  render "$render_only" "$(cat "$render_only/mode" 2>/dev/null || echo "$mode")"
  exit $?
fi

if [ -z "$dir" ]; then dir="$(mktemp -d)"; fi
mkdir -p "$dir"
: > "$dir/rows.jsonl"; : > "$dir/commands.tsv"
echo "$mode" > "$dir/mode"
touch "$dir/started"  # fuzz runs older than this are not this run's
export LNOTE_REPORT_DIR="$dir"
status=0
note() { printf '%s\t%s\n' "$1" "$2" >> "$dir/commands.tsv"; }
step() {  # run a step, remember a failure, go on
  echo "reliability: $*" >&2
  "$@" || { echo "reliability: FAILED: $*" >&2; status=1; }
}
test_families=("every-byte cuts" "bit flips" "syscall faults" "sigkill rounds" "convergence seeds" abuse files "full disk")
extra="${LNOTE_TEST_ARGS:-}"

if [ "$mode" = quick ]; then
  fuzz_seconds="${LNOTE_FUZZ_SECONDS:---ci}"
  load_args=(${LNOTE_LOAD:---clients 4 --seconds 20 --kills 3})
  # The PostgreSQL load run is left to the test suite here: LoadSmokeTests runs it (2 relay
  # processes on one database, kills, a database restart, the same ledger checks), which
  # keeps CI within its budget. LNOTE_LOAD_PG="--postgres --relays 3 --clients 4 --seconds 10
  # --kills 2 --db-restart" (about 40 s) adds the longer run.
  load_pg_args=(${LNOTE_LOAD_PG:-skip})
  for f in "${test_families[@]}"; do note "$f" "LNOTE_REPORT_DIR=DIR scripts/test.sh${extra:+ $extra}"; done
  note "load with restarts" "scripts/load.sh ${load_args[*]}"
  [ "${load_pg_args[*]}" = skip ] || note "load with restarts" "scripts/load.sh ${load_pg_args[*]}"
  echo "reliability: quick run (test suite, fuzzers: $fuzz_seconds, load ${load_args[*]}); about 20 minutes on 2 cores" >&2
  eval "step scripts/test.sh $extra"
else
  fuzz_seconds="${LNOTE_FUZZ_SECONDS:-600}"
  load_args=(${LNOTE_LOAD:---clients 32 --seconds 60 --kills 10})
  load_pg_args=(${LNOTE_LOAD_PG:---postgres --relays 3 --clients 8 --seconds 30 --db-restart})
  n_fuzz=$(echo $fuzz_targets | wc -w)
  minutes=$(( 10 + 60 + 20 + n_fuzz * fuzz_seconds / 60 + 10 + 5 ))
  echo "reliability: full run; estimate on 2 cores: test suite ~10 min, 10,000 convergence seeds (+5,000 hostile) ~60 min," \
       "1,000 SIGKILL rounds ~20 min, fuzzing $n_fuzz × $fuzz_seconds s plus its build ~$(( n_fuzz * fuzz_seconds / 60 + 10 )) min," \
       "load ~5 min (SQLite, then PostgreSQL): about $(( minutes / 60 )) h $(( minutes % 60 )) min" >&2
  skip='LnoteReplicationTests\.ConvergenceTests|LnoteStoreTests\.KillTests'
  for f in "${test_families[@]}"; do
    note "$f" "LNOTE_REPORT_DIR=DIR LNOTE_SYNC_CRASH_STRIDE=1 scripts/test.sh --skip '$skip'${extra:+ $extra}"
  done
  note "convergence seeds" "LNOTE_SEEDS=10000 swift test --skip-build --no-parallel --filter 'LnoteReplicationTests\.ConvergenceTests'"
  note "sigkill rounds" "LNOTE_KILL_ROUNDS=500 swift test --skip-build --no-parallel --filter 'LnoteStoreTests\.KillTests'"
  note "load with restarts" "scripts/load.sh ${load_args[*]}"
  [ "${load_pg_args[*]}" = skip ] || note "load with restarts" "scripts/load.sh ${load_pg_args[*]}"
  LNOTE_SYNC_CRASH_STRIDE=1 eval "step scripts/test.sh --skip '$skip' $extra"
  LNOTE_SEEDS=10000 step swift test --skip-build --no-parallel --filter 'LnoteReplicationTests\.ConvergenceTests'
  LNOTE_KILL_ROUNDS=500 step swift test --skip-build --no-parallel --filter 'LnoteStoreTests\.KillTests'
fi
if [ "$fuzz_seconds" != 0 ]; then
  note fuzz "scripts/fuzz.sh all $fuzz_seconds"
  step scripts/fuzz.sh all "$fuzz_seconds"
else
  echo "reliability: fuzzing skipped (LNOTE_FUZZ_SECONDS=0)" >&2
fi
step scripts/load.sh "${load_args[@]}"
[ "${load_pg_args[*]}" = skip ] || step scripts/load.sh "${load_pg_args[@]}"
step render "$dir" "$mode"
echo "reliability: evidence in $dir; report in $out" >&2
if [ -s "$dir/failures.txt" ]; then
  # Repeated here, at the end, where a log cut to its last lines still shows it.
  echo "reliability: what failed, as the failing steps reported it:" >&2
  cat "$dir/failures.txt" >&2
fi
if [ "$status" -ne 0 ]; then echo "reliability: FAILED (see the lines starting with 'reliability: FAILED' above)" >&2; fi
exit $status
