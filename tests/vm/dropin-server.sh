#!/bin/bash
# Two-VM drop-in test, server side (runs inside the server VM; see
# tests/vm/run "dropin"). svcrdma_rs is installed the way `make install`
# does (scripts/install: the module under the guest's /lib/modules/<release>/
# updates, /etc/modprobe.d/svcrdma_rs.conf, depmod; the guest's /lib/modules
# and /etc are private overlays), and nothing loads it by hand: every way
# the system loads rpcrdma.ko (nfsd asking for "rdma", rdma-core's
# /etc/rdma/modules/rdma.conf, an NFS/RDMA mount) must leave svcrdma_rs
# holding the transport name "rdma" and rpcrdma's client working. nfs-utils
# starts the listener from Debian's own /etc/nfs.conf (rdma=y, rdma-port)
# and from `rpc.nfsd --rdma=20049`.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
. "$(dirname "$0")/dropin.sh"
MNT=/mnt/local

t_link_up() { dropin_link 1; }

# The listeners on port 20049 and who owns them: `rdma resource show cm_id`
# names the module that created each CM ID.
cm_listeners() { rdma resource show cm_id | grep 'state LISTEN' | grep ':20049' || true; }
ours_listen() {
	local l
	l=$(cm_listeners)
	echo "$l"
	[ -n "$l" ] || fail "no RDMA listener on port 20049"
	echo "$l" | has 'comm \[svcrdma_rs\]' || fail "the listener is not svcrdma_rs's"
	if echo "$l" | grep -v 'comm \[svcrdma_rs\]' | has .; then
		fail "another module listens on 20049 too"
	fi
}

t_make_install() {
	local krel v
	krel=$(uname -r)
	[ ! -d /sys/module/rpcrdma ] && [ ! -d /sys/module/svcrdma_rs ] || fail "rpcrdma or svcrdma_rs already loaded"
	# What `make install` runs after checking KDIR's release.
	"$ROOT/scripts/install" install --krel "$krel" "$ROOT/svcrdma_rs.ko" || fail "scripts/install failed"
	v=$(modinfo -F version svcrdma_rs) || fail "modinfo svcrdma_rs: not installed for $krel"
	echo "modinfo svcrdma_rs: version $v, $(modinfo -n svcrdma_rs)"
	[ -n "$v" ] && [ "$v" = "$(modinfo -F version "$ROOT/svcrdma_rs.ko")" ] || fail "modinfo's version '$v' is not the built module's"
	grep -v '^#' /etc/modprobe.d/svcrdma_rs.conf
	# modprobe's plan for rpcrdma (dry run): svcrdma_rs first.
	modprobe --show-depends rpcrdma | tee /tmp/deps
	grep -q 'updates/svcrdma_rs\.ko' /tmp/deps || fail "modprobe rpcrdma would not load the installed svcrdma_rs"
	[ "$(grep -o -m 1 -e 'svcrdma_rs\.ko' -e 'rpcrdma\.ko' /tmp/deps)" = svcrdma_rs.ko ] ||
		fail "modprobe rpcrdma would load rpcrdma before svcrdma_rs"
}

t_nfs_conf_autoload() {
	nfsd_prepare
	# The client checks it sees this file through its RDMA mount.
	: >"$NFS_EXPORT/server-ready"
	cp /etc/nfs.conf /tmp/nfs.conf.stock
	# Debian's own /etc/nfs.conf, with RDMA switched on the way its comments
	# show: "# rdma=n" and "# rdma-port=20049" uncommented. (rdma=y alone
	# names the service "nfsrdma", which Debian's /etc/services lacks:
	# rpc.nfsd then fails whichever server transport is loaded.)
	grep -q '^# rdma=n' /etc/nfs.conf || fail "/etc/nfs.conf is not the stock file"
	sed -i -e 's/^# rdma=n$/rdma=y/' -e 's/^# rdma-port=20049$/rdma-port=20049/' \
		-e 's/^# threads=8$/threads=8/' /etc/nfs.conf
	sed -n '/^\[nfsd\]/,/^\[/p' /etc/nfs.conf | grep -v '^#'
	# Nothing RDMA-NFS is loaded: nfsd's "rdma" makes the kernel ask
	# modprobe for "svcrdma" (rpcrdma's alias), and the softdep loads
	# svcrdma_rs first.
	rpc.nfsd || fail "rpc.nfsd failed"
	echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null || true
	cat /proc/fs/nfsd/portlist
	grep -q '^rdma 20049' /proc/fs/nfsd/portlist || fail "no rdma 20049 listener: $(cat /proc/fs/nfsd/portlist)"
	[ -d /sys/module/svcrdma_rs ] || fail "svcrdma_rs was not loaded"
	[ -d /sys/module/rpcrdma ] || fail "rpcrdma was not loaded (the alias svcrdma)"
	grep -E '^(svcrdma_rs|rpcrdma) ' /proc/modules
	rd /sys/module/svcrdma_rs/parameters/xprt_name
	[ "$REPLY" = rdma ] || fail "svcrdma_rs registered '$REPLY', not the stock name rdma"
	ours_listen
}

t_client_done() {
	wait_for ${DROPIN_WAIT:-1200} test -e "$NFS_EXPORT/client-done" || fail "the client VM never finished"
	rd "$NFS_EXPORT/client-done"
	[ "$REPLY" = ok ] || fail "the client reported: $REPLY"
	dmesg | grep 'svcrdma_rs: connection [0-9]* from 192.168.77.2' | first 3
	dmesg | has 'svcrdma_rs: connection [0-9]* from 192.168.77.2:[0-9]* on rxe0 (roce): Using a Global DMA MR' ||
		fail "no connection line for the client"
}

# rdma-core's way: at boot, rdma-load-modules@rdma.service runs
# systemd-modules-load on /etc/rdma/modules/rdma.conf (xprtrdma, svcrdma:
# aliases of rpcrdma). Then `rpc.nfsd --rdma=20049` with the stock nfs.conf,
# and this host's own NFS client (rpcrdma) mounts over RDMA.
t_rdma_core_then_rpc_nfsd() {
	local want got conf=/etc/rdma/modules/rdma.conf
	rpc.nfsd 0
	cp /tmp/nfs.conf.stock /etc/nfs.conf
	wait_for 30 rmmod svcrdma_rs || fail "rmmod svcrdma_rs failed"
	wait_for 30 rmmod rpcrdma || fail "rmmod rpcrdma failed"
	grep -E '^(xprtrdma|svcrdma)$' $conf || fail "$conf does not list xprtrdma and svcrdma"
	# ib_iser and the like may be missing from the test kernel: only the
	# two that matter are checked.
	/lib/systemd/systemd-modules-load $conf || echo "(systemd-modules-load: some module of $conf failed)"
	[ -d /sys/module/rpcrdma ] || fail "rdma-core's list did not load rpcrdma"
	[ -d /sys/module/svcrdma_rs ] || fail "rdma-core's list did not load svcrdma_rs"
	grep -E '^(svcrdma_rs|rpcrdma) ' /proc/modules
	rpc.nfsd --rdma=20049 8 || fail "rpc.nfsd --rdma=20049 failed"
	echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null || true
	cat /proc/fs/nfsd/portlist
	grep -q '^rdma 20049' /proc/fs/nfsd/portlist || fail "no rdma 20049 listener"
	ours_listen
	head -c $((4 << 20)) /dev/urandom >/tmp/src
	want=$(sha256sum </tmp/src)
	mkdir -p $MNT
	dmesg_mark
	timeout 180 mount -t nfs -o vers=4.2,proto=rdma,port=20049 192.168.77.1:/ $MNT || fail "local mount -o proto=rdma failed"
	grep " $MNT " /proc/mounts >/tmp/mnt || true
	cat /tmp/mnt
	grep -q 'proto=rdma' /tmp/mnt || fail "the mount is not proto=rdma"
	dd if=/tmp/src of=$MNT/local bs=1M oflag=direct status=none || fail "write failed"
	got=$(dd if=$MNT/local bs=1M iflag=direct status=none | sha256sum)
	[ "$got" = "$want" ] || fail "data read back differs"
	[ "$(sha256sum <"$NFS_EXPORT/local")" = "$want" ] || fail "the file on the server differs"
	echo "4 MiB written and read back over this host's own NFS/RDMA mount"
	timeout 120 umount $MNT || fail "umount failed"
	dmesg_since_mark | grep 'svcrdma_rs: connection [0-9]* from 192.168.77.1' || fail "no svcrdma_rs connection line for the local mount"
	rpc.nfsd 0
}

t_stop_and_uninstall() {
	local krel
	krel=$(uname -r)
	dmesg_mark
	rpc.nfsd 0
	wait_for 30 rmmod svcrdma_rs || fail "rmmod failed"
	# rpcrdma, still loaded, never got the name: modprobe svcrdma_rs takes it.
	[ -d /sys/module/rpcrdma ] || fail "rpcrdma is not loaded"
	modprobe svcrdma_rs || fail "modprobe svcrdma_rs failed with rpcrdma loaded"
	rd /sys/module/svcrdma_rs/parameters/xprt_name
	[ "$REPLY" = rdma ] || fail "modprobe svcrdma_rs registered '$REPLY'"
	rmmod svcrdma_rs || fail "rmmod failed"
	# A plain `modprobe rpcrdma` (what an admin or a unit types) also
	# brings svcrdma_rs in first.
	wait_for 30 rmmod rpcrdma || fail "rmmod rpcrdma failed"
	modprobe rpcrdma || fail "modprobe rpcrdma failed"
	grep -E '^(svcrdma_rs|rpcrdma) ' /proc/modules
	[ -d /sys/module/svcrdma_rs ] || fail "modprobe rpcrdma did not load svcrdma_rs"
	rd /sys/module/svcrdma_rs/parameters/xprt_name
	[ "$REPLY" = rdma ] || fail "after modprobe rpcrdma, svcrdma_rs registered '$REPLY'"
	rmmod svcrdma_rs || fail "rmmod failed"
	"$ROOT/scripts/install" uninstall --krel "$krel" || fail "scripts/install uninstall failed"
	[ ! -e "/lib/modules/$krel/updates/svcrdma_rs.ko" ] || fail "the module is still installed"
	[ ! -e /etc/modprobe.d/svcrdma_rs.conf ] || fail "the modprobe.d file is still there"
	if modinfo svcrdma_rs >/dev/null 2>&1; then fail "modinfo still finds svcrdma_rs"; fi
	dmesg_clean_since_mark
}

t_plan 6
t_run link_up t_link_up
t_run make_install t_make_install
t_run nfs_conf_autoload t_nfs_conf_autoload
t_run client_done t_client_done
t_run rdma_core_then_rpc_nfsd t_rdma_core_then_rpc_nfsd
t_run stop_and_uninstall t_stop_and_uninstall
t_summary
