#!/usr/bin/env bash
# Runs the whole test suite (XCTest and Swift Testing) in one invocation.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests -Xswiftc -index-ignore-system-modules
# Tests run one at a time: Swift's cooperative pool has one thread per core (two here), and
# CPU-heavy tests running side by side starve the async waits of the network tests.
swift test --skip-build --no-parallel "$@"
