#!/bin/bash
# svcrdma_rs on a stock Debian kernel (runs inside the VM that
# scripts/distro-kernel-test boots: Debian's own vmlinuz and modules).
# First shows the guest runs the stock kernel and the module built on the
# host is for it; then the route an admin takes: the Debian package
# svcrdma-rs-dkms installed with apt-get into DEBROOT, a Debian trixie root
# with that kernel's packages that plays the server's root (DKMS builds the
# module here, in the guest), rdma-core's module list loaded, rpc.nfsd
# --rdma=20049 and Debian 13's own ways to start nfsd serving mounts; then
# tests/vm/data.sh with the module DKMS built; then a kernel upgrade's
# rebuild (not in the check profile) and apt-get purge (tests/vm/deb-lib.sh).
# With DEB_STAGE=host (make check) the install and the purge ran on the host
# in this same root (tests/host/deb-stage.sh) and are not repeated here.
# Debian's kernel has no soft-iWARP (CONFIG_RDMA_SIW is not set): the
# configurations are soft-RoCE only.
#
# Environment: KREL (the kernel release), KO (the module scripts/distro-
# kernel built on the host), DEB, DEBROOT, DEB_SEED_KBUILD, DEB_SEED_SRC
# (tests/vm/deb-lib.sh), DEB_STAGE, and data.sh's (PROFILE, CONFIGS, ...).
. "$(dirname "$0")/lib.sh"
: "${KREL:?}" "${KO:?}" "${DEB:?}" "${DEBROOT:?}"
export CONFIGS=${CONFIGS:-rxe:frmr rxe:dma_mr}

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
# finds the running kernel by itself and knows it (its downloads cached by
# the host's run). Its build on the host made KO; the package's hook below
# runs its prepare step in the root the package goes into.
distro_kernel_running() {
	local out
	out=$("$ROOT/scripts/distro-kernel" check 2>&1) || fail "distro-kernel check: $out"
	echo "$out" >/tmp/distro-check.out
	[[ $out == "$KREL: Debian "*", CONFIG_RUST=y"* ]] || fail "distro-kernel check printed: $out"
}
t_run distro_kernel_running distro_kernel_running
sed 's/^/    /' /tmp/distro-check.out 2>/dev/null

. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
DR=$DEBROOT
. "$(dirname "$0")/deb-lib.sh"
deb_root_mounts
# DEB_STAGE=host (make check): the package was installed, and will be
# purged, on the host in this same root (tests/host/deb-stage.sh).
if [ "${DEB_STAGE:-vm}" != host ]; then
	t_run deb_install deb_install
	t_run deb_files deb_files
fi
# From here the kernel's module requests go to DEBROOT's modprobe too.
deb_kernel_modprobe on
t_run deb_rdma_core_load deb_rdma_core_load
t_run deb_rpc_nfsd deb_rpc_nfsd

# Debian 13's own ways to start nfsd, with DEBROOT's nfs-kernel-server
# (nfs-utils 2.8.3), whose programs run against this kernel; svcrdma_rs is
# the package's, and nothing loads it by hand: nfsd's request for the
# "rdma" transport loads it through the softdep.
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
debian13_nfs_server_unit() {
	local start conf=$DR/etc/nfs.conf unit=$DR/lib/systemd/system/nfs-server.service
	[ -x "$DR/usr/sbin/nfsdctl" ] || fail "no nfsdctl in $DR"
	[ ! -d /sys/module/rpcrdma ] && [ ! -d /sys/module/svcrdma_rs ] || fail "rpcrdma or svcrdma_rs already loaded"
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
}
t_run debian13_nfs_server_unit debian13_nfs_server_unit
t_run nfsdctl_by_hand nfsdctl_by_hand
deb_kernel_modprobe off

# The data-path suite with the module DKMS built from the package (data.sh
# loads it itself, under test names and parameters).
if [ "$T_FAILED" = 0 ] && [ -f "$DR$DEB_KO" ]; then
	KO=$DR$DEB_KO "$(dirname "$0")/data.sh" | tee /tmp/distro-data.out
	rc=${PIPESTATUS[0]}
else
	echo "(data.sh not run: a test above failed)"
	: >/tmp/distro-data.out
	rc=1
fi
# A kernel upgrade's rebuild (a second DKMS build under TCG, ~6 min: the
# check profile leaves it to make deb-vm-test, whose package is the same;
# the install above already ran the package's prepare hook), then the purge.
if [ "${PROFILE:-full}" = check ]; then
	echo "SKIP deb_upgrade_rebuild (the check profile; make deb-vm-test runs it)"
else
	t_run deb_upgrade_rebuild deb_upgrade_rebuild
fi
[ "${DEB_STAGE:-vm}" = host ] || t_run deb_purge deb_purge
p=$(grep -c '^PASS ' /tmp/distro-data.out) f=$(grep -c '^FAIL ' /tmp/distro-data.out)
echo "stock kernel $KREL: the tests above and data.sh's together:"
echo "$((T_PASSED + p)) passed, $((T_FAILED + f)) failed"
[ "$T_FAILED" = 0 ] && [ "$rc" = 0 ]
