#!/usr/bin/env bash
# Long runs kept out of CI:
#   scripts/soak.sh merge [SEEDS] [FIRST]   the merge property test on SEEDS seeds (default 100000)
#   scripts/soak.sh crash                   1,000 SIGKILL rounds against the journal writer
#   scripts/soak.sh peer                    8 clients x 50 syncs at once against one peer server
# A failing merge seed is printed with the command that reruns it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  merge)
    LNOTE_SEEDS="${2:-100000}" LNOTE_SEED="${3:-1}" swift test --filter ConvergenceTests ;;
  crash)
    LNOTE_SOAK=1 swift test --filter KillTests ;;
  peer)
    LNOTE_SOAK=1 swift test --filter PeerServerConcurrencyTests ;;
  *)
    echo "usage: scripts/soak.sh merge [SEEDS] [FIRST] | crash | peer" >&2; exit 2 ;;
esac
