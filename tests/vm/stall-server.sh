#!/bin/bash
# Two-VM stalled-client test, server side (see tests/vm/run "stall").
# Client A, in the other VM, writes over NFS/RDMA (soft-RoCE on the VMs'
# own link) and then stops answering: its link goes down mid-transfer, as
# when its host dies. Client B, this host's own NFS
# mount over TCP, asks for attributes every STALL_PROBE_MS the whole time;
# no answer may take STALL_MAX_MS or more. With the C svcrdma B never waited
# over 1.5 s; a transport whose nfsd threads all sleep on RDMA Reads to the
# dead client makes B wait until those Reads time out (~17 s on RoCE with
# our ACK timeout). Then A's connection must be closed and the module
# unload cleanly.
#
#   STALL_SECS=60       how long B is measured after A starts writing
#   STALL_MAX_MS=2000   the longest B may wait for one answer
#   STALL_THREADS=8     nfsd threads (the distributions' default)
#   KO=PATH             the module (default: svcrdma_rs.ko of this tree)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
. "$(dirname "$0")/dropin.sh"
KO=${KO:-$ROOT/svcrdma_rs.ko}
STALL_SECS=${STALL_SECS:-60}
STALL_MAX_MS=${STALL_MAX_MS:-2000}
STALL_THREADS=${STALL_THREADS:-8}
MNT_B=/mnt/b
S=/sys/kernel/svcrdma_rs
exec {STALL_OUT}>&1

t_link_up() { dropin_link 1; }

t_serve() {
	modprobe -a sunrpc ib_core rdma_cm
	insmod "$KO" || fail "insmod $KO failed"
	nfsd_prepare
	echo probe >"$NFS_EXPORT/probe"
	nfsd_listen rdma 20049 || fail "no rdma listener"
	nfsd_listen tcp 2049 || fail "no tcp listener"
	nfsd_start "$STALL_THREADS"
	mkdir -p $MNT_B
	nfs_mount "vers=3,proto=tcp,port=2049,noac,nolock" $MNT_B || fail "client B's mount over TCP failed"
	# Client A waits for this before it writes (and then stalls).
	: >"$NFS_EXPORT/server-ready"
}

# A's connections in sysfs (ids), in REPLY.
a_conns() {
	local d ids=
	for d in $S/connections/*; do
		[ -e "$d/peer" ] || continue
		rd "$d/peer"
		[[ $REPLY == 192.168.77.2:* ]] && ids+=" ${d##*/}"
	done
	REPLY=${ids# }
}

t_b_answered_while_a_stalls() {
	local t0 t1 dt max=0 slow=0 n=0 start end closed= first
	dmesg_mark
	wait_for ${DROPIN_WAIT:-1200} test -e "$NFS_EXPORT/stall-start" || fail "client A never started writing"
	a_conns
	first=$REPLY
	[ -n "$first" ] || fail "no connection from client A in sysfs"
	echo "client A's connection: $first"
	start=$SECONDS end=$((SECONDS + STALL_SECS))
	# Shell builtins only: a process start costs seconds in a one-CPU guest
	# under TCG, more than the bound. Opening the file on a noac mount asks
	# the server for its attributes each time.
	while ((SECONDS < end)); do
		t0=${EPOCHREALTIME/./}
		read -r _ <$MNT_B/probe || echo "probe $n failed"
		t1=${EPOCHREALTIME/./}
		dt=$(((t1 - t0) / 1000))
		((dt > max)) && max=$dt
		((dt >= STALL_MAX_MS)) && { slow=$((slow + 1)); echo "probe $n at +$((SECONDS - start)) s: ${dt} ms"; }
		n=$((n + 1))
		if [ -z "$closed" ]; then
			a_conns
			[[ " $REPLY " == *" $first "* ]] || closed=$((SECONDS - start))
		fi
		nap 0.25
	done
	if [ -n "$closed" ]; then closed="after $closed s"; else closed="not within the window"; fi
	echo "stall: client B: $n probes over ${STALL_SECS} s, longest ${max} ms, $slow of ${STALL_MAX_MS} ms or more; A's connection closed $closed" >&"$STALL_OUT"
	((slow == 0)) || fail "client B waited ${max} ms for one answer while client A stalled ($slow probes of ${STALL_MAX_MS} ms or more)"
	[ "$closed" != "not within the window" ] || wait_for 120 sh -c "! grep -qs '^192.168.77.2:' $S/connections/$first/peer" ||
		fail "client A's connection $first is still open 120 s after the window"
}

t_teardown() {
	timeout 60 umount -f $MNT_B || timeout 30 umount -f -l $MNT_B || fail "umount of B failed"
	nfsd_stop
	wait_for 60 rmmod svcrdma_rs || fail "rmmod failed"
	dmesg_clean_since_mark
}

t_plan 4
t_run link_up t_link_up
t_run serve t_serve
t_run b_answered_while_a_stalls t_b_answered_while_a_stalls
t_run teardown t_teardown
t_summary
