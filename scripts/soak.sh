#!/usr/bin/env bash
# Long runs kept out of CI:
#   scripts/soak.sh merge [SEEDS] [FIRST]   the merge property test on SEEDS seeds (default 100000)
#   scripts/soak.sh crash                   1,000 SIGKILL rounds against the journal writer
# A failing merge seed is printed with the command that reruns it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  merge)
    LNOTE_SEEDS="${2:-100000}" LNOTE_SEED="${3:-1}" swift test --filter ConvergenceTests ;;
  crash)
    LNOTE_SOAK=1 swift test --filter KillTests ;;
  *)
    echo "usage: scripts/soak.sh merge [SEEDS] [FIRST] | crash" >&2; exit 2 ;;
esac
