#!/bin/bash
# The install routes, on the host in scratch roots (no VM; tests/vm/run
# "install"): MODULE_VERSION, `make install`/`make uninstall` with DESTDIR,
# the refusal to install a module for a kernel this host does not have, and
# a DKMS add/build/install/remove round trip against the test kernel in a
# scratch DKMS tree (--dkmstree/--sourcetree/--installtree, --no-depmod).
# Nothing outside the scratch directory changes. (The guest-side install —
# modprobe, rdma-core's load, nfsd — is in dropin-server.sh.)
#
#   KDIR=<tree> tests/vm/install.sh   (default: the cached test kernel)
. "$(dirname "$0")/lib.sh"
KDIR=${KDIR:-/var/cache/svcrdma-rs/kernel/test}
KREL=$(cat "$KDIR/include/config/kernel.release")
KO=$ROOT/svcrdma_rs.ko
SCRATCH=$(mktemp -d /tmp/svcrdma-install.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT

# modinfo's version is git describe of the tree when the module was built.
# Others may commit between that build and this test: the commit it names
# must exist, not be the newest.
t_version() {
	local v want pv h
	want=$("$ROOT/scripts/version" "$ROOT")
	v=$(modinfo -F version "$KO")
	echo "modinfo -F version svcrdma_rs.ko: $v (scripts/version now: $want)"
	[ -n "$v" ] && [ "$v" != unknown ] || fail "no version in the module"
	h=${v%-dirty}
	h=${h##*-g}
	git -C "$ROOT" cat-file -e "$h^{commit}" || fail "the module's version '$v' names no commit of this tree"
	pv=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$ROOT/dkms.conf")
	[ "$pv" = "$(cat "$ROOT/VERSION")" ] || fail "dkms.conf's PACKAGE_VERSION '$pv' is not VERSION's"
	# A copy without .git (a tarball) falls back to VERSION.
	mkdir "$SCRATCH/nogit" && cp "$ROOT/VERSION" "$SCRATCH/nogit/"
	[ "$("$ROOT/scripts/version" "$SCRATCH/nogit")" = "$pv" ] || fail "no fallback to VERSION without .git"
}

t_make_install_destdir() {
	local d=$SCRATCH/root
	make -C "$ROOT" --no-print-directory install KDIR="$KDIR" DESTDIR="$d" || fail "make install DESTDIR=$d failed"
	find "$d" -type f | sed "s|^$d||" | sort
	[ -f "$d/lib/modules/$KREL/updates/svcrdma_rs.ko" ] || fail "no module in updates/"
	cmp -s "$d/etc/modprobe.d/svcrdma_rs.conf" "$ROOT/modprobe/svcrdma_rs.conf" || fail "no modprobe.d file"
	[ -x "$d/usr/sbin/svcrdma-stat" ] || fail "no svcrdma-stat in /usr/sbin"
	local said
	said=$("$d/usr/sbin/svcrdma-stat" -1 --sysfs "$d/nothing" 2>&1) && fail "svcrdma-stat succeeded without the module"
	[[ $said == *"not loaded"* ]] || fail "the installed svcrdma-stat does not say the module is not loaded: $said"
	grep -q '^updates/svcrdma_rs.ko:' "$d/lib/modules/$KREL/modules.dep" || fail "depmod did not list the module"
	# modprobe in the scratch root finds it, and rpcrdma's softdep names it.
	modprobe -d "$d" -S "$KREL" --show-depends svcrdma_rs | has 'updates/svcrdma_rs.ko' ||
		fail "modprobe -d does not find it"
	modprobe -d "$d" -S "$KREL" -C "$d/etc/modprobe.d" -c | has '^softdep rpcrdma pre: svcrdma_rs' ||
		fail "modprobe's configuration has no softdep for rpcrdma"
	make -C "$ROOT" --no-print-directory uninstall KDIR="$KDIR" DESTDIR="$d" || fail "make uninstall failed"
	[ ! -e "$d/lib/modules/$KREL/updates/svcrdma_rs.ko" ] || fail "the module is still there"
	[ ! -e "$d/etc/modprobe.d/svcrdma_rs.conf" ] || fail "the modprobe.d file is still there"
	[ ! -e "$d/usr/sbin/svcrdma-stat" ] || fail "svcrdma-stat is still there"
	! grep -q svcrdma_rs "$d/lib/modules/$KREL/modules.dep" || fail "modules.dep still lists it"
}

t_make_install_refuses_other_kernel() {
	[ ! -d "/lib/modules/$KREL" ] || { echo "this host has /lib/modules/$KREL: nothing to refuse"; return 0; }
	local had=0
	[ -e /etc/modprobe.d/svcrdma_rs.conf ] && had=1
	if make -C "$ROOT" --no-print-directory install KDIR="$KDIR" 2>"$SCRATCH/err"; then
		fail "make install put a module for $KREL into this host's /lib/modules"
	fi
	cat "$SCRATCH/err"
	grep -q "does not exist" "$SCRATCH/err" || fail "the refusal does not say why"
	[ $had = 1 ] || [ ! -e /etc/modprobe.d/svcrdma_rs.conf ] || fail "make install wrote /etc/modprobe.d"
}

# dkms in a scratch tree; SVCRDMA_RS_DESTDIR points dkms.conf's hooks
# (the modprobe.d file) at the scratch root.
dk() { dkms "$@" --dkmstree "$SCRATCH/dkms" --sourcetree "$SCRATCH/src" --installtree "$SCRATCH/droot/lib/modules"; }

t_dkms_round_trip() {
	local v ver scm mod=$SCRATCH/droot/lib/modules/$KREL/updates/dkms/svcrdma_rs.ko
	ver=$(cat "$ROOT/VERSION")
	export SVCRDMA_RS_DESTDIR=$SCRATCH/droot
	mkdir -p "$SCRATCH/dkms" "$SCRATCH/src" "$SCRATCH/droot/lib/modules/$KREL"
	"$ROOT/scripts/dkms-src" "$SCRATCH/src" || fail "scripts/dkms-src failed"
	scm=$(cat "$SCRATCH/src/svcrdma_rs-$ver/scmversion")
	dk add -m svcrdma_rs -v "$ver" || fail "dkms add failed"
	dk build -m svcrdma_rs -v "$ver" -k "$KREL" --kernelsourcedir "$KDIR" ||
		{ cat "$SCRATCH/dkms/svcrdma_rs/$ver/build/make.log" 2>/dev/null | tail -n 30; fail "dkms build failed"; }
	dk install -m svcrdma_rs -v "$ver" -k "$KREL" --kernelsourcedir "$KDIR" --no-depmod || fail "dkms install failed"
	dk status -m svcrdma_rs
	dk status -m svcrdma_rs | has "installed" || fail "dkms status does not say installed"
	[ -f "$mod" ] || fail "no module at $mod"
	v=$(modinfo -F version "$mod")
	echo "DKMS-built module: version $v, vermagic $(modinfo -F vermagic "$mod")"
	[ "$v" = "$scm" ] || fail "version '$v' is not the source's scmversion '$scm'"
	[ "$(modinfo -F vermagic "$mod" | cut -d' ' -f1)" = "$KREL" ] || fail "built for the wrong kernel"
	[ -f "$SCRATCH/droot/etc/modprobe.d/svcrdma_rs.conf" ] || fail "POST_INSTALL did not install the modprobe.d file"
	dk remove -m svcrdma_rs -v "$ver" --all --kernelsourcedir "$KDIR" --no-depmod || fail "dkms remove failed"
	[ ! -e "$mod" ] || fail "the module is still installed"
	[ ! -e "$SCRATCH/droot/etc/modprobe.d/svcrdma_rs.conf" ] || fail "POST_REMOVE left the modprobe.d file"
	[ ! -e "$SCRATCH/dkms/svcrdma_rs/$ver" ] || fail "dkms still has svcrdma_rs/$ver"
}

t_plan 4
t_run version t_version
t_run make_install_destdir t_make_install_destdir
t_run make_install_refuses_other_kernel t_make_install_refuses_other_kernel
t_run dkms_round_trip t_dkms_round_trip
t_summary
