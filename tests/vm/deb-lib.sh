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
# Debian's kernels compress their modules (CONFIG_MODULE_COMPRESS_XZ), and
# DKMS installs its builds the same way.
DEB_KO=/lib/modules/$KREL/updates/dkms/svcrdma_rs.ko.xz
DEB_TMP=${TMPDIR:-/tmp}

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

# The files where a package, its maintainer scripts, DKMS and the hook
# write (all of /etc and /var, the kernel's module tree, /usr/src, /usr's
# places for programs, modprobe.d, manuals and documents), except the
# package manager's own state and logs: what is there after a purge and
# was not before the install, the package left.
deb_snapshot() {
	(cd "$DR" && find etc var usr/src usr/sbin usr/bin usr/lib/modprobe.d "usr/lib/modules/$KREL" \
		usr/share/doc usr/share/man \( -path var/lib/dpkg -o -path var/lib/apt -o -path var/cache/apt \
		-o -path var/log -o -path var/cache/debconf -o -path var/tmp \) -prune -o -print) | sort
}

# deb_install: apt-get install ./svcrdma-rs-dkms_*.deb, as an admin would;
# DKMS builds and installs the module for KREL (the hook prepares the
# kernel's Rust metadata first). $DEB_TMP/deb-before: the root's files before.
deb_install() {
	local t0=$SECONDS out
	deb_snapshot >"$DEB_TMP/deb-before"
	[ -z "${DEB_SEED_KBUILD:-}" ] || deb_seed
	cp "$DEB" "$DR/tmp/"
	inr apt-get install -y --no-install-recommends "/tmp/${DEB##*/}" >"$DEB_TMP/deb-install".log 2>&1 ||
		{ tail -n 40 "$DEB_TMP/deb-install".log; cat "$DR/var/lib/dkms/$DEB_NAME/$DEB_VER/build/make.log" 2>/dev/null | tail -n 40; fail "apt-get install ./${DEB##*/} failed"; }
	rm -f "$DR/tmp/${DEB##*/}"
	echo "apt-get install ./${DEB##*/}: $((SECONDS - t0)) s"
	grep -E 'dkms|DKMS|Building|Installing|pre_build|Setting up svcrdma' "$DEB_TMP/deb-install".log | tail -n 15
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
	inr dpkg -L svcrdma-rs-dkms >"$DEB_TMP/deb-listed" || fail "dpkg -L failed"
	grep -E '^/usr/(sbin|lib/modprobe.d)/' "$DEB_TMP/deb-listed" || fail "dpkg -L lists no svcrdma-stat or modprobe.d file"
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
	inr dkms unbuild -m "$DEB_NAME" -v "$DEB_VER" -k "$KREL" >"$DEB_TMP/deb-rebuild".log 2>&1 ||
		{ cat "$DEB_TMP/deb-rebuild".log; fail "dkms unbuild failed"; }
	[ ! -e "$DR$DEB_KO" ] || fail "dkms unbuild left $DEB_KO"
	echo "after dkms unbuild: $(inr dkms status -m "$DEB_NAME")"
	if [ "${1:-}" = fresh ]; then
		rm -rf "$DR/var/lib/svcrdma-rs/kbuild/$KREL"
		echo "removed /var/lib/svcrdma-rs/kbuild/$KREL"
	fi
	t0=$SECONDS
	inr /etc/kernel/header_postinst.d/dkms "$KREL" >>"$DEB_TMP/deb-rebuild".log 2>&1 ||
		{ tail -n 30 "$DEB_TMP/deb-rebuild".log; fail "/etc/kernel/header_postinst.d/dkms $KREL failed"; }
	echo "/etc/kernel/header_postinst.d/dkms $KREL: $((SECONDS - t0)) s"
	grep -E 'Building|Installing|pre_build|Autoinstall' "$DEB_TMP/deb-rebuild".log | tail -n 8
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
	[ -s "$DEB_TMP/deb-listed" ] || fail "no dpkg -L list from the install (deb_files)"
	deb_unseed
	inr apt-get purge -y svcrdma-rs-dkms >"$DEB_TMP/deb-purge".log 2>&1 ||
		{ tail -n 20 "$DEB_TMP/deb-purge".log; fail "apt-get purge failed"; }
	grep -E 'dkms|Removing|Purging|Deleting' "$DEB_TMP/deb-purge".log | tail -n 8
	while read -r f; do
		[ -d "$DR$f" ] && continue	# directories other packages share
		[ -e "$DR$f" ] && left+=("$f")
	done <"$DEB_TMP/deb-listed"
	for f in "/var/lib/dkms/$DEB_NAME" "$DEB_KO" /var/lib/svcrdma-rs "/usr/src/$DEB_NAME-$DEB_VER"; do
		[ -e "$DR$f" ] && left+=("$f")
	done
	# DKMS's own signing key, made at its first build (any DKMS module's),
	# stays with dkms: it may be enrolled as a MOK for Secure Boot.
	deb_snapshot | grep -vxE 'var/lib/dkms/mok\.(key|pub)' >"$DEB_TMP/deb-after"
	while read -r f; do left+=("$f (new since the install)"); done < <(comm -13 "$DEB_TMP/deb-before" "$DEB_TMP/deb-after")
	echo "dpkg -L listed $(wc -l <"$DEB_TMP/deb-listed") paths; after the purge: ${#left[@]} left"
	[ ${#left[@]} = 0 ] || { printf '  left: %s\n' "${left[@]:0:20}"; fail "the purge left ${#left[@]} files"; }
}

# ---- In the VM booted on Debian's own kernel KREL (tests/vm/distro.sh,
# tests/vm/deb.sh): DR plays the server's root. Needs rdma.sh and nfs.sh.

# deb_seed: the kbuild tree scripts/distro-kernel prepared on the host for
# this kernel with the same compilers (DEB_SEED_KBUILD, DEB_SEED_SRC, its
# source), bind-mounted where the package's hook looks. The hook checks the
# tree's kernel version and compilers and reuses it: its rust/ build takes
# ~2 min on the host and far longer under emulation (tests/host/deb.sh
# shows the hook making it from nothing). deb_unseed takes them away again
# before the purge: they are the test's, not the package's.
deb_seed() {
	local d
	for d in $(deb_seed_dirs); do
		mkdir -p "$DR${d#*=}"
		mount --bind "${d%%=*}" "$DR${d#*=}" || fail "cannot bind ${d%%=*} at ${d#*=} in the root"
	done
}
# deb_seed_dirs: HOSTDIR=DIR pairs. The hook looks under /var/lib/svcrdma-rs;
# the kbuild tree names itself and its source by the host's paths, so both
# are there too when the host prepared them elsewhere (SVCRDMA_KBUILD_ROOT).
deb_seed_dirs() {
	local src=/var/lib/svcrdma-rs/src/${DEB_SEED_SRC##*/} kb=/var/lib/svcrdma-rs/kbuild/$KREL
	echo "${DEB_SEED_SRC:?}=$src"
	[ "$DEB_SEED_SRC" = "$src" ] || echo "$DEB_SEED_SRC=$DEB_SEED_SRC"
	echo "${DEB_SEED_KBUILD:?}=$kb"
	[ "$DEB_SEED_KBUILD" = "$kb" ] || echo "$DEB_SEED_KBUILD=$DEB_SEED_KBUILD"
}
# deb_unseed: unmounted; the mount points outside /var/lib/svcrdma-rs
# removed again where empty (the package's purge must remove that one).
deb_unseed() {
	local d
	[ -n "${DEB_SEED_KBUILD:-}" ] || return 0
	for d in $(deb_seed_dirs); do
		! mountpoint -q "$DR${d#*=}" || umount "$DR${d#*=}"
	done
	for d in $(deb_seed_dirs); do
		d=${d#*=}
		[[ $d == /var/lib/svcrdma-rs/* ]] || [ ! -d "$DR$d" ] ||
			rmdir -p --ignore-fail-on-non-empty "$DR$d" 2>/dev/null || true
	done
	return 0
}

# deb_kernel_modprobe on|off: the kernel's own module requests (nfsd asking
# for "svcrdma", an NFS mount asking for "rpcrdma") go to DR's modprobe, as
# on a server whose root DR is, or back to the guest's.
deb_kernel_modprobe() {
	if [ "$1" = on ]; then
		printf '#!/bin/sh\nexec /usr/sbin/chroot %s /sbin/modprobe "$@"\n' "$DR" >/run/deb-modprobe
		chmod 755 /run/deb-modprobe
		echo /run/deb-modprobe >/proc/sys/kernel/modprobe
	else
		echo /sbin/modprobe >/proc/sys/kernel/modprobe
	fi
}

# in_nfsroot CMD...: CMD in DR with nfsd's file system (nfs-utils' programs).
in_nfsroot() {
	unshare --mount --propagation private -- sh -c \
		'mount -t proc proc "$0/proc" && mount -t nfsd nfsd "$0/proc/fs/nfsd" && mount --rbind /dev "$0/dev" && exec chroot "$0" "$@"' "$DR" "$@"
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
	echo "4 MiB written and read back intact over NFSv4.2/RDMA"
	rm -f $mnt/nfsdctl
	timeout 120 umount $mnt || fail "umount failed"
}
unload_all() {
	in_nfsroot nfsdctl threads 0 || rpc.nfsd 0
	wait_for 30 rmmod svcrdma_rs || fail "rmmod svcrdma_rs failed"
	wait_for 30 rmmod rpcrdma || fail "rmmod rpcrdma failed"
}

# deb_rdma_core_load: rdma-core's boot-time module list
# (/etc/rdma/modules/rdma.conf: xprtrdma and svcrdma, both rpcrdma),
# loaded as systemd-modules-load does, through modprobe: the package's
# softdep loads svcrdma_rs, the one DKMS built, first; it holds "rdma".
deb_rdma_core_load() {
	local mods v
	[ ! -d /sys/module/rpcrdma ] && [ ! -d /sys/module/svcrdma_rs ] || fail "rpcrdma or svcrdma_rs already loaded"
	mods=$(grep -Ev '^[[:space:]]*(#|$)' "$DR/etc/rdma/modules/rdma.conf")
	echo "rdma-core's modules:" $mods
	# shellcheck disable=SC2086
	inr modprobe -a $mods || fail "modprobe -a $mods failed"
	grep -E '^(svcrdma_rs|rpcrdma) ' /proc/modules
	[ -d /sys/module/rpcrdma ] || fail "rpcrdma is not loaded"
	rd /sys/module/svcrdma_rs/parameters/xprt_name
	[ "$REPLY" = rdma ] || fail "svcrdma_rs is not loaded holding rdma ('$REPLY')"
	v=$(cat /sys/module/svcrdma_rs/version)
	echo "loaded svcrdma_rs $v from $(inr modinfo -n svcrdma_rs)"
	[ "$v" = "$(modinfo -F version "$DR$DEB_KO")" ] || fail "the loaded svcrdma_rs is not the one DKMS built"
}

# deb_rpc_nfsd: nfs-utils' rpc.nfsd --rdma=20049 (DR's nfs-kernel-server)
# with rpcrdma loaded as above: svcrdma_rs serves a mount over soft-RoCE.
deb_rpc_nfsd() {
	[ -d /sys/module/svcrdma_rs ] || fail "svcrdma_rs is not loaded (deb_rdma_core_load)"
	rdma_add rxe rxe0 || return 1
	nfsd_prepare
	in_nfsroot rpc.nfsd --rdma=20049 || fail "rpc.nfsd --rdma=20049 failed"
	serving_rdma
	unload_all
}

# deb_upgrade_rebuild: deb_rebuild, then the rebuilt module is the one
# a load of rpcrdma loads first (whatever earlier tests left loaded is
# unloaded before: svcrdma_rs refuses "rdma" while rpcrdma holds it).
deb_upgrade_rebuild() {
	local v m
	[ ! -w /proc/fs/nfsd/threads ] || echo 0 >/proc/fs/nfsd/threads
	for m in svcrdma_rs rpcrdma; do
		[ ! -d "/sys/module/$m" ] || wait_for 30 rmmod "$m" || fail "rmmod $m failed"
	done
	deb_rebuild
	inr modprobe rpcrdma || fail "modprobe rpcrdma failed after the rebuild"
	v=$(cat /sys/module/svcrdma_rs/version 2>/dev/null) || fail "modprobe rpcrdma did not load svcrdma_rs"
	rd /sys/module/svcrdma_rs/parameters/xprt_name
	echo "after the rebuild, modprobe rpcrdma loads svcrdma_rs $v first, holding '$REPLY'"
	[ "$REPLY" = rdma ] || fail "svcrdma_rs does not hold rdma"
	[ "$v" = "$(modinfo -F version "$DR$DEB_KO")" ] || fail "the loaded module is not the rebuilt one"
	wait_for 30 rmmod rpcrdma || fail "rmmod rpcrdma failed"
	rmmod svcrdma_rs || fail "rmmod svcrdma_rs failed"
}
