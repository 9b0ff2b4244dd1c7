#!/usr/bin/env bash
# Installs the npm dependencies when they are missing or older than package-lock.json,
# so `npm start` and `npm test` work straight after cloning.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "ensure-deps: installing npm dependencies (npm ci)"
  npm ci --no-audit --no-fund
fi
