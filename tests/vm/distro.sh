#!/bin/bash
# The data-path suite on a stock Debian kernel (runs inside the VM that
# scripts/distro-kernel-test boots: Debian's own vmlinuz and modules).
# First shows the guest runs the stock kernel and the module was built for
# it, then runs tests/vm/data.sh with KO. Debian's kernel has no soft-iWARP
# (CONFIG_RDMA_SIW is not set): the configurations are soft-RoCE only.
#
# Environment: KREL (the kernel release the module was built for), KO, and
# data.sh's (PROFILE, CONFIGS, ...).
. "$(dirname "$0")/lib.sh"
: "${KREL:?}" "${KO:?}"
export KO CONFIGS=${CONFIGS:-rxe:frmr rxe:dma_mr}

echo "guest kernel: $(</proc/version)"
echo "module: $KO, vermagic $(modinfo -F vermagic "$KO")"
stock_kernel() {
	local v
	v=$(</proc/version)
	[ "$(uname -r)" = "$KREL" ] || fail "the guest runs $(uname -r), not $KREL"
	[[ $v == *Debian* ]] || fail "/proc/version does not say Debian"
	modinfo -n rdma_rxe | has "/lib/modules/$KREL/" || fail "rdma_rxe is not the stock kernel's: $(modinfo -n rdma_rxe)"
	[[ $(modinfo -F vermagic "$KO") == "$KREL "* ]] || fail "$KO vermagic: $(modinfo -F vermagic "$KO")"
}
t_run stock_kernel stock_kernel
# What a user runs on a server booted on this kernel: scripts/distro-kernel
# finds the running kernel by itself, and (its downloads, build root and
# kbuild tree cached by the host's run) the build gives the same module.
distro_kernel_running() {
	local out ko
	out=$("$ROOT/scripts/distro-kernel" check 2>&1) || fail "distro-kernel check: $out"
	echo "$out" >/tmp/distro-check.out
	[[ $out == "$KREL: Debian "*", CONFIG_RUST=y"* ]] || fail "distro-kernel check printed: $out"
	ko=$("$ROOT/scripts/distro-kernel" build) || fail "distro-kernel build failed"
	echo "distro-kernel build printed: $ko" >>/tmp/distro-check.out
	[ "$ko" = "$KO" ] || fail "distro-kernel build printed $ko, want $KO"
}
t_run distro_kernel_running distro_kernel_running
sed 's/^/    /' /tmp/distro-check.out 2>/dev/null

# Debian 13's own ways to start nfsd, with NFSROOT: a trixie root holding
# Debian 13's nfs-kernel-server (scripts/distro-kernel-test makes it), whose
# programs run against this kernel. svcrdma_rs is installed as `make
# install` does; nothing loads it by hand.
#  - nfs-server.service: its ExecStart line, run as written in the unit
#    (`nfsdctl autostart || rpc.nfsd`), with the root's /etc/nfs.conf set
#    the way its comments show (rdma=y, rdma-port=20049). On Linux 7.3,
#    nfs-utils 2.8.3's `nfsdctl autostart` stops at "lockd configuration
#    failure" (the kernel's lockd netlink wants a grace time nfsdctl does
#    not send), so the unit falls back to rpc.nfsd, as on any Debian 13
#    server on this kernel, whatever the RDMA transport.
#  - nfsdctl by hand: `nfsdctl listener +rdma::20049`, `nfsdctl threads 8`.
# Either way svcrdma_rs must own the listener and a local NFS/RDMA mount
# must move data.
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
in_nfsroot() {
	unshare --mount --propagation private -- sh -c \
		'mount -t proc proc "$0/proc" && mount -t nfsd nfsd "$0/proc/fs/nfsd" && mount --rbind /dev "$0/dev" && exec chroot "$0" "$@"' "$NFSROOT" "$@"
}
# serving_rdma: svcrdma_rs, holding "rdma", owns the RDMA listener on
# 20049, and a local NFS/RDMA mount writes and reads 4 MiB back.
serving_rdma() {
	local l want got mnt=/mnt/nfsdctl
	echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null || true
	cat /proc/fs/nfsd/portlist
	grep -E '^(svcrdma_rs|rpcrdma) ' /proc/modules
	rd /sys/module/svcrdma_rs/parameters/xprt_name
	[ "$REPLY" = rdma ] || fail "svcrdma_rs is not loaded holding rdma ('$REPLY')"
	l=$(rdma resource show cm_id | grep 'state LISTEN' | grep ':20049' || true)
	echo "$l"
	echo "$l" | has 'comm \[svcrdma_rs\]' || fail "no svcrdma_rs listener on 20049"
	if echo "$l" | grep -v 'comm \[svcrdma_rs\]' | has .; then fail "another module listens on 20049"; fi
	head -c $((4 << 20)) /dev/urandom >/tmp/src
	want=$(sha256sum </tmp/src)
	mkdir -p $mnt
	timeout 180 mount -t nfs -o vers=4.2,proto=rdma,port=20049 "$(guest_ip):/" $mnt || fail "mount -o proto=rdma failed"
	grep " $mnt " /proc/mounts
	dd if=/tmp/src of=$mnt/nfsdctl bs=1M oflag=direct status=none || fail "write failed"
	got=$(dd if=$mnt/nfsdctl bs=1M iflag=direct status=none | sha256sum)
	[ "$got" = "$want" ] && [ "$(sha256sum <"$NFS_EXPORT/nfsdctl")" = "$want" ] || fail "data differs"
	rm -f $mnt/nfsdctl
	timeout 120 umount $mnt || fail "umount failed"
}
unload_all() {
	in_nfsroot nfsdctl threads 0 || rpc.nfsd 0
	wait_for 30 rmmod svcrdma_rs || fail "rmmod svcrdma_rs failed"
	wait_for 30 rmmod rpcrdma || fail "rmmod rpcrdma failed"
}
debian13_nfs_server_unit() {
	local start conf=$NFSROOT/etc/nfs.conf unit=$NFSROOT/lib/systemd/system/nfs-server.service
	[ -x "$NFSROOT/usr/sbin/nfsdctl" ] || fail "no nfsdctl in $NFSROOT"
	[ ! -d /sys/module/rpcrdma ] && [ ! -d /sys/module/svcrdma_rs ] || fail "rpcrdma or svcrdma_rs already loaded"
	"$ROOT/scripts/install" install --krel "$KREL" "$KO" || fail "scripts/install failed"
	rdma_add rxe rxe0 || return 1
	nfsd_prepare
	grep -q '^# rdma=n' "$conf" || fail "$conf is not the stock file"
	sed -i -e 's/^# rdma=n$/rdma=y/' -e 's/^# rdma-port=20049$/rdma-port=20049/' "$conf"
	sed -n '/^\[nfsd\]/,/^\[/p' "$conf" | grep -v '^#'
	in_nfsroot nfsdctl -V
	start=$(sed -n 's/^ExecStart=//p' "$unit")
	echo "nfs-server.service: ExecStart=$start"
	[ -n "$start" ] || fail "no ExecStart in $unit"
	in_nfsroot /bin/sh -c "$start" || fail "the unit's ExecStart failed"
	serving_rdma
	unload_all
}
nfsdctl_by_hand() {
	[ ! -d /sys/module/rpcrdma ] && [ ! -d /sys/module/svcrdma_rs ] || fail "rpcrdma or svcrdma_rs still loaded"
	in_nfsroot nfsdctl listener +tcp::2049 +rdma::20049 || fail "nfsdctl listener +rdma::20049 failed"
	in_nfsroot nfsdctl threads 8 || fail "nfsdctl threads 8 failed"
	in_nfsroot nfsdctl listener
	serving_rdma
	unload_all
	"$ROOT/scripts/install" uninstall --krel "$KREL" || fail "uninstall failed"
}
# The module DKMS built on the host for this kernel (scripts/distro-kernel-
# test: dkms add/build with dkms.conf, the prepared kbuild tree) installs
# and loads into the stock kernel.
dkms_module_loads() {
	local v
	[ -f "$DKMS_KO" ] || fail "no DKMS-built module at $DKMS_KO"
	[[ $(modinfo -F vermagic "$DKMS_KO") == "$KREL "* ]] || fail "vermagic: $(modinfo -F vermagic "$DKMS_KO")"
	"$ROOT/scripts/install" install --krel "$KREL" "$DKMS_KO" || fail "scripts/install failed"
	modprobe svcrdma_rs || fail "modprobe svcrdma_rs failed"
	v=$(cat /sys/module/svcrdma_rs/version)
	echo "loaded: svcrdma_rs version $v, $(modinfo -n svcrdma_rs)"
	[ "$v" = "$(modinfo -F version "$DKMS_KO")" ] || fail "the loaded module is not the DKMS-built one"
	rd /sys/module/svcrdma_rs/parameters/xprt_name
	[ "$REPLY" = rdma ] || fail "xprt_name '$REPLY'"
	rmmod svcrdma_rs || fail "rmmod failed"
	"$ROOT/scripts/install" uninstall --krel "$KREL" || fail "uninstall failed"
}
if [ -n "${DKMS_KO:-}" ]; then
	t_run dkms_module_loads dkms_module_loads
fi
if [ -n "${NFSROOT:-}" ]; then
	t_run debian13_nfs_server_unit debian13_nfs_server_unit
	t_run nfsdctl_by_hand nfsdctl_by_hand
else
	echo "(NFSROOT unset: Debian 13's nfs-utils not tested)"
fi
[ "$T_FAILED" = 0 ] || { t_summary; exit 1; }
"$(dirname "$0")/data.sh" | tee /tmp/distro-data.out
rc=${PIPESTATUS[0]}
p=$(grep -c '^PASS ' /tmp/distro-data.out) f=$(grep -c '^FAIL ' /tmp/distro-data.out)
echo "stock kernel $KREL: the tests above and data.sh's together:"
echo "$((T_PASSED + p)) passed, $((T_FAILED + f)) failed"
exit "$rc"
