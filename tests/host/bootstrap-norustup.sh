#!/usr/bin/env bash
# scripts/bootstrap on a fresh Debian 12 (bookworm) without rustup, for real
# (make bootstrap-test; not in make check: it downloads a root and ~2 GB of
# packages). In a scratch root:
#   1. a bookworm base (debootstrap, cached in $WORK/base) with the apt
#      sources the Debian installer writes (bookworm, -updates, -security),
#      rpcbind installed and enabled as the admin's own service;
#   2. per run, an overlay on the base with a copy of this tree in /src; PATH
#      has no rustup (/usr/sbin:/usr/bin:/sbin:/bin, HOME=/root, no ~/.cargo);
#   3. scripts/bootstrap runs, then is checked: cargo, rustc, rustfmt and
#      cargo-clippy are rustc-web's (dpkg: rustc-web, cargo-web, rustfmt-web,
#      rust-web-clippy), bindgen --version is the wanted one,
#      rpcbind's enablement is what it was, the new nfs-server is disabled;
#   4. make host-test with the packaged toolchain;
#   5. scripts/bootstrap again: idempotent, installs nothing.
#
#   tests/host/bootstrap-norustup.sh [--src DIR] [--debian-cargo] [--keep]
#     --src DIR       bootstrap the tree in DIR (default: this one), e.g. an
#                     older commit's checkout, to see it fail
#     --debian-cargo  the base also has Debian's own cargo/rustc/rustfmt
#                     (1.63, too old for bindgen-cli; rustc-web conflicts
#                     with them)
#     --keep          keep the run's overlay (default: removed at the end)
#   SVCRDMA_BOOTSTRAP_TEST_DIR (default /var/tmp/svcrdma-bootstrap-test):
#   the base root, the shared apt archive cache and the runs. Remove it with
#   rm -rf when done (the base is ~400 MB).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
src=$root
debian_cargo=0
keep=0
while [ $# -gt 0 ]; do
	case $1 in
	--src) src=$(cd "$2" && pwd); shift 2 ;;
	--debian-cargo) debian_cargo=1; shift ;;
	--keep) keep=1; shift ;;
	*) echo "usage: $0 [--src DIR] [--debian-cargo] [--keep]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "run as root (debootstrap, mount, chroot)" >&2; exit 2; }

WORK=${SVCRDMA_BOOTSTRAP_TEST_DIR:-/var/tmp/svcrdma-bootstrap-test}
MIRROR=${SVCRDMA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${SVCRDMA_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
base=$WORK/base
[ $debian_cargo = 0 ] || base=$WORK/base-debian-cargo
archives=$WORK/apt-archives
run=$WORK/run-$$
mnt=$run/root
start=$(date +%s)
log() { printf '[%4ds] %s\n' $(( $(date +%s) - start )) "$*"; }
pass=0
failed=0
ok() { log "PASS: $*"; pass=$((pass + 1)); }
bad() { log "FAIL: $*"; failed=$((failed + 1)); }

mounts=()
cleanup() {
	local i
	for (( i=${#mounts[@]}-1; i>=0; i-- )); do
		umount -l "${mounts[$i]}" 2>/dev/null || true
	done
	[ $keep = 1 ] || rm -rf "$run"
}
trap cleanup EXIT
bind() { mkdir -p "$2"; mount --bind "$1" "$2"; mounts+=("$2"); }
# Run in a root with a clean environment: no rustup in PATH, HOME=/root.
inroot() {
	local r=$1; shift
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LANG=C.UTF-8 \
		chroot "$r" "$@"
}
with_sys() {
	local r=$1
	bind /proc "$r/proc"
	bind /sys "$r/sys"
	bind /dev "$r/dev"
	bind /dev/pts "$r/dev/pts"
	bind "$archives" "$r/var/cache/apt/archives"
}
unmount_all() {
	local i
	for (( i=${#mounts[@]}-1; i>=0; i-- )); do
		umount "${mounts[$i]}" || umount -l "${mounts[$i]}"
	done
	mounts=()
}

mkdir -p "$WORK" "$archives/partial"
# --- 1. the base root -----------------------------------------------------------
if [ ! -f "$base/.svcrdma-base" ]; then
	if [ ! -f "$base/.svcrdma-debootstrapped" ]; then
		command -v debootstrap >/dev/null ||
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
		log "debootstrap bookworm $base (~2 min)"
		rm -rf "$base"
		debootstrap bookworm "$base" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
			{ tail -n 20 "$WORK/debootstrap.log"; exit 1; }
		touch "$base/.svcrdma-debootstrapped"
	fi
	log "preparing the base: apt sources as the installer writes them, rpcbind"
	cat >"$base/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $SECURITY bookworm-security main
deb $MIRROR bookworm-updates main
EOF
	# A throwaway root: no fsync per file.
	echo force-unsafe-io >"$base/etc/dpkg/dpkg.cfg.d/svcrdma-unsafe-io"
	extra=(rpcbind)
	[ $debian_cargo = 0 ] || extra+=(cargo rustc rustfmt)
	with_sys "$base"
	inroot "$base" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"' \
		sh "${extra[@]}" >"$WORK/base-packages.log" 2>&1 ||
		{ tail -n 20 "$WORK/base-packages.log"; exit 1; }
	unmount_all
	touch "$base/.svcrdma-base"
fi

# --- 2. the run's root: an overlay on the base, this tree in /src ----------------
mkdir -p "$run/upper" "$run/work" "$mnt"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$run/upper,workdir=$run/work" "$mnt"
mounts+=("$mnt")
with_sys "$mnt"
mkdir -p "$mnt/src"
# The tree as git sees it (tracked and untracked files, none ignored), with
# its .git so scripts/version works.
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
	tar --null -T - -cf - 2>/dev/null) | tar -C "$mnt/src" -xf -
# This machine's TLS trust (a workplace may intercept HTTPS with its own CA):
# ca-certificates, when scripts/bootstrap installs it, adds it to the
# root's bundle. Without ca-certificates nothing in the root reads it.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
	mkdir -p "$mnt/usr/local/share/ca-certificates"
	cp /etc/ssl/certs/ca-certificates.crt "$mnt/usr/local/share/ca-certificates/svcrdma-test-host.crt"
	# A root that has ca-certificates already (--debian-cargo) takes it now.
	[ ! -x "$mnt/usr/sbin/update-ca-certificates" ] ||
		inroot "$mnt" update-ca-certificates >/dev/null 2>&1
fi
log "tree: $src ($(git -C "$src" describe --always --dirty 2>/dev/null)) copied to /src of $mnt"

enabled() { inroot "$mnt" systemctl is-enabled "$1" 2>/dev/null || true; }
units=(rpcbind.service rpcbind.socket nfs-server.service)
declare -A before
for u in "${units[@]}"; do
	before[$u]=$(enabled "$u")
	log "before bootstrap: systemctl is-enabled $u: ${before[$u]:-(no such unit)}"
done
for t in cargo rustc rustfmt cargo-clippy; do
	log "before bootstrap: command -v $t: $(inroot "$mnt" sh -c "command -v $t" || echo none)"
done

# --- 3. scripts/bootstrap --------------------------------------------------------
log "chroot $mnt env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /src/scripts/bootstrap"
rc=0
inroot "$mnt" /src/scripts/bootstrap >"$run.bootstrap.log" 2>&1 || rc=$?
grep -E '^bootstrap:|error|Error|E: ' "$run.bootstrap.log" | tail -n 25 || true
log "scripts/bootstrap exited $rc (log: $run.bootstrap.log)"
if [ $rc = 0 ]; then ok "scripts/bootstrap completed"; else bad "scripts/bootstrap exited $rc"; fi

for t in cargo rustc rustfmt cargo-clippy; do
	p=$(inroot "$mnt" sh -c "command -v $t" || true)
	if [ -z "$p" ]; then
		bad "no $t in PATH after bootstrap"
		continue
	fi
	pkg=$(inroot "$mnt" dpkg -S "$(inroot "$mnt" readlink -f "$p")" 2>/dev/null | cut -d: -f1 || true)
	v=$(inroot "$mnt" "$t" --version 2>&1 | head -n 1 || true)
	# The toolchain of rustc-web (the kernel's compiler), not Debian's old
	# cargo/rustfmt 1.63 packages.
	case $pkg in
	rustc-web|cargo-web|rustfmt-web|rust-web-clippy) ok "$t is $p from Debian's $pkg: $v" ;;
	'') bad "$t is $p, not from a Debian package: $v" ;;
	*) bad "$t is $p from Debian's $pkg, not rustc-web's toolchain: $v" ;;
	esac
done
want_bg=$(. "$src/scripts/lib.sh" && echo "$SVCRDMA_BINDGEN_VERSION")
bg=$(inroot "$mnt" bash -c '. /src/scripts/lib.sh && svcrdma_bindgen')
bgv=$(inroot "$mnt" "$bg" --version 2>&1 || true)
if [ "$bgv" = "bindgen $want_bg" ]; then ok "$bg --version: $bgv"; else bad "$bg --version: '$bgv', want 'bindgen $want_bg'"; fi

for u in "${units[@]}"; do
	a=$(enabled "$u")
	log "after bootstrap: systemctl is-enabled $u: ${a:-(no such unit)}"
	case $u in
	nfs-server.service)
		# Installed by bootstrap: must not start at the next boot.
		if [ -z "${before[$u]}" ] && [ "$a" = disabled ]; then ok "$u (new) is disabled"
		elif [ -n "${before[$u]}" ] && [ "$a" = "${before[$u]}" ]; then ok "$u unchanged"
		else bad "$u: '${before[$u]}' -> '$a'"; fi ;;
	*)
		if [ "$a" = "${before[$u]}" ]; then ok "$u unchanged (${a:-none})"
		else bad "$u changed: '${before[$u]}' -> '$a'"; fi ;;
	esac
done
if [ -e "$mnt/usr/sbin/policy-rc.d" ]; then bad "policy-rc.d left behind"; else ok "no policy-rc.d left behind"; fi

# --- 4. make host-test with the packaged toolchain ------------------------------
if [ $rc = 0 ]; then
	log "chroot: make -C /src host-test"
	hrc=0
	inroot "$mnt" make -C /src host-test >"$run.host-test.log" 2>&1 || hrc=$?
	grep -E '^==|test result|passed|error|warning' "$run.host-test.log" | tail -n 30 || true
	if [ $hrc = 0 ]; then ok "make host-test (log: $run.host-test.log)"
	else bad "make host-test exited $hrc (log: $run.host-test.log)"; tail -n 30 "$run.host-test.log"; fi

	# --- 5. idempotent ---------------------------------------------------------------
	rc2=0
	inroot "$mnt" /src/scripts/bootstrap >"$run.bootstrap2.log" 2>&1 || rc2=$?
	if [ $rc2 = 0 ] && ! grep -q -E 'installing' "$run.bootstrap2.log"; then
		ok "second scripts/bootstrap: exit 0, installs nothing"
	else
		bad "second scripts/bootstrap: exit $rc2"; cat "$run.bootstrap2.log"
	fi
fi

log "$pass passed, $failed failed"
[ $failed = 0 ]
