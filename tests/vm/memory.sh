#!/bin/bash
# Memory per idle connection (runs inside the VM; tests/vm/run memory, not
# in make check): what a connection costs the server before it has sent a
# single RPC: sunrpc lets 64 unauthenticated connections in per listener,
# which is why the FRMR pool is allocated on use, not at accept.
#
# For each server in SERVERS, on soft-RoCE: nfsd listens over RDMA, then
# CONNS clients (tests/tools/cm_connect, one process each) connect and
# hold their connections idle. The cost is the drop in MemAvailable and the
# growth of Slab between before and after (each the median of three
# readings), divided by CONNS. The clients run in the same guest, so the
# figures include their own QPs and buffers; the clients are the same for
# every server, so the figures still compare the servers.
#
# Environment:
#   SERVERS="rs c"      rs: this tree's module (KO=...), c: rpcrdma.ko's
#                       svcrdma; rs=PATH: another build (e.g. an older one)
#   CONNS=16            idle connections per server
#   MAX_KIB=            if set, fail when this tree's module costs more
#                       than this many KiB per idle connection
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"

KO=${KO:-$ROOT/svcrdma_rs.ko}
SERVERS=${SERVERS:-rs c}
CONNS=${CONNS:-16}
PORT=20049
CM=$ROOT/tests/tools/cm_connect
# The figures go to the suite's own output (t_run shows a test's output
# only when it fails).
exec {MEM_OUT}>&1

# mem: "MemAvailable Slab" in KiB, in REPLY.
mem() {
	local k v u avail= slab=
	while read -r k v u; do
		case $k in
		MemAvailable:) avail=$v ;;
		Slab:) slab=$v ;;
		esac
	done </proc/meminfo
	REPLY="$avail $slab"
}

# settled: MemAvailable and Slab after the caches settle, the median of
# three readings a second apart, in REPLY.
settled() {
	local a=() s=() i
	sync
	echo 3 >/proc/sys/vm/drop_caches
	for i in 1 2 3; do
		nap 1
		mem
		a+=("${REPLY% *}") s+=("${REPLY#* }")
	done
	REPLY="$(printf '%s\n' "${a[@]}" | sort -n | sed -n 2p) $(printf '%s\n' "${s[@]}" | sort -n | sed -n 2p)"
}

# hold N: N cm_connect processes, each holding one established connection
# (its stdin a pipe from a sleep: EOF, when the sleep is killed, releases
# it); the sleeps' pids in HOLD_PIDS.
hold() {
	local i l
	HOLD_PIDS=()
	for ((i = 0; i < $1; i++)); do
		{ echo connect; exec sleep 100000; } | "$CM" "$(guest_ip)" $PORT >/tmp/hold.$i 2>&1 &
		HOLD_PIDS+=($!)
	done
	# Each process answers once its connection is up.
	for ((i = 0; i < $1; i++)); do
		for ((l = 0; l < 600; l++)); do
			grep -q '^= ' /tmp/hold.$i 2>/dev/null && break
			nap 0.1
		done
		grep -q '^= ESTABLISHED' /tmp/hold.$i || fail "connection $i: $(cat /tmp/hold.$i)"
	done
}
release() {
	pkill -x sleep 2>/dev/null || true
	wait 2>/dev/null || true
	rm -f /tmp/hold.*
}

measure() { # measure NAME
	local before after da ds
	settled
	before=$REPLY
	hold "$CONNS"
	settled
	after=$REPLY
	release
	da=$(((${before% *} - ${after% *}) / CONNS))
	ds=$(((${after#* } - ${before#* }) / CONNS))
	echo "memory: $1: $da KiB less MemAvailable, $ds KiB more Slab, per idle connection ($CONNS connections)" >&"$MEM_OUT"
	MEASURED=$da
}

t_setup() {
	rdma_add rxe rxe0
	modprobe -a sunrpc ib_core rdma_cm
	nfsd_prepare
}

# t_server SPEC: one server's figures.
t_server() {
	local spec=$1 ko name
	case $spec in
	c)
		modprobe rpcrdma
		name=rdma
		;;
	rs | rs=*)
		ko=${spec#rs=}
		[ "$ko" != rs ] || ko=$KO
		insmod "$ko" xprt_name=rdma_rs || fail "insmod $ko failed"
		name=rdma_rs
		;;
	*) fail "unknown server '$spec'" ;;
	esac
	nfsd_listen $name $PORT || fail "no $name listener"
	nfsd_start 4
	measure "$spec"
	nfsd_stop
	case $spec in
	c) rmmod rpcrdma 2>/dev/null || true ;;
	*) wait_for 30 rmmod svcrdma_rs || fail "rmmod failed" ;;
	esac
	if [ "$spec" = rs ] && [ -n "${MAX_KIB:-}" ] && [ "$MEASURED" -gt "$MAX_KIB" ]; then
		fail "an idle connection costs $MEASURED KiB, over $MAX_KIB"
	fi
}

t_run setup t_setup
for s in $SERVERS; do
	case $s in rs=*) n=rs_${s##*/} n=${n%.ko} ;; *) n=$s ;; esac
	t_run "server_$n" t_server "$s"
done
t_summary
