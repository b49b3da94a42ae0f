# Test helpers for guest-side suites (sourced inside the VM).
# shellcheck shell=bash
#
#   t_run NAME FUNC [ARGS...]  runs one named test in a subshell; prints
#                              "PASS NAME" or "FAIL NAME: reason" and the
#                              test's output
#   fail MSG                   in a test: fail with that reason
#   t_summary                  prints "N passed, N failed"; status 1 if any failed
#
# Tests run in order and share the VM, so later tests may depend on earlier
# ones; a test that cannot run because an earlier one failed fails too (it
# never skips silently).

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
T_PASSED=0
T_FAILED=0

fail() { echo "t_fail: $*"; return 1; }

t_run() {
	local name=$1; shift
	local out reason
	out=$(mktemp)
	local t0=$SECONDS
	# Not inside `if`: bash ignores `set -e` in a tested subshell.
	( set -eo pipefail; "$@" ) >"$out" 2>&1
	local rc=$?
	if [ $rc = 0 ]; then
		echo "PASS $name ($((SECONDS - t0)) s)"
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

t_summary() {
	echo "$T_PASSED passed, $T_FAILED failed"
	[ "$T_FAILED" = 0 ]
}

# Kernel-log reports that fail a test (the same list as scripts/vm-run).
T_REPORTS='BUG: |WARNING: |Oops[: ]|KASAN: |UBSAN: |general protection fault|Kernel panic|unreferenced object 0x|new suspected memory leak|INFO: task .* blocked for more than|rcu: INFO: .*stall|self-detected stall|INFO: trying to register non-static key'

# The guest is emulated (TCG): every fork costs tens of milliseconds, so
# loops use these builtin-only helpers.
#   nap SECS    sleeps (read with a timeout on a FIFO nobody writes)
#   rd FILE     the file's first line in REPLY (empty if unreadable)
T_NAPFIFO=/tmp/.t_nap.$$
mkfifo "$T_NAPFIFO" 2>/dev/null || true
exec {T_NAPFD}<>"$T_NAPFIFO"
nap() { read -rt "$1" -u "$T_NAPFD" _ || true; }
rd() { REPLY=; read -r REPLY <"$1" 2>/dev/null || true; }

# dmesg_new_since MARK: the kernel log lines after line MARK, in T_NEW.
dmesg_count() { local _l; mapfile -t _l <<<"$(dmesg)"; T_MARK=${#_l[@]}; }
dmesg_new_since() { local _l; mapfile -t _l <<<"$(dmesg)"; T_NEW=("${_l[@]:$1}"); }

# dmesg_mark; ...; dmesg_since_mark: the kernel log written in between.
dmesg_mark() { dmesg | wc -l >/tmp/.dmesg_mark; }
dmesg_since_mark() { dmesg | tail -n +"$(( $(cat /tmp/.dmesg_mark 2>/dev/null || echo 0) + 1 ))"; }
# Fails if the kernel logged a report since the mark.
dmesg_clean_since_mark() {
	local bad
	bad=$(dmesg_since_mark | grep -aE "$T_REPORTS" || true)
	[ -z "$bad" ] || { echo "$bad"; fail "kernel reports: $(echo "$bad" | head -n 1)"; }
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

# The guest's NIC (QEMU user networking) and its IPv4 address.
guest_nic() { ip -o link show | awk -F': ' '$2 != "lo" { print $2; exit }' | cut -d@ -f1; }
guest_ip() { ip -o -4 addr show dev "$(guest_nic)" | awk '{ print $4 }' | cut -d/ -f1 | head -n 1; }
