#!/bin/bash
# Several guest suites in one boot (tests/vm/run's "core" suite, make
# check): a boot of the debug kernel under TCG costs one to two minutes, as
# much as a short suite.
#
#   tests/vm/parts.sh SUITE...
#
# Each SUITE (tests/vm/SUITE.sh) runs as a process of its own, in order,
# with T_CORE=1 (lib.sh's t_full skips what make vm-test runs) and the
# settings in run_part. Its summary line is shown as
# "== part SUITE: N passed, N failed"; a part that
# stops before its summary, or exits non-zero with no failed test, fails as
# part_SUITE. Between parts, reset_guest takes down what a suite leaves
# standing by design (devices, rpcrdma, the export, mounts) and fails as
# part_SUITE_reset if the module cannot be unloaded: no part starts on
# another's leftovers. The last line counts every part's tests.
# (tests/host/lib-plan.sh runs it on the host with PARTS_DIR, a directory
# of stand-in suites, and PARTS_RESET=none.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nfs.sh"
here=${PARTS_DIR:-$(cd "$(dirname "$0")" && pwd)}

# reset_guest: what a suite may leave behind. Prints what it removed; fails
# (after doing the rest) if svcrdma_rs cannot be unloaded.
reset_guest() {
	local m t d n rc=0 gone=()
	while read -r _ m t _; do
		case $t in nfs | nfs4)
			timeout 60 umount -f "$m" 2>/dev/null || timeout 60 umount -l "$m"
			gone+=("mount $m") ;;
		esac
	done < <(tac /proc/mounts)
	# Writing 0 also takes down listeners that no thread ever served.
	if [ -w /proc/fs/nfsd/threads ]; then
		rd /proc/fs/nfsd/threads
		[ "${REPLY:-0}" = 0 ] || gone+=("nfsd threads")
		echo 0 >/proc/fs/nfsd/threads
	fi
	for n in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
		ip netns delete "$n" && gone+=("netns $n")
	done
	if [ -d /sys/module/svcrdma_rs ]; then
		if wait_for 30 rmmod svcrdma_rs; then
			gone+=(svcrdma_rs)
		else
			echo "reset: rmmod svcrdma_rs failed (refcnt $(cat /sys/module/svcrdma_rs/refcnt))"
			rc=1
		fi
	fi
	# An RDMA mount's transport goes from a work item after the umount.
	if [ -d /sys/module/rpcrdma ]; then
		if wait_for 30 modprobe -r rpcrdma; then gone+=(rpcrdma); else echo "reset: modprobe -r rpcrdma failed"; fi
	fi
	for d in $(rdma link show 2>/dev/null | awk '$1 == "link" { split($2, a, "/"); print a[1] }' | sort -u); do
		timeout 60 rdma link delete "$d" && gone+=("rdma link $d")
	done
	if mountpoint -q "$NFS_EXPORT" 2>/dev/null; then
		exportfs -ua 2>/dev/null || true
		timeout 60 umount "$NFS_EXPORT" && gone+=("export tmpfs")
	fi
	echo "reset: ${gone[*]:-nothing to remove}"
	return $rc
}

# run_part SUITE: the suite's output goes to a file, shown as it grows. Not
# through a pipe: daemons a suite starts (rpcbind) inherit its descriptors,
# the copies of stdout some suites keep included, and a reader of a pipe
# would wait for them to exit.
run_part() {
	local s=$1 log=${TMPDIR:-/tmp}/part.$1.log t0=$SECONDS rc l p f pid
	# The core suite's trims (lib.sh's t_full), the short hostile client
	# left to make hostile.
	local -a envs=(env -u CONFIGS T_CORE=1)
	case $s in
	data-check) envs+=(HOSTILE_SHORT=) ;;
	backchannel) envs+=("CONFIGS=${BC_CONFIGS:-rxe:frmr:4.1 siw:dma_mr:4.2}") ;;
	esac
	echo "== part $s"
	: >"$log"
	"${envs[@]}" bash "$here/$s.sh" </dev/null >"$log" 2>&1 &
	pid=$!
	tail -n +1 --pid=$pid -f "$log" | sed -u -E "s/^([0-9]+ passed, [0-9]+ failed)\$/== part $s: \\1/"
	wait $pid
	rc=$?
	l=$(grep -aE '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
	p=$(grep -ac '^PASS ' "$log") f=$(grep -ac '^FAIL ' "$log")
	if [ -z "$l" ]; then
		echo "FAIL part_$s: no summary line: the suite stopped before its end (exit $rc)"
	elif [ "$l" != "$p passed, $f failed" ]; then
		echo "FAIL part_$s: its summary says '$l', but $p PASS and $f FAIL lines were printed"
	elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		echo "FAIL part_$s: exited $rc with no failed test"
	fi
	echo "== part $s took $((SECONDS - t0)) s"
	rm -f "$log"
	[ "${PARTS_RESET:-}" != none ] || return 0
	reset_guest >/tmp/reset.out 2>&1 || echo "FAIL part_${s}_reset: $(grep '^reset: .*failed' /tmp/reset.out | head -n 1)"
	cat /tmp/reset.out
}

out=${TMPDIR:-/tmp}/parts.out
for s in "$@"; do
	if [ -f "$here/$s.sh" ] && [ "$s" != parts ]; then
		run_part "$s"
	else
		echo "FAIL part_$s: no such suite"
	fi
done | tee "$out"
p=$(grep -ac '^PASS ' "$out") f=$(grep -ac '^FAIL ' "$out")
echo "$p passed, $f failed"
[ "$f" = 0 ]
