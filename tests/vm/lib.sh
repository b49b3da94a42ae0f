# Test helpers for guest-side suites (sourced inside the VM).
# shellcheck shell=bash
#
#   t_run NAME FUNC [ARGS...]  runs one named test in a subshell; prints
#                              "PASS NAME" or "FAIL NAME: reason" and the
#                              test's output
#   fail MSG                   in a test: fail with that reason
#   t_full NAME FUNC [ARGS...] t_run, but skipped in make check's core suite (below)
#   t_plan N                   declares that N tests follow (T_ONLY's skips count)
#   t_summary                  prints "N passed, N failed"; status 1 if any failed,
#                              or if fewer (or more) tests ran than t_plan declared
#   T_ONLY="PATTERN..."        (environment) only the tests whose names match
#                              one of these globs run; the others print
#                              "SKIP NAME" (a narrowed run, e.g. tests/vm/run
#                              mutants: name the set-up tests too)
#
# Tests run in order and share the VM, so later tests may depend on earlier
# ones; a test that cannot run because an earlier one failed fails too (it
# never skips silently).

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
. "$ROOT/scripts/kmemleak-since.sh"
T_PASSED=0
T_FAILED=0
T_SKIPPED=0
T_PLANNED=

fail() { echo "t_fail: $*"; return 1; }

t_run() {
	local name=$1; shift
	local out reason p pats
	if [ -n "${T_ONLY:-}" ]; then
		read -ra pats <<<"$T_ONLY"
		for p in "${pats[@]}"; do
			# shellcheck disable=SC2053
			[[ $name == $p ]] && break
			p=
		done
		[ -n "$p" ] || {
			echo "SKIP $name (T_ONLY)"
			T_SKIPPED=$((T_SKIPPED + 1))
			return 0
		}
	fi
	out=$(mktemp)
	local t0=$SECONDS
	# Not inside `if`: bash ignores `set -e` in a tested subshell.
	( set -eo pipefail; "$@" ) >"$out" 2>&1
	local rc=$?
	if [ $rc = 0 ]; then
		echo "PASS $name ($((SECONDS - t0)) s)"
		# T_VERBOSE=1: what a passing test printed, too.
		[ -z "${T_VERBOSE:-}" ] || sed 's/^/    | /' "$out"
		T_PASSED=$((T_PASSED + 1))
	else
		reason=$(grep -a '^t_fail: ' "$out" | tail -n 1 | sed 's/^t_fail: //')
		[ -n "$reason" ] || reason="exited non-zero after: $(tail -n 1 "$out")"
		echo "FAIL $name: $reason"
		grep -av '^t_fail: ' "$out" | tail -n 30 | sed 's/^/    | /'
		T_FAILED=$((T_FAILED + 1))
	fi
	rm -f "$out"
}

# t_full NAME FUNC [ARGS...]: t_run, except in make check's core suite
# (tests/vm/parts.sh sets T_CORE=1), where it prints "SKIP NAME (...)" and
# counts as run for t_plan: make vm-test runs the suite in its own boot,
# this test included.
t_full() {
	if [ -n "${T_CORE:-}" ]; then
		echo "SKIP $1 (make check's core suite: make vm-test runs it)"
		T_SKIPPED=$((T_SKIPPED + 1))
		return 0
	fi
	t_run "$@"
}

t_plan() { T_PLANNED=$1; }

t_summary() {
	local ran=$((T_PASSED + T_FAILED + T_SKIPPED))
	# A suite that stopped early, or whose list of tests shrank, must not
	# pass for what it did not run.
	if [ -n "$T_PLANNED" ] && [ "$ran" != "$T_PLANNED" ]; then
		echo "FAIL suite_plan: $T_PLANNED tests declared (t_plan), $ran ran"
		T_FAILED=$((T_FAILED + 1))
	fi
	echo "$T_PASSED passed, $T_FAILED failed"
	[ "$T_FAILED" = 0 ]
}

# Kernel-log reports that fail a test (the same list as scripts/vm-run).
T_REPORTS='BUG: |WARNING: |Oops[: ]|KASAN: |UBSAN: |general protection fault|Kernel panic|unreferenced object 0x|new suspected memory leak|INFO: task .* blocked for more than|rcu: INFO: .*stall|self-detected stall|INFO: trying to register non-static key'

# The guest is emulated (TCG): every fork costs tens of milliseconds, so
# loops use these builtin-only helpers.
#   nap SECS    sleeps (read with a timeout on a FIFO nobody writes)
#   rd FILE     the file's first line in REPLY (empty if unreadable)
T_NAPFIFO=${TMPDIR:-/tmp}/.t_nap.$$
mkfifo "$T_NAPFIFO" 2>/dev/null || true
exec {T_NAPFD}<>"$T_NAPFIFO"
nap() { read -rt "$1" -u "$T_NAPFD" _ || true; }
rd() { REPLY=; read -r REPLY <"$1" 2>/dev/null || true; }

# The kernel log, two ways:
# - many checks (connect.sh's matrices): kmsg_follow once, then
#   kmsg_window_start; ...; kmsg_window_end leaves the lines logged in
#   between in T_NEW. A `cat /dev/kmsg` follows the log into a file this
#   shell reads with builtins, so no check runs dmesg (a fork costs ~0.5 s
#   in the guest); each end is a marker written to /dev/kmsg, and the log
#   is ordered.
# - a few checks: dmesg_mark; ...; dmesg_since_mark (below).
kmsg_follow() {
	trap kmsg_unfollow EXIT
	KMSG_FILE=/tmp/kmsg.follow.$BASHPID
	# Made here: the redirection below happens in the child, later.
	: >"$KMSG_FILE"
	cat /dev/kmsg >>"$KMSG_FILE" &
	KMSG_PID=$!
	exec {KMSG_FD}<"$KMSG_FILE"
	KMSG_PART= KMSG_SEQ=0
	# The follower reads the whole log, earlier tests' markers included.
	KMSG_TAG=$BASHPID-${EPOCHREALTIME/./}
}
kmsg_unfollow() {
	[ -n "${KMSG_PID:-}" ] || return 0
	kill "$KMSG_PID" 2>/dev/null || true
	exec {KMSG_FD}<&-
	rm -f "$KMSG_FILE"
	KMSG_PID=
}

# kmsg_until TEXT: reads the followed log up to the line ending in TEXT;
# the lines before it are appended to T_NEW.
kmsg_until() {
	local l deadline=$((SECONDS + 30))
	while ((SECONDS < deadline)); do
		if IFS= read -r -u "$KMSG_FD" l; then
			l=$KMSG_PART$l KMSG_PART=
			[[ $l == *"$1" ]] && return 0
			T_NEW+=("$l")
		else
			# At the end of the file: keep a partly written line.
			KMSG_PART+=$l
			kill -0 "$KMSG_PID" 2>/dev/null || fail "the kernel log follower (cat /dev/kmsg) died"
			nap 0.05
		fi
	done
	fail "kernel log: '$1' not seen within 30 s"
}

kmsg_mark() {
	KMSG_SEQ=$((KMSG_SEQ + 1))
	echo "svcrdma_rs-test: mark $KMSG_TAG.$KMSG_SEQ" >/dev/kmsg
	kmsg_until "svcrdma_rs-test: mark $KMSG_TAG.$KMSG_SEQ"
}
kmsg_window_start() { kmsg_mark; T_NEW=(); }
kmsg_window_end() { kmsg_mark; }

# on_exit CMD: CMD (a shell command) runs when the test ends, however it
# ends: t_run's subshell's EXIT trap, which puts back the parameters
# param_set changed, then runs every on_exit command, the last one first,
# each whatever the others did. The trap replaces any other (so neither is
# for a test that uses kmsg_follow).
T_ON_EXIT=()
on_exit() {
	T_ON_EXIT+=("$1")
	trap t_exit EXIT
}
t_exit() {
	local i
	param_restore_all
	for ((i = ${#T_ON_EXIT[@]} - 1; i >= 0; i--)); do
		eval "${T_ON_EXIT[$i]}" >/dev/null 2>&1 || true
	done
}

# param_set NAME VALUE: svcrdma_rs's module parameter NAME is VALUE for
# the rest of the test, or until param_restore NAME (e.g. once the
# connection it decides is accepted). Its old value comes back however the
# test ends (t_exit, above). T_PARAMS: the parameters' directory (host
# self-test).
declare -A T_PARAM_OLD=()
param_set() {
	local f=${T_PARAMS:-/sys/module/svcrdma_rs/parameters}/$1
	if [ -z "${T_PARAM_OLD[$1]+x}" ]; then
		T_PARAM_OLD[$1]=$(cat "$f") || fail "cannot read parameter $1"
	fi
	trap t_exit EXIT
	echo "$2" >"$f" || fail "cannot set $1=$2"
}
param_restore() {
	[ -n "${T_PARAM_OLD[$1]+x}" ] || return 0
	echo "${T_PARAM_OLD[$1]}" >"${T_PARAMS:-/sys/module/svcrdma_rs/parameters}/$1" ||
		fail "cannot restore $1=${T_PARAM_OLD[$1]}"
	unset "T_PARAM_OLD[$1]"
}
param_restore_all() {
	local n
	for n in "${!T_PARAM_OLD[@]}"; do
		echo "${T_PARAM_OLD[$n]}" >"${T_PARAMS:-/sys/module/svcrdma_rs/parameters}/$n" 2>/dev/null || true
	done
}

# dmesg_mark [NAME]; ...; dmesg_since_mark [NAME]: the kernel log written
# in between. The mark is a line of its own in the log, not a line count:
# once the ring is full (a million hostile messages fill it), a count stays
# the same while old lines give way to new ones, and the lines after it
# would be none. Should the mark itself have been pushed out of the ring,
# the whole log still there is what was written since.
dmesg_mark() {
	local m="svcrdma_rs-test: dmesg mark ${1:-main} $BASHPID.$RANDOM.$SECONDS"
	echo "$m" >"${T_KMSG:-/dev/kmsg}"
	echo "$m" >"/tmp/.dmesg_mark${1:+.$1}"
}
# Pipeline readers that read all of their input. Tests run with pipefail,
# and `grep -q` or `head` stop reading at the first match or line: a writer
# with more than a pipe buffer left (dmesg, modprobe -c) then dies of
# SIGPIPE and fails a test that found what it looked for. `has` is
# `grep -q`, `first N` is `head -n N`.
has() { grep -c "$@" >/dev/null; }
first() { sed -n "1,${1}p"; }
dmesg_since_mark() {
	local m=
	[ -r "/tmp/.dmesg_mark${1:+.$1}" ] && m=$(cat "/tmp/.dmesg_mark${1:+.$1}")
	dmesg | awk -v m="$m" 'm != "" && index($0, m) { n = 0; next } { l[n++] = $0 }
		END { for (i = 0; i < n; i++) print l[i] }'
}
# Fails if the kernel logged a report since the mark.
dmesg_clean_since_mark() {
	local bad
	bad=$(dmesg_since_mark | grep -aE "$T_REPORTS" || true)
	[ -z "$bad" ] || { echo "$bad"; fail "kernel reports: $(echo "$bad" | first 1)"; }
}

# Waits up to $1 seconds for the command to succeed.
wait_for() {
	local secs=$1; shift
	local i
	for ((i = 0; i < secs * 2; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	"$@"
}

# The guest's NIC (QEMU user networking) and its IPv4 address. No reader
# stops early (a writer killed by SIGPIPE fails a pipefail pipeline).
guest_nic() {
	local d
	for d in /sys/class/net/*; do
		# A real NIC has a device (lo, bonding_masters, dummies do not);
		# scripts/vm-setup.c configures the same one.
		[ -e "$d/device" ] && { echo "${d##*/}"; return 0; }
	done
}
guest_ip() { ip -o -4 addr show dev "$(guest_nic)" | awk 'NR == 1 { split($4, a, "/"); print a[1] }'; }

# last_conn: the highest svcrdma_rs connection id in sysfs (the newest
# connection), in REPLY (0 if none).
last_conn() {
	local d n max=0
	for d in /sys/kernel/svcrdma_rs/connections/*; do
		n=${d##*/}
		[[ $n =~ ^[0-9]+$ ]] && ((n > max)) && max=$n
	done
	REPLY=$max
}
