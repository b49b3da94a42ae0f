# Two-VM drop-in test helpers (sourced in both guests).
# shellcheck shell=bash

# The second NIC, which tests/vm/run connects between the two VMs
# (QEMU "dgram" netdevs), is found by its MAC address.
DROPIN_MAC_PREFIX=52:54:00:77:00:0

# dropin_link N: address 192.168.77.N on the link and soft-RoCE on it.
dropin_link() {
	local n=$1 nic= d
	for d in /sys/class/net/*; do
		rd "$d/address"
		[ "$REPLY" = "${DROPIN_MAC_PREFIX}$n" ] && nic=${d##*/}
	done
	[ -n "$nic" ] || fail "no NIC with MAC ${DROPIN_MAC_PREFIX}$n"
	ip link set "$nic" up
	ip addr add 192.168.77.$n/24 dev "$nic"
	modprobe rdma_rxe
	modprobe ib_uverbs
	rdma link add rxe0 type rxe netdev "$nic" || fail "rxe on $nic failed"
	wait_for 20 sh -c "rdma link show | grep '^link rxe0/' | grep -q 'state ACTIVE'" || fail "rxe0 not ACTIVE"
	# The peer answers once both guests are up.
	command -v ping >/dev/null || fail "no ping in the guest (scripts/bootstrap installs iputils-ping)"
	wait_for ${DROPIN_WAIT:-1200} ping -c 1 -W 2 192.168.77.$((3 - n)) || fail "the other VM is unreachable"
}
