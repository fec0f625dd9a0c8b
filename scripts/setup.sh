#!/usr/bin/env bash
# Installs what lnote needs on a Debian machine (apt packages when missing) and builds it.
#   scripts/setup.sh              install, build (release) and run the two-machine demo
#   scripts/setup.sh --deps-only  install the system packages only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(pkg-config libsqlite3-dev libcurl4-openssl-dev libmicrohttpd-dev zlib1g-dev libssl-dev openssl postgresql libpq-dev
          libcairo2-dev libturbojpeg0-dev libxml2-dev poppler-utils zsh fish
          chromium-headless-shell)  # the web view's browser tests (Tests/LnoteWebViewTests)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ "${1:-}" = "--deps-only" ] && exit 0

swift build -c release --product lnote
swift build -c release --product two-machines
bin="$(swift build -c release --show-bin-path)"
echo "setup: built $bin/lnote; running the two-machine sync demo" >&2
exec "$bin/two-machines" "$@"
