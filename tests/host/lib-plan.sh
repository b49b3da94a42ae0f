#!/usr/bin/env bash
# Self-test of tests/vm/lib.sh's bookkeeping (host-side, no VM): a suite
# that runs fewer tests than its t_plan declares must fail even when every
# test it ran passed; one that runs them all (T_ONLY's skips included)
# passes; a failed test fails the summary.
set -uo pipefail
lib=$(cd "$(dirname "$0")/../vm" && pwd)/lib.sh
bad=0
# lib.sh's nap FIFOs go here, not in /tmp.
TMPDIR=$(mktemp -d)
export TMPDIR
trap 'rm -rf -- "$TMPDIR"' EXIT

# suite PLAN NTESTS [T_ONLY]: a suite declaring PLAN that runs NTESTS
# passing tests; prints its output, returns t_summary's status.
suite() {
	T_ONLY=${3:-} bash -c '
		. "$1"
		t_plan "$2"
		for ((i = 1; i <= $3; i++)); do t_run "t$i" true; done
		t_summary' _ "$lib" "$1" "$2"
}
expect() { # expect WANT(pass|fail) WHAT -- command
	local want=$1 what=$2 out rc
	shift 3
	out=$("$@" 2>&1); rc=$?
	if { [ "$want" = pass ] && [ $rc = 0 ]; } || { [ "$want" = fail ] && [ $rc != 0 ]; }; then
		echo "ok: $what"
	else
		echo "WRONG: $what (exit $rc):"; sed 's/^/    /' <<<"$out"; bad=1
	fi
}
expect pass "all declared tests ran" -- suite 3 3
expect fail "one declared test never ran" -- suite 3 2
expect fail "more tests ran than declared" -- suite 2 3
expect pass "T_ONLY skips count as run" -- suite 3 3 "t1"
expect fail "a failed test fails the summary" -- bash -c '. "$1"; t_plan 1; t_run t1 false; t_summary' _ "$lib"
out=$(suite 3 2)
grep -q '^FAIL suite_plan: 3 tests declared (t_plan), 2 ran$' <<<"$out" || { echo "WRONG: no suite_plan line in: $out"; bad=1; }
exit $bad
