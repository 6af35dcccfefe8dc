#!/usr/bin/env bash
# The README's test command: installs what is missing, then runs the whole mocha suite against a
# private Redis and store (FerretDB v2 on PostgreSQL + DocumentDB) that the tests start on free ports (never a server you already run).
# Extra arguments go to mocha (e.g. `npm test -- --grep idempotency`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
ensure_test_servers
CHROMIUM_BIN="$(ensure_chromium)"
export CHROMIUM_BIN
export TEST_SUITE_NAME="${TEST_SUITE_NAME:-tests}"
exec npx mocha "$@"
