# Two-VM drop-in test helpers (sourced in both guests).
# shellcheck shell=bash

# The second NIC, which tests/vm/run connects between the two VMs
# (QEMU "dgram" netdevs), is found by its MAC address.
DROPIN_MAC_PREFIX=52:54:00:77:00:0

# dropin_link N [TYPE]: address 192.168.77.N on the link and a soft RDMA
# device of TYPE (rxe, the default, or siw; named TYPE0) on it; returns
# once the other VM answers.
dropin_link() {
	local n=$1 type=${2:-rxe} nic= d
	for d in /sys/class/net/*; do
		rd "$d/address"
		[ "$REPLY" = "${DROPIN_MAC_PREFIX}$n" ] && nic=${d##*/}
	done
	[ -n "$nic" ] || fail "no NIC with MAC ${DROPIN_MAC_PREFIX}$n"
	ip link set "$nic" up
	ip addr add 192.168.77.$n/24 dev "$nic"
	case $type in
	rxe) modprobe rdma_rxe ;;
	siw) modprobe siw ;;
	*) fail "no soft RDMA device type '$type'" ;;
	esac
	modprobe ib_uverbs
	rdma link add "${type}0" type "$type" netdev "$nic" || fail "$type on $nic failed"
	wait_for 20 sh -c "rdma link show | grep '^link ${type}0/' | grep -q 'state ACTIVE'" || fail "${type}0 not ACTIVE"
	# The peer answers once both guests are up.
	command -v ping >/dev/null || fail "no ping in the guest (scripts/bootstrap installs iputils-ping)"
	wait_for ${DROPIN_WAIT:-1200} ping -c 1 -W 2 192.168.77.$((3 - n)) || fail "the other VM is unreachable"
}
