# Soft RDMA devices in the guest (sourced).
# shellcheck shell=bash

# rdma_add TYPE NAME: adds a soft-RoCE (rxe) or soft-iWARP (siw) device on
# the guest NIC and waits for its port to be ACTIVE.
rdma_add() {
	local type=$1 name=$2 nic
	nic=$(guest_nic)
	[ -n "$nic" ] || { fail "no NIC in the guest"; return 1; }
	case $type in
	rxe) modprobe rdma_rxe ;;
	siw) modprobe siw ;;
	esac
	modprobe ib_uverbs
	modprobe rdma_ucm
	rdma_link "$name" >/dev/null || rdma link add "$name" type "$type" netdev "$nic"
	wait_for 20 sh -c "rdma link show | grep '^link $name/' | grep -q 'state ACTIVE'" ||
		{ rdma link show; fail "$name did not become ACTIVE"; }
}

# rdma_link NAME: the device's line of `rdma link show` (status 1 if none).
rdma_link() { rdma link show | grep "^link $1/"; }

rdma_del() { rdma link delete "$1" 2>/dev/null || true; }
