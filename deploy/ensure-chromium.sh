#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the console's browser tests (test/console/)
# when it is missing. Browser builds cannot be downloaded by playwright here, so the tests
# drive this binary through playwright-core's executablePath. Idempotent and quick when present.
set -euo pipefail

CHROMIUM_PATH="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$CHROMIUM_PATH" ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "ensure-chromium: $CHROMIUM_PATH is missing and this is not root; install it with: apt-get install -y chromium" >&2
    exit 1
  fi
fi

echo "ensure-chromium: installing Debian's chromium package (once)" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || {
  $SUDO apt-get update >/dev/null
  $SUDO apt-get install -y --no-install-recommends chromium >/dev/null
}
[ -x "$CHROMIUM_PATH" ] || { echo "ensure-chromium: chromium installed but $CHROMIUM_PATH is not there" >&2; exit 1; }
