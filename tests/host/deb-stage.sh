#!/usr/bin/env bash
# The Debian package's install and purge on the host, for make check's
# distro suite (scripts/distro-kernel-test with DEB_STAGE=host): apt-get
# install and purge in the trixie root the VM then boots Debian's kernel on,
# natively. Under TCG the install's DKMS build took ~9 of the suite's 14
# minutes; here it takes well under one. The same root, dpkg, dkms, the
# package's hook and Debian's compilers; what only the VM shows (the
# install and a kernel upgrade's rebuild while that kernel runs) is make
# deb-vm-test's.
#
#   tests/host/deb-stage.sh install|purge
#
# Run by scripts/distro-kernel-test in a private mount namespace (unshare):
# the root's /proc, /sys, /dev and the seeded kbuild tree are mounted for
# this step only. Environment: DR (the root: an overlay the caller mounted
# where the VM sees it), DEB, KREL, DEB_TMP (kept between the steps: the
# snapshot before the install, dpkg -L's list), and for install
# DEB_SEED_KBUILD and DEB_SEED_SRC (tests/vm/deb-lib.sh). Prints PASS/FAIL
# lines (no summary: the caller counts); exits 1 if a test failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/scripts/lib.sh"
: "${DR:?}" "${DEB:?}" "${KREL:?}" "${DEB_TMP:?}"
export TMPDIR=$DEB_TMP
. "$root/tests/vm/lib.sh"
. "$root/tests/vm/deb-lib.sh"
# The seeded trees are this host's own caches: the package's hook writes
# its settings into the kbuild tree (and would make it again if it did not
# match the root's kernel). In the VM a bind mount was enough (the guest's
# /var is a private copy); here each is an overlay whose upper layer is in
# DEB_TMP, so the caches stay as they are.
deb_seed() {
	local d i=0
	for d in $(deb_seed_dirs); do
		i=$((i + 1))
		mkdir -p "$DR${d#*=}" "$DEB_TMP/seed$i/upper" "$DEB_TMP/seed$i/work"
		mount -t overlay overlay \
			-o "lowerdir=${d%%=*},upperdir=$DEB_TMP/seed$i/upper,workdir=$DEB_TMP/seed$i/work" "$DR${d#*=}" ||
			fail "cannot mount an overlay of ${d%%=*} at ${d#*=} in the root"
	done
}
deb_root_mounts
case ${1:-} in
install)
	: "${DEB_SEED_KBUILD:?}" "${DEB_SEED_SRC:?}"
	t_run deb_install deb_install
	# While the seeded tree is mounted: deb_files reads its settings.
	t_run deb_files deb_files
	deb_unseed
	;;
purge)
	unset DEB_SEED_KBUILD
	t_run deb_purge deb_purge
	;;
*) die "usage: tests/host/deb-stage.sh install|purge" ;;
esac
[ "$T_FAILED" = 0 ]
