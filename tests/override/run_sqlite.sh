#!/usr/bin/env bash
# sqlite3: builds a database of a few hundred thousand rows with indexes,
# updates and deletes, vacuums, and runs PRAGMA integrity_check, with and
# without strata; the databases' query results must be identical.
source "$(dirname "$0")/preload_common.sh"
SQL="$(dirname "$0")/../programs/sqlite_workload.sql"
require_command sqlite3 sqlite3

sqlite3 "$WORK/plain.db" <"$SQL" >"$WORK/plain.txt"
run_preloaded_with_proof sqlite3 "$WORK/strata.db" <"$SQL" >"$WORK/strata.txt"
check_preload_proof "sqlite3"
grep -qx "integrity_check: ok" "$WORK/strata.txt" || fail "sqlite3 integrity check failed with strata"
same_output "sqlite3 workload" "$WORK/plain.txt" "$WORK/strata.txt"
# The database written with strata reads back correctly without it.
echo "PRAGMA integrity_check;" | sqlite3 "$WORK/strata.db" | grep -qx ok || fail "database written under strata is corrupt"
echo "PASS"
