#!/bin/bash
# The listener suite (runs inside the VM): a listener survives its RDMA
# device going away and coming back. RDMA device removal waits until every
# CM id on the device is destroyed, so a listener bound to the device's
# address that keeps its id pins the device: `rdma link delete` never
# returns. The listener must let go of the device at once and listen again
# when the address is usable; a wildcard listener must keep working too.
#
# A listener bound to one address needs nfsd's netlink listener-set
# (portlist binds the wildcard only): sent with the kernel source's ynl CLI
# (tools/net/ynl/pyynl/cli.py and Documentation/netlink/specs/nfsd.yaml;
# without schema validation: the guest's python3 has no jsonschema).
# listener-set takes the transport names tcp, udp and rdma only, so the
# module is loaded under its default name "rdma", before rpcrdma (loaded for
# the NFS client; its server class then stays unregistered).
#
# Environment:
#   KO=...    the module (default: the tree's svcrdma_rs.ko)
#   KSRC=...  a kernel source tree with the ynl CLI (default: the test
#             kernel's source)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"

KO=${KO:-$ROOT/svcrdma_rs.ko}
KSRC=${KSRC:-$(readlink -f /var/cache/svcrdma-rs/kernel/test/source)}
NAME=rdma
PORT=20049
MNT=/mnt/l
# How long device removal may take (seconds).
REMOVAL_LIMIT=60

# nfsd_listeners_set TRANSPORT:IPV4:PORT...: replaces nfsd's listeners with
# these (netlink listener-set; needs no nfsd thread running to remove any).
nfsd_listeners_set() {
	local json= l t a p hex
	for l in "$@"; do
		IFS=: read -r t a p <<<"$l"
		# struct sockaddr_in: family (host order), port (network order),
		# address, 8 bytes of zeros.
		IFS=. read -r -a o <<<"$a"
		printf -v hex '0200%04x%02x%02x%02x%02x0000000000000000' "$p" "${o[@]}"
		json+="${json:+,}{\"transport-name\": \"$t\", \"addr\": \"$hex\"}"
	done
	python3 "$KSRC/tools/net/ynl/pyynl/cli.py" --no-schema --spec "$KSRC/Documentation/netlink/specs/nfsd.yaml" \
		--do listener-set --json "{\"addr\": [$json]}"
}

# cm_listen ADDR: the svcrdma_rs listening CM id on ADDR:PORT, if any.
cm_listen() {
	rdma resource show cm_id | grep 'state LISTEN' | grep 'comm \[svcrdma_rs\]' | grep -F "src-addr $1:$PORT" || true
}

# mount_rw WANT: mounts over RDMA, writes (or with WANT, checks) a file,
# unmounts.
mount_rw() {
	local ip
	ip=$(cat /tmp/guest_ip)
	nfs_mount vers=4.2,proto=rdma,port=$PORT,soft,timeo=100,retrans=2 $MNT || fail "mount over RDMA failed"
	if [ -z "${1:-}" ]; then
		echo "listener test $(date +%s)" >$MNT/f || { umount -f $MNT; fail "write failed"; }
	else
		grep -q '^listener test' $MNT/f || { umount -f $MNT; fail "file not read back"; }
	fi
	timeout 60 umount $MNT || fail "umount failed"
	echo "mounted $ip over RDMA, ${1:+read}${1:-wrote}"
}

# remove_device: `rdma link delete rxe0` must return within
# REMOVAL_LIMIT seconds. If it hangs, the listeners are dropped (nfsd
# stopped) to let it finish, and the test fails.
remove_device() {
	local pid t0=$SECONDS i
	rdma link delete rxe0 &
	pid=$!
	for ((i = 0; i < REMOVAL_LIMIT * 10; i++)); do
		kill -0 $pid 2>/dev/null || break
		nap 0.1
	done
	if kill -0 $pid 2>/dev/null; then
		echo "rdma link delete rxe0 still running after $REMOVAL_LIMIT s:"
		rdma resource show cm_id || true
		nfsd_stop
		wait $pid || true
		echo "it returned $((SECONDS - t0)) s after the start, once nfsd was stopped"
		fail "rdma link delete rxe0 did not complete within $REMOVAL_LIMIT s (the listener pins the device)"
	fi
	wait $pid || fail "rdma link delete rxe0 failed"
	echo "rdma link delete rxe0 took $((SECONDS - t0)) s"
	! rdma_link rxe0 >/dev/null || fail "rxe0 still there"
}

t_setup() {
	modprobe -a sunrpc ib_core rdma_cm
	[ -f "$KSRC/tools/net/ynl/pyynl/cli.py" ] || fail "no ynl CLI in $KSRC"
	! grep -q '^rpcrdma ' /proc/modules || fail "rpcrdma is loaded: it holds the name rdma"
	insmod "$KO" || fail "insmod failed"
	modprobe rpcrdma || fail "cannot load rpcrdma (the NFS client)"
	rdma_add rxe rxe0
	nfsd_prepare
	guest_ip >/tmp/guest_ip
	[ -s /tmp/guest_ip ] || fail "no guest address"
}

t_bound_listener() {
	local ip
	ip=$(cat /tmp/guest_ip)
	nfsd_listeners_set tcp:0.0.0.0:2049 "$NAME:$ip:$PORT" || fail "listener-set failed"
	nfsd_start 4
	cm_listen "$ip"
	[ -n "$(cm_listen "$ip")" ] || { rdma resource show cm_id; fail "no svcrdma_rs listener bound to $ip:$PORT"; }
	cm_listen "$ip" | has 'link rxe0/' || fail "the bound listener is not on rxe0"
	mount_rw
}

t_bound_device_removal() {
	local ip n
	ip=$(cat /tmp/guest_ip)
	dmesg_mark
	remove_device
	wait_for 10 sh -c "dmesg | grep -q 'svcrdma_rs: listener on $ip:$PORT'" || true
	dmesg_since_mark | grep 'svcrdma_rs: listener' || true
	n=$(dmesg_since_mark | grep -c "svcrdma_rs: listener on $ip:$PORT: device rxe0 removed" || true)
	[ "$n" = 1 ] || fail "want one log line for the removal, got $n"
	[ -z "$(cm_listen "$ip")" ] || fail "a listener is still shown on $ip:$PORT"
}

t_bound_relisten() {
	local ip
	ip=$(cat /tmp/guest_ip)
	dmesg_mark
	rdma_add rxe rxe0
	wait_for 30 sh -c "rdma resource show cm_id | grep 'state LISTEN' | grep -q 'src-addr $ip:$PORT'" ||
		{ rdma resource show cm_id; fail "no listener on $ip:$PORT within 30 s of rxe0's return"; }
	cm_listen "$ip" | has 'link rxe0/' || fail "the new listener is not on rxe0"
	dmesg_since_mark | has "svcrdma_rs: listener on $ip:$PORT: listening again" ||
		fail "no log line for listening again"
	mount_rw read
	# Once more: the listener made after the removal lets go of the device too.
	remove_device
	rdma_add rxe rxe0
	wait_for 30 sh -c "rdma resource show cm_id | grep 'state LISTEN' | grep -q 'src-addr $ip:$PORT'" ||
		fail "no listener after the second removal"
	mount_rw read
}

# nfsd removing the listener while the removal event is handled: both
# finish, nothing leaks, nothing is reported.
t_removal_during_teardown() {
	local pid ip
	ip=$(cat /tmp/guest_ip)
	dmesg_mark
	rdma link delete rxe0 &
	pid=$!
	nfsd_stop
	wait $pid || fail "rdma link delete rxe0 failed"
	wait_for 20 sh -c "! rdma resource show cm_id | grep -q 'comm \[svcrdma_rs\]'" ||
		{ rdma resource show cm_id; fail "svcrdma_rs CM ids remain after nfsd stopped"; }
	rdma_add rxe rxe0
	dmesg_clean_since_mark
}

t_wildcard() {
	nfsd_listen $NAME $PORT || fail "wildcard listener failed"
	nfsd_listen tcp 2049
	nfsd_start 4
	[ -n "$(cm_listen 0.0.0.0)" ] || { rdma resource show cm_id; fail "no wildcard listener"; }
	mount_rw read
	remove_device
	rdma_add rxe rxe0
	mount_rw read
}

# An IPv6 connection and mount: the wildcard listener
# takes a connection to an IPv6 address of the RoCE NIC (rxe gives each of
# its netdev's addresses a GID, so RoCEv2 over IPv6 needs no setup), the
# NFS client mounts over it with proto=rdma6, and the connection's sysfs
# peer is the client's IPv6 address in brackets (the RFC 5952 form).
IP6=fd00:5e::1
t_ipv6_mount() {
	local c peer= found= i
	ip -6 addr add $IP6/64 dev "$(guest_nic)" nodad || fail "cannot add $IP6 to $(guest_nic)"
	# The GID comes from the address notifier: wait for it.
	for ((i = 0; i < 50; i++)); do
		grep -qi "fd00:005e:0000:0000:0000:0000:0000:0001" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null && break
		nap 0.1
	done
	[ -n "$(cm_listen '[::]')$(cm_listen '::')" ] || { rdma resource show cm_id; fail "no IPv6 wildcard listener"; }
	mkdir -p $MNT
	timeout 120 mount -t nfs -o vers=4.2,proto=rdma6,port=$PORT,soft,timeo=100,retrans=2 "[$IP6]:/" $MNT ||
		fail "mount of [$IP6]:/ over RDMA (proto=rdma6) failed"
	head -c 262144 /dev/urandom >/tmp/v6.src
	dd if=/tmp/v6.src of=$MNT/v6 bs=64k oflag=direct status=none || { umount -f $MNT; fail "write over IPv6 failed"; }
	for c in /sys/kernel/svcrdma_rs/connections/*; do
		rd "$c/peer"
		[[ $REPLY == "[$IP6]:"* ]] && found=$c peer=$REPLY
	done
	cmp /tmp/v6.src $NFS_EXPORT/v6 || { umount -f $MNT; fail "the server's file differs from what was written over IPv6"; }
	timeout 60 umount $MNT || fail "umount failed"
	ip -6 addr del $IP6/64 dev "$(guest_nic)" || true
	[ -n "$found" ] || fail "no connection with peer [$IP6]:port in sysfs"
	echo "mounted [$IP6]:/ over RDMA (rdma6), 256 KiB written and checked on the server; sysfs peer of ${found##*/}: $peer"
}

t_teardown_clean() {
	dmesg_mark
	nfsd_stop
	wait_for 20 rmmod svcrdma_rs || fail "rmmod failed"
	rdma_del rxe0
	dmesg_clean_since_mark
}

t_plan 8
t_run setup t_setup
t_run bound_listener t_bound_listener
t_run bound_device_removal t_bound_device_removal
t_run bound_relisten t_bound_relisten
t_run removal_during_teardown t_removal_during_teardown
t_run wildcard t_wildcard
t_run ipv6_mount t_ipv6_mount
t_run teardown_clean t_teardown_clean
t_summary
