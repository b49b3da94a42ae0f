#!/bin/bash
# Two-VM stalled-client test, client side (see stall-server.sh): client A
# mounts over NFS/RDMA, starts STALL_WRITERS (32) direct 1 MiB writers and,
# STALL_DOWN_AFTER seconds later,
# takes its link down: nothing it had in flight is acknowledged any more,
# as when its host dies. The link stays down until the server has measured
# (STALL_DOWN_SECS); the writers are then killed and the mount dropped.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
. "$(dirname "$0")/dropin.sh"
MNT=/mnt/a
SERVER=192.168.77.1
STALL_DOWN_AFTER=${STALL_DOWN_AFTER:-5}
STALL_DOWN_SECS=${STALL_DOWN_SECS:-65}
NIC=

t_link_up() {
	local d
	dropin_link 2
	for d in /sys/class/net/*; do
		rd "$d/address"
		[ "$REPLY" = "${DROPIN_MAC_PREFIX}2" ] && NIC=${d##*/}
	done
	echo "$NIC" >/tmp/stall_nic
}

t_write_then_stall() {
	local i pids=() nic
	nic=$(cat /tmp/stall_nic)
	# This host plays the one that died: its writers (and this script,
	# behind them on the directory: seen 61 s before the link went down)
	# wait longer than the debug kernel's hung-task timeout (60 s), by
	# design. The watchdog here waits past the stall; the server VM, where
	# svcrdma_rs runs, keeps its own at 60 s.
	echo $((STALL_DOWN_AFTER + STALL_DOWN_SECS + 300)) >/proc/sys/kernel/hung_task_timeout_secs ||
		fail "cannot raise this client's hung-task timeout"
	modprobe rpcrdma
	mkdir -p /run/rpcbind $MNT
	pgrep -x rpcbind >/dev/null || rpcbind -w
	# The server VM boots and starts nfsd in its own time.
	wait_for ${DROPIN_WAIT:-1200} timeout 60 mount -t nfs -o vers=3,proto=rdma,port=20049,nolock,lookupcache=none,wsize=1048576 \
		$SERVER:$NFS_EXPORT $MNT || fail "mount -o rdma failed"
	# The server measures from when this host starts writing.
	wait_for 600 test -e $MNT/server-ready || fail "the server never got ready (no server-ready in the export)"
	# More writes in flight than the server has threads (8), as from a
	# busy client: 8 writers left threads free for B even without a bound.
	for ((i = 1; i <= ${STALL_WRITERS:-32}; i++)); do
		dd if=/dev/zero of=$MNT/w$i bs=1M count=24 oflag=direct status=none 2>/dev/null &
		pids+=($!)
	done
	: >$MNT/stall-start || fail "cannot create stall-start on the server"
	sleep "$STALL_DOWN_AFTER"
	echo "link $nic down at $(date +%T)"
	ip link set dev "$nic" down
	sleep "$STALL_DOWN_SECS"
	kill -9 "${pids[@]}" 2>/dev/null || true
	timeout 30 umount -f -l $MNT || true
}

t_plan 2
t_run link_up t_link_up
t_run write_then_stall t_write_then_stall
t_summary
