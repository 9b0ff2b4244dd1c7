#!/usr/bin/env bash
# Builds the approvals console (console/) into console/dist, which the service serves at
# /console. Skips the build when console/dist is newer than every source file, so calling it
# from `npm start` and `npm test` costs nothing after the first time. FORCE=1 always builds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

stamp=console/dist/index.html
if [ "${FORCE:-0}" != "1" ] && [ -f "$stamp" ]; then
  newer=$(find console/src console/index.html console/vite.config.ts console/tsconfig.json package-lock.json \
    -newer "$stamp" -print -quit 2>/dev/null || true)
  if [ -z "$newer" ]; then
    exit 0
  fi
fi

echo "build-console: building console/ into console/dist" >&2
npx --no-install tsc -p console/tsconfig.json
npx --no-install vite build --config console/vite.config.ts --logLevel warn
