#!/usr/bin/env bash
# Self-test of scripts/vm-verdict (host-side, no VM): how a finished guest's
# files come out as scripts/vm-run's status. make check's VM self-test
# boots once to see the real files judged (a command's status, a planted
# WARNING and leak); the cases here are the rest, each on a run directory
# made up for it.
set -uo pipefail
verdict=$(cd "$(dirname "$0")/../.." && pwd)/scripts/vm-verdict
bad=0
dir=$(mktemp -d)
trap 'rm -rf -- "$dir"' EXIT

# case WANT_STATUS WANT_STDERR WHAT QEMU_STATUS RC DMESG [CONSOLE [KMEMLEAK]]:
# a run directory with those files (RC or KMEMLEAK "-": no such file; the
# others empty when ""), judged; its status must be WANT_STATUS and its stderr
# match the extended regex WANT_STDERR ("" : must be empty).
case_() {
	local want=$1 wanterr=$2 what=$3 qrc=$4 rc=$5 run err got
	run=$(mktemp -d "$dir/run.XXXXXX")
	[ "$rc" = - ] || echo "$rc" >"$run/rc"
	printf '%s' "$6" >"$run/dmesg"
	printf '%s' "${7:-}" >"$run/console"
	[ "${8-}" = - ] || printf '%s' "${8:-}" >"$run/kmemleak"
	err=$("$verdict" "$run" "$qrc" 2400 2>&1 >/dev/null); got=$?
	if [ "$got" != "$want" ]; then
		echo "WRONG: $what: status $got, want $want"; sed 's/^/    /' <<<"$err"; bad=1
	elif [ -z "$wanterr" ] && [ -n "$err" ]; then
		echo "WRONG: $what: said '$err', want nothing"; bad=1
	elif [ -n "$wanterr" ] && ! grep -Eq -- "$wanterr" <<<"$err"; then
		echo "WRONG: $what: said '$err', want /$wanterr/"; bad=1
	else
		echo "ok: $what"
	fi
}
clean=$'[    1.0] Linux version 7.3.4\n[    2.0] rdma_rxe: loaded\n'
warn=$'[    5.0] WARNING: CPU: 1 PID: 77 at net/x.c:1 f+0x1/0x2\n'
leak=$'unreferenced object 0xffff888012345678 (size 64):\n  comm "insmod", pid 80\n'

case_ 0 "" "a command that succeeded, a clean log" 0 0 "$clean"
case_ 7 "" "the command's status comes through" 0 7 "$clean"
case_ 1 "kernel reports in the guest.*" "a WARNING fails a command that succeeded" 0 0 "$clean$warn"
case_ 7 "WARNING: CPU: 1" "a WARNING with a failed command: the command's status, the report said" 0 7 "$clean$warn"
case_ 1 "WARNING: CPU: 1" "a WARNING in a run without kmemleak's file (no scans)" 0 0 "$clean$warn" "" -
case_ 5 "WARNING: CPU: 1" "the same with a failed command" 0 5 "$clean$warn" "" -
case_ 1 "unreferenced object 0xffff888012345678" "a leak in the kmemleak file fails the run" 0 0 "$clean" "" "$leak"
case_ 1 "Kernel panic" "a panic on the console only (no dmesg file)" 0 0 "" "Kernel panic - not syncing: x"
case_ 1 "KASAN: slab-use-after-free" "KASAN" 0 0 "$clean[ 9.0] BUG: KASAN: slab-use-after-free in f"
case_ 1 "INFO: task nfsd:123 blocked for more than" "a hung task" 0 0 "${clean}INFO: task nfsd:123 blocked for more than 30 seconds."
case_ 1 "did not finish within 2400s" "no status file, QEMU timed out" 124 - "$clean"
case_ 1 "did not finish \(kernel crash\?\); QEMU exited 1" "no status file, QEMU exited" 1 - "$clean"
case_ 1 "holds 'garbage'" "a status file that is not a number" 0 garbage "$clean"
exit $bad
