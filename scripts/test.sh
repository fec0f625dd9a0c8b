#!/usr/bin/env bash
# Runs the whole test suite (XCTest and Swift Testing) in one invocation.
# When a test fails and $LNOTE_REPORT_DIR is set (scripts/reliability.sh), the failure lines
# (Swift Testing's ✘ lines, XCTest's "error:" lines, fatal errors) are also appended to
# $LNOTE_REPORT_DIR/failures.txt, which reliability.sh prints again at its end.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests -Xswiftc -index-ignore-system-modules
# Tests run one at a time: Swift's cooperative pool has one thread per core (two here), and
# CPU-heavy tests running side by side starve the async waits of the network tests.
if [ -z "${LNOTE_REPORT_DIR:-}" ]; then
  exec swift test --skip-build --no-parallel "$@"
fi
log="$(mktemp)"; trap 'rm -f "$log"' EXIT
set +e
swift test --skip-build --no-parallel "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  {
    echo "test.sh: the test run failed (exit status $status):"
    grep -E '✘|error: |Fatal error' "$log" | head -n 80 || true
    # A test process killed by a signal prints no ✘ line for the test that was running: name the
    # tests started last, the backtracer's crash header, and the crashed thread's frames (the
    # backtracer lists every thread, the crashed one in its place among them).
    if grep -qE 'unexpected signal|💣|Program crashed' "$log"; then
      echo "test.sh: the last tests started before the process died:"
      grep -E '^◇ (Test|Suite) .* started' "$log" | tail -n 4 || true
      grep -m 2 -E '💣|Program crashed' "$log" || true
      grep -A 30 -E '^Thread [0-9]+ .*crashed:' "$log" | head -n 40 || true
    fi
  } >> "$LNOTE_REPORT_DIR/failures.txt"
fi
exit "$status"
