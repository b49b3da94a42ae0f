#!/bin/bash
# The data-path suite on a stock Debian kernel (runs inside the VM that
# scripts/distro-kernel-test boots: Debian's own vmlinuz and modules).
# First shows the guest runs the stock kernel and the module was built for
# it, then runs tests/vm/data.sh with KO. Debian's kernel has no soft-iWARP
# (CONFIG_RDMA_SIW is not set): the configurations are soft-RoCE only.
#
# Environment: KREL (the kernel release the module was built for), KO, and
# data.sh's (PROFILE, CONFIGS, ...).
. "$(dirname "$0")/lib.sh"
: "${KREL:?}" "${KO:?}"
export KO CONFIGS=${CONFIGS:-rxe:frmr rxe:dma_mr}

echo "guest kernel: $(</proc/version)"
echo "module: $KO, vermagic $(modinfo -F vermagic "$KO")"
stock_kernel() {
	local v
	v=$(</proc/version)
	[ "$(uname -r)" = "$KREL" ] || fail "the guest runs $(uname -r), not $KREL"
	[[ $v == *Debian* ]] || fail "/proc/version does not say Debian"
	modinfo -n rdma_rxe | grep -q "/lib/modules/$KREL/" || fail "rdma_rxe is not the stock kernel's: $(modinfo -n rdma_rxe)"
	[[ $(modinfo -F vermagic "$KO") == "$KREL "* ]] || fail "$KO vermagic: $(modinfo -F vermagic "$KO")"
}
t_run stock_kernel stock_kernel
# What a user runs on a server booted on this kernel: scripts/distro-kernel
# finds the running kernel by itself, and (its downloads, build root and
# kbuild tree cached by the host's run) the build gives the same module.
distro_kernel_running() {
	local out ko
	out=$("$ROOT/scripts/distro-kernel" check 2>&1) || fail "distro-kernel check: $out"
	echo "$out" >/tmp/distro-check.out
	[[ $out == "$KREL: Debian "*", CONFIG_RUST=y"* ]] || fail "distro-kernel check printed: $out"
	ko=$("$ROOT/scripts/distro-kernel" build) || fail "distro-kernel build failed"
	echo "distro-kernel build printed: $ko" >>/tmp/distro-check.out
	[ "$ko" = "$KO" ] || fail "distro-kernel build printed $ko, want $KO"
}
t_run distro_kernel_running distro_kernel_running
sed 's/^/    /' /tmp/distro-check.out 2>/dev/null
[ "$T_FAILED" = 0 ] || { t_summary; exit 1; }
"$(dirname "$0")/data.sh" | tee /tmp/distro-data.out
rc=${PIPESTATUS[0]}
p=$(grep -c '^PASS ' /tmp/distro-data.out) f=$(grep -c '^FAIL ' /tmp/distro-data.out)
echo "stock kernel $KREL: $((T_PASSED + p)) passed, $((T_FAILED + f)) failed"
exit "$rc"
