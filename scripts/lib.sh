# Shared settings for svcrdma_rs scripts. Sourced, not run.
# shellcheck shell=bash

# Where everything built or downloaded outside the repository lives.
SVCRDMA_CACHE=${SVCRDMA_CACHE:-/var/cache/svcrdma-rs}
# The Debian kernel source package we build against.
SVCRDMA_KSRC_PKG=${SVCRDMA_KSRC_PKG:-linux-source-7.3}
# Toolchain: clang/lld/llvm 19 (Rust + KASAN needs a clang-built kernel),
# bookworm's rustc-web with its matching standard library source, bindgen
# from crates.io in our own prefix (the machine's rustup toolchain is not touched).
SVCRDMA_LLVM_SUFFIX=${SVCRDMA_LLVM_SUFFIX:--19}
SVCRDMA_TOOLS=$SVCRDMA_CACHE/tools
SVCRDMA_BINDGEN_VERSION=0.71.1

say() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# The kernel's Rust toolchain: rustc-web's compiler and its library source.
svcrdma_rustc() { echo /usr/bin/rustc; }
svcrdma_rust_lib_src() {
	local d
	d=$(ls -d /usr/src/rustc-*/library 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] || return 1
	echo "$d"
}
svcrdma_bindgen() { echo "$SVCRDMA_TOOLS/bin/bindgen"; }

# make variables every kernel-tree make (kernel and module) gets.
svcrdma_kmake_vars() {
	local src
	src=$(svcrdma_rust_lib_src) || die "Rust library source not found: run scripts/bootstrap"
	echo "LLVM=$SVCRDMA_LLVM_SUFFIX RUSTC=$(svcrdma_rustc) RUST_LIB_SRC=$src BINDGEN=$(svcrdma_bindgen)"
}
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}

# The stock Debian kernel make check builds for and boots: the newest
# linux-image-7.3.*-amd64 apt knows (trixie-backports; scripts/bootstrap
# adds it pinned at priority 1).
svcrdma_stock_krel() {
	apt-cache search --names-only '^linux-image-7\.3\.[0-9]+\+deb[0-9]+-amd64$' |
		awk '{print $1}' | sed 's/^linux-image-//' | sort -V | tail -n 1
}

# svcrdma_bench_module DEST KDIR [MAKE ARG...]: the tree's module built for
# the kernel in KDIR in a copy of the sources at DEST (the tree's own
# svcrdma_rs.ko, built for the test kernel, is not touched); the build's
# output in DEST/build.log.
svcrdma_bench_module() {
	local dest=$1 kdir=$2 root
	shift 2
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	mkdir -p "$dest"
	rsync -a --delete --exclude target --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' \
		--exclude bindings_generated.rs \
		"$root"/Makefile "$root"/Kbuild "$root"/Kconfig "$root"/rust "$root"/include "$root"/scripts "$dest"/
	make --no-print-directory -C "$dest" module KDIR="$kdir" SVCRDMA_RS_WERROR=1 "$@" >"$dest/build.log" 2>&1 ||
		{ tail -n 30 "$dest/build.log"; die "the module build in $dest failed"; }
}

# svcrdma_insnprof: builds the instruction-counting QEMU plugin
# (scripts/insnprof) and prints its path.
svcrdma_insnprof() {
	local plugin=$SVCRDMA_CACHE/tools/insnprof.so
	mkdir -p "$SVCRDMA_CACHE/tools"
	gcc -O2 -shared -fPIC -fvisibility=hidden -o "$plugin" "$(dirname "${BASH_SOURCE[0]}")/insnprof/insnprof.c" -lpthread ||
		die "cannot build the instruction-counting plugin"
	echo "$plugin"
}
