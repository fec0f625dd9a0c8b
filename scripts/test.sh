#!/usr/bin/env bash
# Runs the whole test suite (XCTest and Swift Testing) in one invocation.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests -Xswiftc -index-ignore-system-modules
swift test --skip-build --parallel "$@"
