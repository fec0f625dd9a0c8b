#!/usr/bin/env bash
# Fuzzes one decoder (or the merge) with libFuzzer and AddressSanitizer.
#   scripts/fuzz.sh TARGET SECONDS     targets: frame op snapshot checkpoint sync-request sync-response import merge
#   scripts/fuzz.sh all SECONDS        each target in turn
# Builds lnote-fuzz with -sanitize=fuzzer,address (in .build/fuzz, apart from the normal
# build), checks that the binary really is instrumented, runs from the seed corpus in
# Fuzz/corpus/TARGET (new inputs go to a temporary directory, not the repository), and keeps
# any crashing input in Fuzz/crashes/TARGET/: commit it, and FuzzCorpusTests replays it on
# every test run from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"; seconds="${2:-30}"
targets=(frame op snapshot checkpoint sync-request sync-response import merge)
if [ "$target" = all ]; then
  for t in "${targets[@]}"; do "$0" "$t" "$seconds"; done
  exit 0
fi
case " ${targets[*]} " in *" $target "*) ;; *) echo "usage: scripts/fuzz.sh {${targets[*]}|all} SECONDS" >&2; exit 2 ;; esac

swift build --scratch-path .build/fuzz --product lnote-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DLNOTE_FUZZ -Xswiftc -use-ld=lld >&2
bin=".build/fuzz/debug/lnote-fuzz"
# Instrumented code has libFuzzer's inline 8-bit counters (the __sancov_cntrs section).
if [ "$(nm "$bin" | grep -c '__start___sancov_cntrs')" -eq 0 ]; then
  echo "fuzz.sh: $bin has no coverage instrumentation (no __sancov_cntrs section)" >&2
  exit 1
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "Fuzz/crashes/$target" "Fuzz/corpus/$target"
echo "fuzz.sh: $target for ${seconds}s" >&2
LNOTE_FUZZ_TARGET="$target" "$bin" "$work" "Fuzz/corpus/$target" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="Fuzz/crashes/$target/" -print_final_stats=1 2>&1 | tail -n 25
