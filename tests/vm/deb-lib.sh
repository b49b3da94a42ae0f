# The Debian package's tests, shared by tests/host/deb.sh (a trixie root on
# the host, the prepare step from nothing) and tests/vm/distro.sh (the same
# root inside the VM booted on Debian's own kernel: the module serves NFS).
# Sourced after lib.sh.
# shellcheck shell=bash
#
# DR is a Debian trixie root holding Debian's 7.3 kernel packages for KREL
# (headers, modules) and the package's dependencies (tests/host/deb-root
# makes it); DEB the .deb (scripts/build-deb); its version is VERSION's.
# The tests run in order: install, files, rebuild, purge.
: "${DR:?}" "${DEB:?}" "${KREL:?}"
DEB_NAME=svcrdma_rs
DEB_VER=$(dpkg-deb -f "$DEB" Version)
DEB_KO=/lib/modules/$KREL/updates/dkms/svcrdma_rs.ko

# inr CMD...: CMD in the root, as root, with a clean environment.
inr() {
	chroot "$DR" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@"
}

# deb_root_mounts: /proc, /sys, /dev and name resolution in the root (the
# caller's mount namespace is private: a throwaway VM, or unshare).
deb_root_mounts() {
	mountpoint -q "$DR/proc" || mount -t proc proc "$DR/proc"
	mountpoint -q "$DR/sys" || mount --rbind /sys "$DR/sys"
	mountpoint -q "$DR/dev" || mount --rbind /dev "$DR/dev"
	cp -L /etc/resolv.conf "$DR/etc/resolv.conf" 2>/dev/null || true
}

# The root's files, except the package manager's own state and logs: what
# is there after a purge and was not before the install, the package left.
deb_snapshot() {
	inr find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /run \
		-o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache/apt -o -path /var/log \
		-o -path /var/cache/debconf -o -path /root \) -prune -o -print | sort
}

# deb_install: apt-get install ./svcrdma-rs-dkms_*.deb, as an admin would;
# DKMS builds and installs the module for KREL (the hook prepares the
# kernel's Rust metadata first). /tmp/deb-before: the root's files before.
deb_install() {
	local t0=$SECONDS out
	deb_snapshot >/tmp/deb-before
	cp "$DEB" "$DR/tmp/"
	inr apt-get install -y --no-install-recommends "/tmp/${DEB##*/}" >/tmp/deb-install.log 2>&1 ||
		{ tail -n 40 /tmp/deb-install.log; cat "$DR/var/lib/dkms/$DEB_NAME/$DEB_VER/build/make.log" 2>/dev/null | tail -n 40; fail "apt-get install ./${DEB##*/} failed"; }
	rm -f "$DR/tmp/${DEB##*/}"
	echo "apt-get install ./${DEB##*/}: $((SECONDS - t0)) s"
	grep -E 'dkms|DKMS|Building|Installing|pre_build|Setting up svcrdma' /tmp/deb-install.log | tail -n 15
	out=$(inr dkms status -m "$DEB_NAME")
	echo "dkms status: $out"
	echo "$out" | has "^$DEB_NAME/$DEB_VER, $KREL, x86_64: installed" || fail "dkms status: '$out'"
}

# deb_files: what the package put where: the module DKMS built (for KREL,
# this source's version, every import exported by the kernel), the
# softdep modprobe reads before rpcrdma, svcrdma-stat, and the kbuild tree
# the hook prepared with the system's compilers (no build root).
deb_files() {
	local ko=$DR$DEB_KO v want deps env
	[ -f "$ko" ] || fail "no $DEB_KO"
	v=$(modinfo -F vermagic "$ko")
	[[ $v == "$KREL "* ]] || fail "$DEB_KO vermagic '$v'"
	want=$(cat "$DR/usr/src/$DEB_NAME-$DEB_VER/scmversion")
	v=$(modinfo -F version "$ko")
	echo "$DEB_KO: version $v, vermagic $(modinfo -F vermagic "$ko")"
	[ "$v" = "$want" ] || fail "module version '$v', the package's sources say '$want'"
	inr dpkg -L svcrdma-rs-dkms >/tmp/deb-listed || fail "dpkg -L failed"
	grep -E '^/usr/(sbin|lib/modprobe.d)/' /tmp/deb-listed || fail "dpkg -L lists no svcrdma-stat or modprobe.d file"
	grep -qx 'softdep rpcrdma pre: svcrdma_rs' "$DR/usr/lib/modprobe.d/svcrdma_rs.conf" || fail "no softdep in /usr/lib/modprobe.d/svcrdma_rs.conf"
	deps=$(inr modprobe -S "$KREL" --show-depends rpcrdma) || fail "modprobe --show-depends rpcrdma failed"
	echo "$deps" | sed 's/^/  modprobe --show-depends rpcrdma: /'
	echo "$deps" | grep -n 'svcrdma_rs.ko\|rpcrdma.ko' | head -n 1 | has 'svcrdma_rs.ko' ||
		fail "modprobe would not load svcrdma_rs before rpcrdma"
	inr svcrdma-stat --help | head -n 1 || fail "svcrdma-stat --help failed"
	env=$DR/var/lib/svcrdma-rs/kbuild/$KREL/svcrdma-rs.env
	[ -f "$env" ] || fail "the hook made no kbuild tree /var/lib/svcrdma-rs/kbuild/$KREL"
	cat "$env"
	grep -qx 'MAKE_WRAPPER=""' "$env" || fail "the kbuild tree was not prepared with the system's compilers"
}

# deb_rebuild [fresh]: a kernel upgrade, simulated for the same release. A
# new kernel's module is registered with DKMS but not built for it, and the
# new linux-headers package's postinst runs /etc/kernel/header_postinst.d/dkms
# RELEASE (dkms autoinstall). Here: `dkms unbuild -k KREL` (uninstalled and
# its build deleted, the module still registered), then that hook; with
# "fresh", the kbuild tree goes too, so the package's hook must prepare it
# again. (`dkms remove -k KREL` of the only kernel deletes the module from
# the DKMS tree, so autoinstall would then have nothing to build.)
deb_rebuild() {
	local t0 out
	inr dkms unbuild -m "$DEB_NAME" -v "$DEB_VER" -k "$KREL" >/tmp/deb-rebuild.log 2>&1 ||
		{ cat /tmp/deb-rebuild.log; fail "dkms unbuild failed"; }
	[ ! -e "$DR$DEB_KO" ] || fail "dkms unbuild left $DEB_KO"
	echo "after dkms unbuild: $(inr dkms status -m "$DEB_NAME")"
	if [ "${1:-}" = fresh ]; then
		rm -rf "$DR/var/lib/svcrdma-rs/kbuild/$KREL"
		echo "removed /var/lib/svcrdma-rs/kbuild/$KREL"
	fi
	t0=$SECONDS
	inr /etc/kernel/header_postinst.d/dkms "$KREL" >>/tmp/deb-rebuild.log 2>&1 ||
		{ tail -n 30 /tmp/deb-rebuild.log; fail "/etc/kernel/header_postinst.d/dkms $KREL failed"; }
	echo "/etc/kernel/header_postinst.d/dkms $KREL: $((SECONDS - t0)) s"
	grep -E 'Building|Installing|pre_build|Autoinstall' /tmp/deb-rebuild.log | tail -n 8
	out=$(inr dkms status -m "$DEB_NAME")
	echo "dkms status: $out"
	echo "$out" | has "^$DEB_NAME/$DEB_VER, $KREL, x86_64: installed" || fail "not rebuilt: '$out'"
	[ -f "$DR$DEB_KO" ] || fail "no $DEB_KO after the rebuild"
	[ -f "$DR/var/lib/svcrdma-rs/kbuild/$KREL/.svcrdma-ready" ] || fail "no prepared kbuild tree after the rebuild"
}

# deb_purge: apt-get purge removes every file the package added: those
# dpkg -L listed after the install (deb_files), the DKMS tree's, the
# module, /var/lib/svcrdma-rs, and anything else new since the install.
deb_purge() {
	local f left=()
	[ -s /tmp/deb-listed ] || fail "no dpkg -L list from the install (deb_files)"
	inr apt-get purge -y svcrdma-rs-dkms >/tmp/deb-purge.log 2>&1 ||
		{ tail -n 20 /tmp/deb-purge.log; fail "apt-get purge failed"; }
	grep -E 'dkms|Removing|Purging|Deleting' /tmp/deb-purge.log | tail -n 8
	while read -r f; do
		[ -d "$DR$f" ] && continue	# directories other packages share
		[ -e "$DR$f" ] && left+=("$f")
	done </tmp/deb-listed
	for f in "/var/lib/dkms/$DEB_NAME" "$DEB_KO" /var/lib/svcrdma-rs "/usr/src/$DEB_NAME-$DEB_VER"; do
		[ -e "$DR$f" ] && left+=("$f")
	done
	deb_snapshot >/tmp/deb-after
	while read -r f; do left+=("$f (new since the install)"); done < <(comm -13 /tmp/deb-before /tmp/deb-after)
	echo "dpkg -L listed $(wc -l </tmp/deb-listed) paths; after the purge: ${#left[@]} left"
	[ ${#left[@]} = 0 ] || { printf '  left: %s\n' "${left[@]}" | head -n 20; fail "the purge left ${#left[@]} files"; }
}
