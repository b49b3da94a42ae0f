# SPDX-License-Identifier: GPL-2.0
#
# svcrdma_rs — developer entry points. The module itself is built by Kbuild
# (see Kbuild); this file drives it and the tests.
#
#   make            build svcrdma_rs.ko against KDIR (default: the cached
#                   test kernel, built first if missing)
#   make check      host tests, lint, warning-free module build, VM tests
#   make demo       boot a VM, serve an NFS mount over RDMA with the module
#   make kernel     build (or reuse) the cached test kernel
#   make host-test  cargo test / fmt / clippy of rust/proto, rustfmt of the rest
#   make bench      svcrdma_rs vs the C svcrdma, one VM run per soft device (scripts/bench):
#                   tables in results/bench-<time>/ (results/latest)
#   make bench-proto   host micro-benchmarks of the rust/proto codecs
#   make vm-test    the VM test suite (needs the module built)
#   make vm-test-data  the full-size data-path suites (data, data-c)
#   make install    svcrdma_rs.ko (built) into /lib/modules/<KDIR's release>/
#                   updates/, /etc/modprobe.d/svcrdma_rs.conf, depmod
#                   (DESTDIR=DIR or INSTALL_MOD_PATH=DIR: a scratch root)
#   make uninstall  removes both again, depmod
#   make dkms-add   a clean copy in /usr/src/svcrdma_rs-<VERSION> and
#                   dkms add (then: dkms build/install svcrdma_rs/<VERSION>)
#   make deb        the Debian package build/svcrdma-rs-dkms_<VERSION>_all.deb
#                   (DKMS; for Debian's 7.3 kernels; scripts/build-deb, lintian)
#   make deb-test   the package in a Debian trixie root on the host: apt-get
#                   install (its hook prepares the kernel's Rust metadata from
#                   nothing), files, rebuild, purge (tests/host/deb.sh, ~10 min)
#   make deb-vm-test  the package in a VM on Debian's own 7.3 kernel: install,
#                   rdma-core's load, rpc.nfsd --rdma=20049, a mount, rebuild,
#                   purge (tests/vm/deb.sh; make check's distro suite has
#                   all but the rebuild, with the install and purge on the host)
#   make bootstrap-test  scripts/bootstrap in a fresh Debian 12 root without
#                   rustup (debootstrap + chroot; not in make check)
#   make stall      two VMs: client A stops acknowledging mid-transfer while
#                   client B's answers are timed (each under 2 s;
#                   tests/vm/stall-server.sh; also part of make hostile)
#   make mutants    builds the module with each planted fault (a patch,
#                   tests/mutants/<name>.patch, applied to a copy of the
#                   sources in build/mutant-<name>/) and runs the narrowed
#                   suite that must catch it, one VM each; passes only if
#                   every mutant is caught (tests/vm/run mutants;
#                   MUTANTS="a b" for some; not in make check); then the
#                   backchannel suite against a module built without the
#                   backchannel, which must fail it (backchannel-off)
#   make hostile    the hostile RPC-over-RDMA client at full count (1,000,000
#                   mutated messages), the fault suite at full count and the
#                   private data of every length, one VM each
#
# KDIR=<tree>       any built, Rust-enabled kernel tree
# KMAKE_VARS=...    toolchain variables for that tree (default: ours, see
#                   scripts/lib.sh: LLVM=-19 RUSTC=... RUST_LIB_SRC=... BINDGEN=...)
# SVCRDMA_RS_BACKCHANNEL=n  without the NFSv4.1 backchannel (Kconfig:
#                   SVCRDMA_RS_BACKCHANNEL; default y): for the test that
#                   shows the backchannel suite fails without it

SHELL := /bin/bash
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
SVCRDMA_CACHE ?= /var/cache/svcrdma-rs
DEFAULT_KDIR := $(SVCRDMA_CACHE)/kernel/test
KDIR ?= $(DEFAULT_KDIR)
KMAKE_VARS ?= $(shell . $(ROOT)/scripts/lib.sh && svcrdma_kmake_vars)
# Warnings fail the build when set (make check sets it).
SVCRDMA_RS_WERROR ?=
# The dma_mr parameter's default (Kconfig: SVCRDMA_RS_DMA_MR_DEFAULT).
SVCRDMA_RS_DMA_MR_DEFAULT ?= ib_only
# The NFSv4.1 backchannel (Kconfig: SVCRDMA_RS_BACKCHANNEL): on unless
# SVCRDMA_RS_BACKCHANNEL=n. tests/vm/run backchannel-off builds a module
# without it in a copy of the sources (build/nobackchannel/).
SVCRDMA_RS_BACKCHANNEL ?= y
# Test hooks (Kconfig: SVCRDMA_RS_DEBUG): on for the test kernel.
ifeq ($(KDIR),$(DEFAULT_KDIR))
SVCRDMA_RS_DEBUG ?= y
else
SVCRDMA_RS_DEBUG ?= n
endif

.PHONY: all module clippy kernel bootstrap host-test bench bench-insns bench-twovm bench-proto vm-test vm-test-data hostile stall dropin mutants check demo clean \
	install uninstall dkms-add deb deb-test deb-vm-test

all: module

# Build the default kernel only when KDIR was not chosen by the caller.
ifeq ($(KDIR),$(DEFAULT_KDIR))
module: kernel
endif
module:
	$(MAKE) -C $(KDIR) M=$(ROOT) $(KMAKE_VARS) CONFIG_SVCRDMA_RS=m \
		SVCRDMA_RS_WERROR=$(SVCRDMA_RS_WERROR) \
		SVCRDMA_RS_DMA_MR_DEFAULT=$(SVCRDMA_RS_DMA_MR_DEFAULT) \
		SVCRDMA_RS_DEBUG=$(SVCRDMA_RS_DEBUG) \
		SVCRDMA_RS_BACKCHANNEL=$(SVCRDMA_RS_BACKCHANNEL) modules

# The module under the kernel's own lints (CLIPPY=1: clippy-driver with the
# kernel's clippy flags); warnings are errors. The driver must be the
# clippy of the kernel's rustc (rustc-web's: rust-web-clippy).
CLIPPY_DRIVER ?= /usr/bin/clippy-driver
clippy:
	$(MAKE) -C $(KDIR) M=$(ROOT) $(KMAKE_VARS) CONFIG_SVCRDMA_RS=m \
		SVCRDMA_RS_WERROR=1 \
		SVCRDMA_RS_DMA_MR_DEFAULT=$(SVCRDMA_RS_DMA_MR_DEFAULT) \
		SVCRDMA_RS_DEBUG=$(SVCRDMA_RS_DEBUG) \
		SVCRDMA_RS_BACKCHANNEL=$(SVCRDMA_RS_BACKCHANNEL) \
		CLIPPY=1 CLIPPY_DRIVER=$(CLIPPY_DRIVER) modules

kernel:
	@$(ROOT)/scripts/build-kernel --flavor test

# The release the module is built for (KDIR's); scripts/install checks the
# module's vermagic against it.
KRELEASE ?= $(shell cat $(KDIR)/include/config/kernel.release 2>/dev/null)
INSTALL_ROOT = $(or $(DESTDIR),$(INSTALL_MOD_PATH))

install:
	@[ -n "$(KRELEASE)" ] || { echo "no kernel release in $(KDIR)/include/config/kernel.release (KDIR=...)" >&2; exit 1; }
	$(ROOT)/scripts/install install --root "$(INSTALL_ROOT)" --krel $(KRELEASE) $(ROOT)/svcrdma_rs.ko

uninstall:
	@[ -n "$(KRELEASE)" ] || { echo "no kernel release in $(KDIR)/include/config/kernel.release (KDIR=...)" >&2; exit 1; }
	$(ROOT)/scripts/install uninstall --root "$(INSTALL_ROOT)" --krel $(KRELEASE)

dkms-add:
	$(ROOT)/scripts/dkms-src
	dkms add svcrdma_rs/$(shell head -n 1 $(ROOT)/VERSION)

deb:
	$(ROOT)/scripts/build-deb

deb-test:
	$(ROOT)/tests/host/deb.sh $(DISTRO_KREL)

deb-vm-test:
	$(ROOT)/scripts/distro-kernel-test --deb-only $(DISTRO_KREL)

bootstrap:
	$(ROOT)/scripts/bootstrap

host-test:
	$(ROOT)/scripts/host-test

bench:
	$(ROOT)/scripts/bench $(BENCH_ARGS)

# Instructions per I/O of the server transports themselves, ours against
# the C svcrdma's server share: results/insns-<time>/summary.txt.
bench-insns:
	$(ROOT)/scripts/bench-insns $(BENCH_INSNS_ARGS)

# The server VM's whole instruction count per I/O, client in another VM:
# results/twovm-<time>/summary-twovm.txt (make bench-insns runs it too).
bench-twovm:
	$(ROOT)/scripts/bench-twovm $(BENCH_TWOVM_ARGS)

bench-proto:
	$(ROOT)/scripts/bench-proto

# The VM suites load the tree's svcrdma_rs.ko: built first, so that a fresh
# clone can run any of them directly.
vm-test: module
	$(ROOT)/tests/vm/run all

# The full-size data-path suites (make check and make vm-test run
# data-check, the same suite sized for CI's budget).
vm-test-data: module
	$(ROOT)/tests/vm/run data data-c

# tests/vm/hostile.sh, faults.sh (full profile) and connect.sh with
# PD_FUZZ=all, one VM each; HOSTILE_RANDOM=N (hostile.py's random
# messages, default 1,000) and HOSTILE_VOLUME=N (hostile_volume's mutated
# Calls, default 1,000,000) for other counts, on rxe under memreg=auto;
# siw:auto, rxe:frmr and siw:dma_mr get a quarter of each
# (HOSTILE_CONFIGS, HOSTILE_RANDOM_OTHER, HOSTILE_VOLUME_OTHER).
hostile: module
	$(ROOT)/tests/vm/run hostile faults connect-fuzz stall backchannel-full

stall: module
	$(ROOT)/tests/vm/run stall

# The two-VM drop-in test (make install, nfs.conf, rdma-core's autoload, a
# client VM whose mount autoloads rpcrdma): in make vm-test; make check's
# distro suite takes the same start routes with the Debian package.
dropin: module
	$(ROOT)/tests/vm/run dropin

# Each planted fault must make its suite fail (tests/vm/run mutants).
mutants:
	$(ROOT)/tests/vm/run mutants backchannel-off

check:
	$(ROOT)/scripts/check

demo:
	$(ROOT)/scripts/demo

clean:
	-$(MAKE) -C $(KDIR) M=$(ROOT) $(KMAKE_VARS) CONFIG_SVCRDMA_RS=m clean
	rm -rf $(ROOT)/rust/bindings/bindings_generated.rs $(ROOT)/rust/proto/target $(ROOT)/build

# svcrdma_rs on Debian's stock 7.3 kernel (trixie-backports), in a VM that
# boots Debian's own vmlinuz and modules: scripts/distro-kernel builds the
# module (a trixie build root, the kernel's exact compilers), the Debian
# package is installed and serves NFS, then the full data-path suite on
# soft-RoCE, the rebuild and the purge (scripts/distro-kernel-test; make
# check runs it with the check profile). DISTRO_KREL=<release> picks the
# kernel (default: the newest 7.3).
.PHONY: distro-kernel-test
distro-kernel-test:
	$(ROOT)/scripts/distro-kernel-test $(DISTRO_KREL)

# scripts/bootstrap for real on a fresh Debian 12 root without rustup
# (debootstrap, overlay, chroot; ~10 min, ~2 GB downloaded, kept in
# /var/tmp/svcrdma-bootstrap-test): Debian's packaged cargo builds bindgen-cli
# and make host-test passes with it; rpcbind, enabled there before, stays
# enabled. Not in make check. BOOTSTRAP_TEST_ARGS=--debian-cargo: the root
# also has Debian's old cargo/rustc 1.63 packages.
.PHONY: bootstrap-test
bootstrap-test:
	$(ROOT)/tests/host/bootstrap-norustup.sh $(BOOTSTRAP_TEST_ARGS)
