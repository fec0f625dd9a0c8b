#!/usr/bin/env bash
# Fuzzes one decoder (or the merge) with libFuzzer and AddressSanitizer.
#   scripts/fuzz.sh TARGET SECONDS     one target for SECONDS, exploring (a new random seed each
#                                      run, printed: rerun with LNOTE_FUZZ_SEED=N)
#   scripts/fuzz.sh all SECONDS        each target in turn
#   scripts/fuzz.sh TARGET --ci        a fixed seed and a fixed number of inputs (the target's
#   scripts/fuzz.sh all --ci           CI budget below, about 10-30 s each on 2 cores), with Swift's
#                                      hashing made deterministic: a bounded run that does not
#                                      depend on the machine's speed. It is not the same path on
#                                      every machine (libFuzzer's choices also follow the order
#                                      in which the file system lists the corpus): a crash it
#                                      finds is a real bug, printed with its input so that it can
#                                      be kept and replayed. Long exploration is the timed form's.
# Builds lnote-fuzz with -sanitize=fuzzer,address (in .build/fuzz, apart from the normal
# build), checks that the binary really is instrumented, runs from the seed corpus in
# Fuzz/corpus/TARGET (new inputs go to a temporary directory, not the repository), and keeps
# any crashing input in Fuzz/crashes/TARGET/: commit it, and FuzzCorpusTests replays it on
# every test run from then on. A failed run prints libFuzzer's report and each new input in
# base64 on stderr (and appends the same to $LNOTE_REPORT_DIR/failures.txt when that is set,
# which scripts/reliability.sh prints again at its end), so that a crash found on a machine
# that keeps nothing can still be reproduced.
#
# Each run writes one line of JSON to Fuzz/runs/TARGET.json, which scripts/reliability.sh
# reads:
#   {"target":"op","seconds":180,"execs":123456,"crashes":0,"corpus":97,"seed":42,"commit":"…","date":"…"}
# seconds: the time asked for (with --ci: the time taken); execs: inputs run (libFuzzer's
# number_of_executed_units); crashes: inputs this run wrote to Fuzz/crashes/TARGET (crash,
# leak, timeout, out of memory); corpus: inputs in the corpus at the end (libFuzzer's last
# `corp:`); seed: libFuzzer's -seed; commit: HEAD when the binary was built, with "-dirty" when
# the worktree had changes (other than Fuzz/runs, which runs rewrite); date: the end of the run, UTC.
# Exits 1 when the run found a crash (with `all`: when any did, after running every target).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(frame op snapshot points-v2 checkpoint sync-request sync-response import merge merge-ops log
         document-json manifest-json replica-json devices-json quarantine-json)
# Inputs per target in --ci mode (each about 10-30 s here; the merge targets run whole
# scenarios). Trimmed from 200,000 when the web view's browser tests joined CI, which must stay
# under 30 minutes: the long runs are `scripts/fuzz.sh TARGET SECONDS`.
ci_runs() {
  case "$1" in
    merge) echo 2000 ;;
    merge-ops) echo 25000 ;;
    import) echo 50000 ;;
    log) echo 15000 ;;  # two log reads and the listing scan's oracle an input, on seeds of real pen frames: 30,000 took 61 s
    *) echo 120000 ;;
  esac
}
ci_seed=20261201
target="${1:-}"; seconds="${2:-30}"
if [ "$target" = all ]; then
  status=0
  for t in "${targets[@]}"; do "$0" "$t" "$seconds" || status=1; done
  exit "$status"
fi
case " ${targets[*]} " in *" $target "*) ;; *) echo "usage: scripts/fuzz.sh {${targets[*]}|all} SECONDS" >&2; exit 2 ;; esac
ci=0
if [ "$seconds" = --ci ]; then
  ci=1
elif [[ ! "$seconds" =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: SECONDS must be a whole number (or --ci)" >&2; exit 2
fi

# The commit the binary is built from (what the summary names), "-dirty" with local changes.
commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no -- . ':(exclude)Fuzz/runs')" ]; then commit="$commit-dirty"; fi
fail() {  # MESSAGE: say it, and leave it for reliability.sh's summary
  echo "fuzz.sh: $target FAILED: $1" >&2
  if [ -n "${LNOTE_REPORT_DIR:-}" ]; then echo "fuzz.sh: $target FAILED: $1" >> "$LNOTE_REPORT_DIR/failures.txt"; fi
  exit 1
}
blog="$(mktemp)"
if ! swift build --scratch-path .build/fuzz --product lnote-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DLNOTE_FUZZ -Xswiftc -use-ld=lld > "$blog" 2>&1; then
  cat "$blog" >&2
  fail "the instrumented build failed: $(grep -m 3 -E 'error' "$blog" | tr '\n' ' ')"
fi
cat "$blog" >&2; rm -f "$blog"
bin=".build/fuzz/debug/lnote-fuzz"
# Instrumented code has libFuzzer's inline 8-bit counters (the __sancov_cntrs section).
if [ "$(nm "$bin" | grep -c '__start___sancov_cntrs')" -eq 0 ]; then
  fail "$bin has no coverage instrumentation (no __sancov_cntrs section)"
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
work="$tmp/corpus"; mkdir "$work"
crashes="Fuzz/crashes/$target"
mkdir -p "$crashes" "Fuzz/corpus/$target" Fuzz/runs
ls -A "$crashes" | sort > "$tmp/before"
if [ "$ci" = 1 ]; then
  seed="$ci_seed"; budget=(-runs="$(ci_runs "$target")")
  export SWIFT_DETERMINISTIC_HASHING=1
  echo "fuzz.sh: $target, $(ci_runs "$target") inputs from seed $seed (--ci)" >&2
else
  seed="${LNOTE_FUZZ_SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}"; budget=(-max_total_time="$seconds")
  echo "fuzz.sh: $target for ${seconds}s from seed $seed (rerun with LNOTE_FUZZ_SEED=$seed)" >&2
fi
started=$(date +%s)
set +e
LNOTE_FUZZ_TARGET="$target" "$bin" "$work" "Fuzz/corpus/$target" \
  "${budget[@]}" -seed="$seed" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$crashes/" -print_final_stats=1 > "$tmp/log" 2>&1
fuzzer=$?
set -e
if [ "$ci" = 1 ]; then seconds=$(( $(date +%s) - started )); fi
tail -n 25 "$tmp/log" >&2
# The start-up line must show coverage counters: an uninstrumented target shows none.
if ! grep -q 'INITED cov: ' "$tmp/log"; then
  fail "libFuzzer did not report coverage (no 'INITED cov:' line); exit status $fuzzer; its last lines: $(tail -n 5 "$tmp/log" | tr '\n' ' ')"
fi
found=$(comm -13 "$tmp/before" <(ls -A "$crashes" | sort) | wc -l)
execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$tmp/log" | tail -n 1)
corpus=$(grep -o 'corp: [0-9]*' "$tmp/log" | tail -n 1 | grep -o '[0-9]*$' || true)
printf '{"target":"%s","seconds":%d,"execs":%d,"crashes":%d,"corpus":%d,"seed":%d,"commit":"%s","date":"%s"}\n' \
  "$target" "$seconds" "${execs:-0}" "$found" "${corpus:-0}" "$seed" "$commit" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "Fuzz/runs/$target.json"
cat "Fuzz/runs/$target.json" >&2
if [ "$found" -gt 0 ] || [ "$fuzzer" -ne 0 ]; then
  {
    echo "fuzz.sh: $target FAILED: $found new input(s) in $crashes/, libFuzzer exit status $fuzzer, seed $seed"
    # libFuzzer's and the sanitizer's own account: the error, the stack, the summary.
    grep -n -E '==[0-9]+==|ERROR|SUMMARY|ALARM|Fatal error|deadly signal|out-of-memory|timeout|    #[0-9]+ ' "$tmp/log" | head -n 60
    comm -13 "$tmp/before" <(ls -A "$crashes" | sort) | while read -r f; do
      size=$(wc -c < "$crashes/$f")
      echo "fuzz.sh: $crashes/$f ($size bytes), base64:"
      if [ "$size" -le 16384 ]; then base64 -w 0 "$crashes/$f"; echo; else echo "(too large to print)"; fi
    done
  } > "$tmp/failure"
  cat "$tmp/failure" >&2
  if [ -n "${LNOTE_REPORT_DIR:-}" ]; then cat "$tmp/failure" >> "$LNOTE_REPORT_DIR/failures.txt"; fi
  exit 1
fi
