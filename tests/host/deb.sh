#!/usr/bin/env bash
# The Debian package on the host (make deb-test): svcrdma-rs-dkms installed
# with apt-get into a copy (overlay) of a Debian trixie root that has
# Debian's 7.3 kernel packages (tests/host/deb-root), as on a server
# running that kernel, from nothing prepared: the package's DKMS hook
# downloads linux-source-7.3 and builds the kernel's Rust metadata with
# trixie's own compilers (~5 min on 2 cores), DKMS builds and installs the
# module; then the files it put in place, lintian, a kernel without Rust
# skipped, a kernel upgrade's rebuild (the hook preparing the tree again),
# and a purge that leaves nothing. Loading and serving NFS: tests/vm/deb.sh
# and the distro suite (tests/vm/distro.sh), on Debian's own kernel.
#
#   tests/host/deb.sh [KREL]     DEB=FILE tests that .deb (default: make deb's)
#
# Prints PASS/FAIL lines and "N passed, M failed"; exits 1 if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/scripts/lib.sh"
if [ "${SVCRDMA_DEB_TEST_INNER:-}" != 1 ]; then
	krel=${1:-$(svcrdma_stock_krel)}
	[ -n "$krel" ] || die "apt knows no linux-image-7.3.*-amd64: run scripts/bootstrap (adds trixie-backports)"
	deb=${DEB:-}
	if [ -z "$deb" ]; then
		deb=$("$root/scripts/build-deb") || die "scripts/build-deb failed"
	fi
	deb=$(realpath "$deb")
	base=$("$root/tests/host/deb-root" "$krel") || die "tests/host/deb-root failed"
	work=/var/tmp/svcrdma-deb-test
	rm -rf "$work"
	mkdir -p "$work/upper" "$work/work" "$work/root"
	# A private mount namespace: nothing stays mounted when it ends.
	SVCRDMA_DEB_TEST_INNER=1 KREL=$krel DEB=$deb BASE=$base WORK=$work \
		unshare --mount --propagation private -- "$0"
	rc=$?
	rm -rf "$work"
	exit $rc
fi

mount -t overlay overlay -o "lowerdir=$BASE,upperdir=$WORK/upper,workdir=$WORK/work" "$WORK/root" ||
	die "cannot mount an overlay of $BASE"
DR=$WORK/root
export TMPDIR=$WORK
. "$root/tests/vm/lib.sh"
. "$root/tests/vm/deb-lib.sh"
deb_root_mounts
echo "package: $DEB ($DEB_VER), kernel $KREL, root: overlay of $BASE"
t_plan 8

t_run deb_install deb_install
t_run deb_files deb_files
deb_lintian() {
	lintian --fail-on error,warning -I "$DEB" 2>&1 | grep -v 'running with root privileges' || true
	lintian --fail-on error,warning "$DEB" >/dev/null 2>&1 || fail "lintian reports errors or warnings"
}
t_run deb_lintian deb_lintian
# A kernel built without Rust: DKMS skips it (BUILD_EXCLUSIVE_CONFIG) and
# the kernel's install carries on.
deb_skips_kernel_without_rust() {
	local k=7.3.0+deb13-norust out
	mkdir -p "$DR/lib/modules/$k/build/include"
	grep -v '^CONFIG_RUST=' "$DR/usr/src/linux-headers-$KREL/.config" >"$DR/lib/modules/$k/build/.config"
	out=$(inr /etc/kernel/header_postinst.d/dkms "$k" 2>&1) || { echo "$out"; fail "the kernel hook failed for a kernel without Rust"; }
	echo "$out" | tail -n 5
	inr dkms status -m "$DEB_NAME" | has ", $k," && fail "dkms built svcrdma_rs for $k"
	rm -rf "$DR/lib/modules/$k"
}
t_run deb_skips_kernel_without_rust deb_skips_kernel_without_rust
t_run deb_rebuild deb_rebuild fresh
deb_module_matches_kernel() {
	local ko=$DR$DEB_KO plain=$DEB_TMP/deb-module.ko imports missing
	[ -f "$ko" ] || fail "no $DEB_KO"
	xz -dc "$ko" >"$plain" || fail "cannot decompress $DEB_KO"
	imports=$(nm -u "$plain" | awk '{print $2}' | grep -vE '^(__fentry__|__this_module|_GLOBAL_OFFSET_TABLE_)$' | sort -u)
	[ -n "$imports" ] || fail "no imports read from $DEB_KO"
	missing=$(comm -23 <(echo "$imports") <(awk '{print $2}' "$DR/usr/src/linux-headers-$KREL/Module.symvers" | sort -u))
	[ -z "$missing" ] || { echo "$missing" | head; fail "the module imports symbols Debian's $KREL does not export"; }
	echo "all $(echo "$imports" | wc -l) imports of $DEB_KO are in Debian's Module.symvers"
}
t_run deb_module_matches_kernel deb_module_matches_kernel
# Removing (not purging) keeps the prepared trees, which only a purge deletes.
deb_remove_keeps_trees() {
	inr apt-get remove -y svcrdma-rs-dkms >/tmp/deb-remove.log 2>&1 || { tail /tmp/deb-remove.log; fail "apt-get remove failed"; }
	[ ! -e "$DR$DEB_KO" ] || fail "apt-get remove left $DEB_KO"
	[ ! -e "$DR/usr/lib/modprobe.d/svcrdma_rs.conf" ] || fail "apt-get remove left the softdep"
	[ -d "$DR/var/lib/svcrdma-rs/kbuild/$KREL" ] || fail "apt-get remove deleted the prepared tree"
}
t_run deb_remove_keeps_trees deb_remove_keeps_trees
t_run deb_purge deb_purge
t_summary
