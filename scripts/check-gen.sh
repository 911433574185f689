#!/usr/bin/env bash
# Fails when the committed generated code differs from what `npm run gen` produces.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/gen.sh
if ! git diff --quiet --exit-code -- proto/gen openapi/gen || [ -n "$(git status --porcelain -- proto/gen openapi/gen)" ]; then
  echo "generated code is out of date: run 'npm run gen' and commit the result" >&2
  git status --short -- proto/gen openapi/gen >&2
  exit 1
fi
echo "generated code is up to date"
