#!/bin/bash
# Two-VM drop-in test, client side: the stock Linux NFS/RDMA client mounts
# the server VM's export over soft-RoCE and moves data. svcrdma_rs is
# installed on this host too (as on any host that both serves and mounts),
# and nothing loads rpcrdma by hand: the first NFS/RDMA mount autoloads it
# (the kernel asks modprobe for "xprtrdma"), which must bring svcrdma_rs
# in first, holding "rdma", with rpcrdma's client carrying the mount.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
. "$(dirname "$0")/dropin.sh"
MNT=/mnt/dropin
SERVER=192.168.77.1

t_link_up() { dropin_link 2; }

t_mount_and_move_data() {
	local v want got
	[ ! -d /sys/module/rpcrdma ] && [ ! -d /sys/module/svcrdma_rs ] || fail "rpcrdma or svcrdma_rs already loaded"
	"$ROOT/scripts/install" install --krel "$(uname -r)" "$ROOT/svcrdma_rs.ko" || fail "scripts/install failed"
	# A client host runs rpcbind (NFSv3 locking: rpc.statd needs it).
	mkdir -p /run/rpcbind
	pgrep -x rpcbind >/dev/null || rpcbind -w
	mkdir -p $MNT
	head -c $((4 << 20)) /dev/urandom >/tmp/src
	want=$(sha256sum </tmp/src)
	# The server VM boots and starts nfsd in its own time.
	wait_for ${DROPIN_WAIT:-1200} rpcinfo -T tcp $SERVER nfs 4 ||
		fail "the server's nfsd never answered (NFS over TCP)"
	for v in 3 4.2; do
		local path=/
		[ $v = 3 ] && path=$NFS_EXPORT
		timeout 180 mount -v -t nfs -o vers=$v,proto=rdma,port=20049 $SERVER:$path $MNT >/tmp/mount.out 2>&1 ||
			{ cat /tmp/mount.out; fail "v$v: mount -o rdma from the server VM failed"; }
		grep " $MNT " /proc/mounts
		if [ $v = 3 ]; then
			# The mount autoloaded rpcrdma, and the softdep svcrdma_rs first.
			grep -E '^(svcrdma_rs|rpcrdma) ' /proc/modules
			[ -d /sys/module/rpcrdma ] || fail "the NFS/RDMA mount did not load rpcrdma"
			[ -d /sys/module/svcrdma_rs ] || fail "the NFS/RDMA mount's autoload of rpcrdma did not load svcrdma_rs"
			rd /sys/module/svcrdma_rs/parameters/xprt_name
			[ "$REPLY" = rdma ] || fail "svcrdma_rs registered '$REPLY' on the mount's autoload, not rdma"
			dmesg | grep -i 'svcrdma_rs.*name' || true
		fi
		test -e $MNT/server-ready || fail "v$v: the export's server-ready file is not visible"
		dd if=/tmp/src of=$MNT/dropin.$v bs=1M oflag=direct status=none || fail "v$v: write failed"
		got=$(dd if=$MNT/dropin.$v bs=1M iflag=direct status=none | sha256sum)
		[ "$got" = "$want" ] || fail "v$v: data read back differs"
		rm -f $MNT/dropin.$v
		timeout 120 umount $MNT || fail "v$v: umount failed"
	done
}

# Done with the mounts: the installed module goes away again.
t_uninstall() {
	timeout 30 rmmod svcrdma_rs || fail "rmmod svcrdma_rs failed"
	"$ROOT/scripts/install" uninstall --krel "$(uname -r)" || fail "scripts/install uninstall failed"
}

t_plan 3
t_run link_up t_link_up
t_run mount_and_move_data t_mount_and_move_data
t_run uninstall t_uninstall
# Tell the server how it went (over NFS/TCP: independent of what is tested).
result=ok
[ "$T_FAILED" = 0 ] || result="client failed $T_FAILED tests"
mkdir -p /mnt/report
if mount -t nfs -o vers=4.2,proto=tcp $SERVER:/ /mnt/report; then
	echo "$result" >/mnt/report/client-done
	umount /mnt/report
fi
t_summary
