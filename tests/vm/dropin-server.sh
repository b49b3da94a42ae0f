#!/bin/bash
# Two-VM drop-in test, server side (runs inside the server VM; see
# tests/vm/run "dropin"). This VM never loads rpcrdma.ko: svcrdma_rs takes
# the stock transport name "rdma", and nfs-utils starts the listener from an
# /etc/nfs.conf that only says rdma=y, exactly as with the C transport.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
. "$(dirname "$0")/dropin.sh"

t_link_up() { dropin_link 1; }

t_svcrdma_rs_is_rdma() {
	modprobe -a sunrpc ib_core rdma_cm
	insmod "$ROOT/svcrdma_rs.ko" || fail "insmod svcrdma_rs.ko (default name) failed"
	rd /sys/module/svcrdma_rs/parameters/xprt_name
	[ "$REPLY" = rdma ] || fail "svcrdma_rs registered '$REPLY', not the stock name rdma"
	[ ! -d /sys/module/rpcrdma ] || fail "rpcrdma.ko is loaded on the server"
}

t_nfs_utils_starts_rdma() {
	nfsd_prepare
	# The client checks it sees this file through its RDMA mount.
	: >"$NFS_EXPORT/server-ready"
	# Debian's own /etc/nfs.conf, with RDMA switched on the way its comments
	# show: "# rdma=n" and "# rdma-port=20049" uncommented. (rdma=y alone
	# names the service "nfsrdma", which Debian's /etc/services lacks:
	# rpc.nfsd then fails whichever server transport is loaded.)
	grep -q '^# rdma=n' /etc/nfs.conf || fail "/etc/nfs.conf is not the stock file"
	sed -i -e 's/^# rdma=n$/rdma=y/' -e 's/^# rdma-port=20049$/rdma-port=20049/' \
		-e 's/^# threads=8$/threads=8/' /etc/nfs.conf
	sed -n '/^\[nfsd\]/,/^\[/p' /etc/nfs.conf | grep -v '^#'
	rpc.nfsd || fail "rpc.nfsd failed"
	echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null || true
	grep -q '^rdma 20049' /proc/fs/nfsd/portlist || fail "no rdma 20049 listener: $(cat /proc/fs/nfsd/portlist)"
	cat /proc/fs/nfsd/portlist
}

t_client_done() {
	wait_for ${DROPIN_WAIT:-1200} test -e "$NFS_EXPORT/client-done" || fail "the client VM never finished"
	rd "$NFS_EXPORT/client-done"
	[ "$REPLY" = ok ] || fail "the client reported: $REPLY"
	dmesg | grep 'svcrdma_rs: connection [0-9]* from 192.168.77.2' | head -n 3
	dmesg | grep -q 'svcrdma_rs: connection [0-9]* from 192.168.77.2:[0-9]* on rxe0 (roce): Using Fast Memory Registration' ||
		fail "no connection line for the client"
}

t_stop_clean() {
	dmesg_mark
	rpc.nfsd 0
	wait_for 30 rmmod svcrdma_rs || fail "rmmod failed"
	dmesg_clean_since_mark
}

t_run link_up t_link_up
t_run svcrdma_rs_is_rdma t_svcrdma_rs_is_rdma
t_run nfs_utils_starts_rdma t_nfs_utils_starts_rdma
t_run client_done t_client_done
t_run stop_clean t_stop_clean
t_summary
