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
expect pass "t_full: skipped in the core suite (T_CORE=1), counted as run" -- \
	bash -c '. "$1"; T_CORE=1; t_plan 2; t_run a true; t_full b false; t_summary' _ "$lib"
expect fail "t_full: runs (and fails) elsewhere, PROFILE=check included" -- \
	bash -c '. "$1"; PROFILE=check; t_plan 2; t_run a true; t_full b false; t_summary' _ "$lib"
expect fail "a failed test fails the summary" -- bash -c '. "$1"; t_plan 1; t_run t1 false; t_summary' _ "$lib"
out=$(suite 3 2)
grep -q '^FAIL suite_plan: 3 tests declared (t_plan), 2 ran$' <<<"$out" || { echo "WRONG: no suite_plan line in: $out"; bad=1; }
# has/first under pipefail: a match early in a long writer's output is a
# pass (grep -q, which stops reading, kills seq with SIGPIPE: the same
# pipeline fails; faults' accept_alloc_failure failed CI that way).
pf() { bash -c 'set -eo pipefail; . "$1"; eval "$2"' _ "$lib" "$1"; }
expect pass "has: match at the start of 1M lines" -- pf 'seq 1 1000000 | has -x 1'
expect fail "grep -q: the same pipeline fails (why has exists)" -- pf 'seq 1 1000000 | grep -q -x 1'
expect fail "has: no match" -- pf 'seq 1 1000 | has -x 0'
expect pass "first: 8 lines of 1M" -- pf '[ "$(seq 1 1000000 | first 8 | wc -l)" = 8 ]'
# tests/vm/run's summary_seen: a suite log without its summary line (the
# suite stopped early: guest crash, timeout), or whose summary disagrees
# with the PASS/FAIL lines printed, fails the run even with no FAIL line.
ss() { # ss LOGTEXT: the number of failures summary_seen adds
	bash -c '. "$1"; log=$(mktemp); printf "%s" "$2" >"$log"; summary_seen demo "$log"; rm -f "$log"; echo "$failed"' \
		_ "$(dirname "$lib")/run" "$1"
}
want_ss() { # want_ss WANT WHAT LOGTEXT
	local got
	got=$(ss "$3" | tail -n 1)
	if [ "$got" = "$1" ]; then echo "ok: $2"; else echo "WRONG: $2 (summary_seen failures: $got, want $1)"; bad=1; fi
}
want_ss 0 "summary_seen: a complete suite" $'PASS a\nPASS b\n2 passed, 0 failed\n'
want_ss 1 "summary_seen: a suite cut off before its summary" $'PASS a\nPASS b\n'
want_ss 1 "summary_seen: a summary that disagrees with the lines" $'PASS a\n2 passed, 0 failed\n'
want_ss 1 "summary_seen: a test that printed no result" $'PASS a\nFAIL b: x\n3 passed, 1 failed\n'
# tests/vm/run's needs_tree_ko: make mutants (mutants backchannel-off) runs
# in a fresh clone, with no svcrdma_rs.ko built; any other suite needs one.
ntk() { bash -c '. "$1"; shift; needs_tree_ko "$@"' _ "$(dirname "$lib")/run" "$@"; }
expect fail "needs_tree_ko: make mutants' suites build their own modules" -- ntk mutants backchannel-off
expect fail "needs_tree_ko: mutants alone" -- ntk mutants
expect pass "needs_tree_ko: the default list" -- ntk
expect pass "needs_tree_ko: a suite that loads the tree's module" -- ntk foundation
expect pass "needs_tree_ko: mutants with a suite that loads it" -- ntk mutants connect
# tests/vm/parts.sh (make check's core suite, several suites in one boot):
# a part cut off before its summary, or exiting non-zero with no failed
# test, fails; complete parts give one summary line that tests/vm/run's
# summary_seen accepts.
pd=$TMPDIR/parts
mkdir -p "$pd"
printf '. "%s"\nt_plan 2\nt_run a true\nt_run b true\nt_summary\n' "$lib" >"$pd/good.sh"
printf '. "%s"\nt_plan 2\nt_run a true\nexit 1\n' "$lib" >"$pd/cut.sh"
printf '. "%s"\nt_plan 1\nt_run a true\nt_summary\nexit 3\n' "$lib" >"$pd/status.sh"
# A daemon the suite starts keeps a copy of its stdout (as rpcbind does of
# connect.sh's): the part still ends when the suite does.
printf '. "%s"\nexec {o}>&1\nt_plan 1\nt_run a true\nsetsid sleep 67 &\nt_summary\n' "$lib" >"$pd/daemon.sh"
parts() { PARTS_DIR=$pd PARTS_RESET=none bash "$(dirname "$lib")/parts.sh" "$@"; }
expect pass "parts.sh: two complete parts" -- parts good good
expect fail "parts.sh: a part cut off before its summary" -- parts good cut
expect fail "parts.sh: a part exiting non-zero with no failed test" -- parts status good
expect fail "parts.sh: no such suite" -- parts good nosuch
expect pass "parts.sh: a part whose daemon holds its stdout ends with it" -- timeout 30 bash -c "$(declare -f parts); pd=$pd lib=$lib; parts daemon good"
pkill -x -f 'sleep 67' || true
out=$(parts good cut good)
grep -q '^FAIL part_cut: no summary line' <<<"$out" || { echo "WRONG: no part_cut failure in: $out"; bad=1; }
want_ss 0 "summary_seen: parts.sh's output for two complete parts" "$(parts good good)"$'\n'
want_ss 0 "summary_seen: parts.sh's output with a cut part (its FAIL line counted)" "$(parts good cut)"$'\n'
# dmesg_mark/dmesg_since_mark once the ring is full: a ring of 4 lines
# (the mark one of them), then 3 more lines push the oldest out; the lines
# since the mark are the 3 new ones, not none (a line count, the old mark,
# stays at 4). A mark pushed out itself leaves the whole ring.
dm() {
	bash -c 'set -eo pipefail; . "$1"; export T_KMSG=$TMPDIR/ring; : >"$T_KMSG"
		dmesg() { tail -n 4 "$T_KMSG"; }
		echo a >>"$T_KMSG"; echo b >>"$T_KMSG"; dmesg_mark lp; echo c >>"$T_KMSG"
		[ "$(dmesg_since_mark lp | tr "\n" " ")" = "c " ] || exit 1
		echo d >>"$T_KMSG"; echo e >>"$T_KMSG"
		[ "$(dmesg_since_mark lp | tr "\n" " ")" = "c d e " ] || exit 2
		echo f >>"$T_KMSG"
		[ "$(dmesg_since_mark lp | tr "\n" " ")" = "c d e f " ] || exit 3
		rm -f /tmp/.dmesg_mark.lp' _ "$lib"
}
expect pass "dmesg_since_mark: the lines after the mark in a full ring" -- dm
# param_set/param_restore: a parameter set for a test comes back at
# param_restore, and also when the test fails before it (t_run's subshell).
pr() {
	bash -c '. "$1"; export T_PARAMS=$TMPDIR/params; mkdir -p "$T_PARAMS"
		echo auto >"$T_PARAMS/memreg"; echo 0 >"$T_PARAMS/debug_frmr_pool"
		a() { param_set memreg frmr; [ "$(cat $T_PARAMS/memreg)" = frmr ] || fail "not set"
			param_restore memreg; [ "$(cat $T_PARAMS/memreg)" = auto ] || fail "not restored"; }
		b() { param_set memreg frmr; param_set debug_frmr_pool 8; fail "on purpose"; }
		t_run set_and_restore a | grep -q "^PASS set_and_restore" || exit 1
		t_run fails_midway b | grep -q "^FAIL fails_midway" || exit 2
		[ "$(cat $T_PARAMS/memreg) $(cat $T_PARAMS/debug_frmr_pool)" = "auto 0" ] || exit 3' _ "$lib"
}
expect pass "param_set: restored by param_restore and when the test fails" -- pr
# on_exit: a test's cleanup commands run however it ends, the last one
# first, each whatever the others did, after its parameters are put back.
oe() {
	bash -c '. "$1"; export T_PARAMS=$TMPDIR/params2; mkdir -p "$T_PARAMS"; log=$TMPDIR/oe.log
		echo auto >"$T_PARAMS/memreg"; rm -f "$log"
		c() { on_exit "echo one >>$log"; param_set memreg frmr
			on_exit "echo two-\$(cat $T_PARAMS/memreg) >>$log; false"; on_exit "echo three >>$log"
			fail "on purpose"; }
		t_run cleanup c | grep -q "^FAIL cleanup" || exit 1
		[ "$(tr "\n" " " <"$log")" = "three two-auto one " ] || exit 2' _ "$lib"
}
expect pass "on_exit: cleanup runs last first when the test fails, parameters back first" -- oe
exit $bad
