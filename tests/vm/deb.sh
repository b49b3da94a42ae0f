#!/bin/bash
# The Debian package alone on Debian's stock kernel (make deb-vm-test; runs
# inside the VM scripts/distro-kernel-test --deb-only boots: Debian's own
# vmlinuz and modules). svcrdma-rs-dkms is installed with apt-get into
# DEBROOT, a Debian trixie root with that kernel's packages that plays the
# server's root; DKMS builds the module in the guest; rdma-core's module
# list loads it before rpcrdma; rpc.nfsd --rdma=20049 serves a mount over
# soft-RoCE; a kernel upgrade's rebuild; apt-get purge leaves nothing
# (tests/vm/deb-lib.sh). make check runs the same tests inside its distro
# suite (tests/vm/distro.sh), around the data-path suite.
#
# Environment: KREL, DEB, DEBROOT, DEB_SEED_KBUILD, DEB_SEED_SRC.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
: "${KREL:?}" "${DEB:?}" "${DEBROOT:?}"
DR=$DEBROOT
. "$(dirname "$0")/deb-lib.sh"
t_plan 7
echo "guest kernel: $(</proc/version)"
stock_kernel() {
	[ "$(uname -r)" = "$KREL" ] || fail "the guest runs $(uname -r), not $KREL"
	grep -q Debian /proc/version || fail "/proc/version does not say Debian"
}
t_run stock_kernel stock_kernel
deb_root_mounts
t_run deb_install deb_install
t_run deb_files deb_files
deb_kernel_modprobe on
t_run deb_rdma_core_load deb_rdma_core_load
t_run deb_rpc_nfsd deb_rpc_nfsd
deb_kernel_modprobe off
t_run deb_upgrade_rebuild deb_upgrade_rebuild
t_run deb_purge deb_purge
t_summary
