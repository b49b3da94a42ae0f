#!/bin/bash
# The hostile-client suite (runs inside the VM): tests/tools/hostile.py
# sends valid, malformed and randomly mutated RPC-over-RDMA messages to
# svcrdma_rs on soft-RoCE while the Linux NFS client, mounted over RDMA from
# the same guest, writes and reads back data; the data must stay correct,
# every hostile connection must be gone afterwards, and the kernel log clean.
#
# Environment:
#   HOSTILE_RANDOM=1000000   randomly mutated messages (make hostile); the
#                            data-path suite sources this file and, with
#                            HOSTILE_SHORT=N, runs hostile_test with N
#   HOSTILE_SEED=8166        the seed (the same seed sends the same bytes)
#   HOSTILE_WAIT=20          seconds a message may go unanswered before it
#                            counts as a hang (or a drop, where allowed)
# Sourced by data.sh after these (lib.sh twice would reset its counters).
if ! declare -F t_run >/dev/null; then
	. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
	. "$(dirname "${BASH_SOURCE[0]}")/rdma.sh"
	. "$(dirname "${BASH_SOURCE[0]}")/nfs.sh"
fi

HOSTILE_SEED=${HOSTILE_SEED:-8166}
PORT=${PORT:-20049}
HOSTILE_MNT=/mnt/hostile
HOSTILE_PY=$ROOT/tests/tools/hostile.py
# The suite's own output: t_run shows a test's output only when it fails,
# and the counts are wanted either way.
exec {HOSTILE_OUT}>&1

# conn_ids: the module's live connection ids, one per line.
conn_ids() {
	local d
	for d in /sys/kernel/svcrdma_rs/connections/*; do
		[ -d "$d" ] && echo "${d##*/}"
	done
	return 0
}

# data_loop FILE: writes and reads back FILE on the mount until /tmp/hostile.run
# goes; each round's result is a line in /tmp/hostile.rounds.
data_loop() {
	local i=0
	while [ -e /tmp/hostile.run ]; do
		i=$((i + 1))
		if dd if=/tmp/hostile.src of="$1" bs=64k oflag=direct status=none &&
			dd if="$1" of=/tmp/hostile.back bs=64k iflag=direct status=none &&
			cmp -s /tmp/hostile.src /tmp/hostile.back; then
			echo "ok $i"
		else
			echo "bad $i"
		fi
	done >/tmp/hostile.rounds 2>&1
}

# hostile_test N [WAIT]: the directed cases and N random messages against
# the listener on this guest's address (svcrdma_rs loaded, nfsd serving);
# a message unanswered after WAIT seconds (default 20) is a hang, or a drop
# where the RFC allows no answer.
hostile_test() {
	local n=$1 wait=${2:-20} before after rc ok bad ip left
	ip=$(guest_ip)
	# The file the client READs into a write chunk (hostile.py's pattern).
	/usr/bin/python3 -c "import sys; sys.path.insert(0, '${HOSTILE_PY%/*}'); import hostile; sys.stdout.buffer.write(hostile.pattern(65536))" \
		>"$NFS_EXPORT/hostile.dat"
	nfs_mount "vers=4.2,proto=rdma,port=$PORT" $HOSTILE_MNT || fail "mount over RDMA failed"
	before=$(conn_ids)
	[ -n "$before" ] || fail "no svcrdma_rs connection for the mount"
	head -c $((1 << 20)) /dev/urandom >/tmp/hostile.src
	touch /tmp/hostile.run
	data_loop $HOSTILE_MNT/well-behaved.bin &
	local dpid=$!
	rc=0
	/usr/bin/python3 "$HOSTILE_PY" "$ip" "$PORT" --seed "$HOSTILE_SEED" --random "$n" \
		--timeout "$wait" --progress 100000 >/tmp/hostile.out 2>&1 || rc=$?
	cat /tmp/hostile.out
	grep -a '^hostile: ' /tmp/hostile.out >&"$HOSTILE_OUT" || true
	rm -f /tmp/hostile.run
	wait $dpid
	ok=$(grep -c '^ok ' /tmp/hostile.rounds || true)
	bad=$(grep -c '^bad ' /tmp/hostile.rounds || true)
	echo "well-behaved client: $ok rounds of 1 MiB written and read back correctly, $bad wrong" >/tmp/hostile.data
	cat /tmp/hostile.data
	cat /tmp/hostile.data >&"$HOSTILE_OUT"
	[ "$bad" = 0 ] || fail "the mounted client's data went wrong in $bad of $((ok + bad)) rounds"
	[ "$ok" -ge 1 ] || fail "the mounted client completed no round"
	# Every hostile connection goes; the mount's stays.
	for _ in $(seq 60); do
		after=$(conn_ids)
		[ "$after" = "$before" ] && break
		nap 0.5
	done
	left=$(comm -13 <(echo "$before" | sort) <(echo "$after" | sort) | tr '\n' ' ')
	[ -z "$left" ] || fail "connections of the hostile client still in sysfs after 30 s: $left"
	[ "$after" = "$before" ] || fail "the mount's connection went: before '$before', after '$after'"
	# Bounded: a run hung here for good once, the local unlink of the
	# export's file waiting in __break_lease with every nfsd thread idle.
	timeout 60 rm -f $HOSTILE_MNT/well-behaved.bin || fail "removing the mount's file took over 60 s"
	timeout 60 rm -f "$NFS_EXPORT/hostile.dat" ||
		fail "unlinking the export's hostile.dat blocked over 60 s (a lease nfsd does not break)"
	timeout 120 umount $HOSTILE_MNT || fail "umount failed"
	# Last, so the checks above run whatever hostile.py found.
	[ "$rc" = 0 ] || fail "hostile.py: mismatches or hangs (exit $rc), see MISMATCH lines"
}

t_setup() {
	rdma_add rxe rxe0
	modprobe -a sunrpc ib_core rdma_cm rpcrdma
	insmod "$ROOT/svcrdma_rs.ko" xprt_name=rdma_rs || fail "insmod failed"
	nfsd_prepare
	nfsd_listen rdma_rs "$PORT" || fail "no rdma_rs listener"
	nfsd_listen tcp 2049
	nfsd_start 8
	dmesg_mark
}

t_hostile() { hostile_test "${HOSTILE_RANDOM:-1000000}" "${HOSTILE_WAIT:-20}"; }

t_teardown() {
	nfsd_stop
	wait_for 30 rmmod svcrdma_rs || fail "rmmod failed"
	dmesg_clean_since_mark
	[ ! -d /sys/kernel/svcrdma_rs ] || fail "/sys/kernel/svcrdma_rs still there after rmmod"
}

# Sourced by the data-path suite for hostile_test; the full suite otherwise.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	t_run setup t_setup
	t_run hostile t_hostile
	t_run teardown t_teardown
	t_summary
fi
