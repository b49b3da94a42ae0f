#!/bin/bash
# The connection-establishment suite (runs inside the VM): RFC 8797 private
# data decoding, the memory model chosen for every memreg x dma_mr x device
# capability combination on soft-RoCE and soft-iWARP (or the refusal), the
# parameters' validation, sysfs and dmesg, and a real NFS client connecting.
#
# Environment:
#   PD_FUZZ=16     random private data buffers per device (random lengths),
#                  or "all": one per length the CM allows (0..56 on RoCE,
#                  0..251 on iWARP)
#   PD_SEED=8797   their seed (the failing case's bytes are printed)
#   FRESH=40       new connections whose first Call must be answered at
#                  once (first_call_answered_rxe; on rxe, 28 in 100 such
#                  Calls come before the CM's ESTABLISHED event)
#   KO=PATH        the module (default: svcrdma_rs.ko of this tree)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"

KO=${KO:-$ROOT/svcrdma_rs.ko}
NAME=rdma_rs
PORT=20049
PD_FUZZ=${PD_FUZZ:-16}
PD_SEED=${PD_SEED:-8797}
FRESH=${FRESH:-40}
P=/sys/module/svcrdma_rs/parameters
S=/sys/kernel/svcrdma_rs
CM=$ROOT/tests/tools/cm_connect
IP=

setup() {
	# Built on the host by tests/vm/run; by hand if run on its own.
	[ -x $CM ] || gcc -O2 -Wall -o $CM "$ROOT/tests/tools/cm_connect.c" -lrdmacm -libverbs || fail "cannot build cm_connect"
	modprobe -a sunrpc ib_core rdma_cm
	insmod "$KO" xprt_name=$NAME || fail "insmod failed"
	nfsd_prepare
	nfsd_listen $NAME $PORT || fail "listener failed"
	nfsd_listen tcp 2049
	nfsd_start 2
	IP=$(guest_ip)
	echo "$IP" >/tmp/guest_ip
}


# The RDMA CM client: one `cm_connect` process per test (a coprocess
# driven line by line: starting a verbs process costs seconds under TCG).
cm_start() {
	IP=${IP:-$(cat /tmp/guest_ip)}
	coproc CMC { exec "$CM" "$IP" $PORT 2>>/tmp/cm.err; }
	CMC_IN=${CMC[1]} CMC_OUT=${CMC[0]}
}

# cm_do COMMAND: sends COMMAND to the client, its answer in REPLY (lines
# that are not answers, such as a library's warnings, are shown and skipped).
cm_do() {
	local l
	[ -n "${CMC_IN:-}" ] || cm_start
	echo "$1" >&"$CMC_IN"
	REPLY="ERROR no answer from cm_connect to '$1'"
	while IFS= read -r -t 90 -u "$CMC_OUT" l; do
		[[ $l == "= "* ]] && { REPLY=${l#= }; return 0; }
		echo "cm_connect: $l"
	done
	[ -s /tmp/cm.err ] && tail -n 5 /tmp/cm.err
	return 0
}

# connect HEX: connects with that private data and holds the connection;
# sets CONN (the new sysfs directory) and SERVER_PD (the server's private
# data), or RESULT=REJECTED/ERROR; CM_LINE is the client's line.
# release_conn ends it. Builtins only while waiting: the guest is emulated.
connect() {
	local hex=$1 before i
	last_conn
	before=$REPLY
	RESULT= CONN= SERVER_PD=
	cm_do "connect $hex"
	CM_LINE=$REPLY
	RESULT=${CM_LINE%% *}
	if [ "$RESULT" = ESTABLISHED ]; then
		SERVER_PD=${CM_LINE#ESTABLISHED private=}
		SERVER_PD=${SERVER_PD:0:16}
		for ((i = 0; i < 100; i++)); do
			last_conn
			((REPLY > before)) && break
			nap 0.1
		done
		((REPLY > before)) || fail "established, but no new connection in $S/connections within 10 s"
		CONN=$S/connections/$REPLY
		# sysfs shows a new directory before its files (kobject_add makes
		# the directory, then its attribute group): wait for the last one.
		for ((i = 0; i < 100; i++)); do
			[ -e "$CONN/backchannel" ] || [ ! -d "$CONN" ] && break
			nap 0.1
		done
	fi
}

release_conn() {
	local i
	cm_do release
	[ "$REPLY" = RELEASED ] || fail "disconnect: $REPLY"
	# The server's side goes when it sees the disconnect.
	[ -z "$CONN" ] && return 0
	for ((i = 0; i < 200; i++)); do
		[ -d "$CONN" ] || return 0
		nap 0.1
	done
	fail "$CONN not removed after disconnect"
}

# pace: at least 0.8 s between connections whose log lines are checked.
# The module rate-limits them to 10 per 5 s; when a line is logged after
# its connection starts varies, so the margin is wide (0.55 s lost lines).
pace() {
	local now wait
	now=${EPOCHREALTIME/./}
	wait=$((${PACE_LAST:-0} + 800000 - now))
	if ((wait > 0)); then
		printf -v wait '0.%06d' $wait
		nap $wait
	fi
	PACE_LAST=${EPOCHREALTIME/./}
}

# check_pd NAME HEX SEND RECV R: connect with HEX, expect the decoding.
check_pd() {
	local name=$1 hex=$2 send=$3 recv=$4 r=$5 got
	connect "$hex"
	[ "$RESULT" = ESTABLISHED ] || fail "$name: connection not established: $CM_LINE"
	rd $CONN/client_send_size; got=$REPLY
	rd $CONN/client_recv_size; got+=" $REPLY"
	rd $CONN/client_remote_invalidate; got+=" $REPLY"
	rd $CONN/remote_invalidate; got+=" $REPLY"
	echo "$name: private=${hex:-none} -> send/recv/R/remote_invalidate = $got"
	# A connection gone before it was read: what its CM and QP said
	# (private_data_fuzz traces them).
	[ -d "$CONN" ] || [ "$got" = "$send $recv $r $r" ] ||
		fail "$name: connection ${CONN##*/} went away while it was read: $(conn_trace "${CONN##*/}")"
	# The server sets R (no remote-write key on rxe): remote invalidation iff the client did.
	[ "$got" = "$send $recv $r $r" ] || fail "$name: got '$got', want '$send $recv $r $r'"
	release_conn
}

t_setup_rxe() {
	rdma_add rxe rxe0
	setup
}

# zeros N: N zero bytes, in hex.
zeros() { printf '%0*d' $(($1 * 2)) 0; }

# private_data_cases PAD: PAD is the length the transport pads private data
# to (IB/RoCE CM: 56 bytes of zeros follow what was sent), or 0 (iWARP MPA
# delivers exactly what was sent). The decoding is that of the buffer the
# server receives.
private_data_cases() {
	local pad=$1 id=f6ab0e18
	check_pd none "" 1024 1024 0
	check_pd offset0 ${id}01010307 4096 8192 1
	check_pd behind_prefix aabbcc${id}010000ff 1024 262144 0
	check_pd behind_mpa_like_prefix 0000000000000000${id}01010101 2048 2048 1
	check_pd wrong_version ${id}02010307 1024 1024 0
	check_pd version_zero ${id}00010307 1024 1024 0
	check_pd reserved_bits_r_clear ${id}01fe0101 2048 2048 0
	check_pd reserved_bits_r_set ${id}01ff0101 2048 2048 1
	check_pd r_set ${id}01010000 1024 1024 1
	check_pd r_clear ${id}01000000 1024 1024 0
	check_pd sizes_0_255 ${id}010100ff 1024 262144 1
	check_pd sizes_255_0 ${id}0100ff00 262144 1024 0
	check_pd bad_then_good ${id}09000000${id}01010202 3072 3072 1
	check_pd no_identifier 0102030405060708090a 1024 1024 0
	if [ "$pad" -gt 0 ]; then
		# Truncation can only be seen at the end of the padded buffer: a
		# message whose 8 octets would run past it falls back to defaults.
		check_pd truncated_at_end "$(zeros $((pad - 6)))${id}0101" 1024 1024 0
		check_pd identifier_at_end "$(zeros $((pad - 4)))${id}" 1024 1024 0
		check_pd message_ending_exactly "$(zeros $((pad - 8)))${id}01010101" 2048 2048 1
	else
		check_pd truncated ${id}010103 1024 1024 0
		check_pd identifier_only $id 1024 1024 0
		check_pd overrun_behind_prefix 0000${id}01 1024 1024 0
		check_pd long_buffer "$(zeros 240)${id}01010101" 2048 2048 1
	fi
}

t_private_data_decoding_rxe() { private_data_cases 56; }
t_private_data_decoding_siw() { private_data_cases 0; }

# trace_on EVENT...: tracefs's events/svcrdma_rs/svcrdma_rs_EVENT
# recording from now on (the trace emptied); trace_off stops every
# svcrdma_rs event. conn_trace ID: connection ID's records, on one line.
trace_on() {
	local T=/sys/kernel/tracing e
	[ -d $T/events ] || mount -t tracefs nodev $T || fail "cannot mount tracefs"
	echo 0 >$T/tracing_on
	: >$T/trace
	for e; do echo 1 >$T/events/svcrdma_rs/svcrdma_rs_$e/enable; done
	echo 1 >$T/tracing_on
}
trace_off() {
	echo 0 >/sys/kernel/tracing/tracing_on
	echo 0 >/sys/kernel/tracing/events/svcrdma_rs/enable
}
conn_trace() {
	{ grep -a "conn=$1 " /sys/kernel/tracing/trace || echo "(nothing traced)"; } |
		sed 's/^ *//' | tr '\n' ';'
}

# private_data_fuzz PAD MAXLEN: random private data, up to MAXLEN bytes
# (what the CM takes on this transport), each connection checked against
# tests/tools/pd_fuzz.py's independent decoding of the padded buffer.
private_data_fuzz() {
	local pad=$1 max=$2 hex send recv r n=0 args
	# A connection that goes away mid-check is named with its events.
	trace_on cm_event qp_err wc_err
	args=(--seed "$PD_SEED" --max-len "$max" --pad "$pad")
	[ "$PD_FUZZ" = all ] || args+=(--count "$PD_FUZZ")
	python3 "$ROOT/tests/tools/pd_fuzz.py" "${args[@]}" >/tmp/pd_cases || fail "pd_fuzz.py failed"
	while read -r hex send recv r; do
		[ "$hex" = - ] && hex=
		n=$((n + 1))
		check_pd "fuzz_$n" "$hex" "$send" "$recv" "$r"
	done </tmp/pd_cases
	trace_off
	[ $n -gt 0 ] || fail "no fuzz cases"
	echo "$n random private data buffers (seed $PD_SEED, up to $max bytes) decoded as RFC 8797 says"
}
t_private_data_fuzz_rxe() { private_data_fuzz 56 56; }
# siw speaks MPA v2: 4 octets of IRD/ORD go before the private data, and
# siw counts the two together in a u8 (siw_send_mpareqrep's pd_len, 7.3),
# so 251 is the most a client's private data can be. siw's connect takes up
# to 256, but from 252 on the frame's length wraps (252 + 4 is sent as 0)
# and the listening side's siw resets the connection before any CM event
# reaches the server (seen: REJECTED status=-104 at 252).
t_private_data_fuzz_siw() { private_data_fuzz 0 251; }

# The table, written out independently of the module's code: what a
# connection on TRANSPORT with fast reg FR gets under MEMREG and DMA_MR, in
# REPLY (no command substitution: a fork costs ~0.5 s in the guest).
expected_model() {
	local transport=$1 fr=$2 memreg=$3 dma=$4 dmamodel allowed
	case $memreg in
	frmr) [ "$fr" = 1 ] && REPLY=frmr || REPLY=refused; return ;;
	# IB/RoCE: no registration (the local DMA MR) unless dma_mr=never.
	auto)
		[ "$transport" != iwarp ] && [ "$dma" != never ] && { REPLY=dma_mr; return; }
		[ "$fr" = 1 ] && { REPLY=frmr; return; } ;;
	esac
	if [ "$transport" = iwarp ]; then dmamodel=dma_mr_remote_write; else dmamodel=dma_mr; fi
	case $dma in
	never) allowed=0 ;;
	ib_only) [ "$transport" = iwarp ] && allowed=0 || allowed=1 ;;
	always) allowed=1 ;;
	esac
	[ $allowed = 1 ] && REPLY=$dmamodel || REPLY=refused
}

# one_line PATTERN: the single line of T_NEW matching the extended regex
# PATTERN, in REPLY; fails unless exactly one matches.
one_line() {
	local l n=0
	REPLY=
	for l in "${T_NEW[@]}"; do
		[[ $l =~ $1 ]] && { REPLY=$l; n=$((n + 1)); }
	done
	[ $n = 1 ] || fail "want one kernel log line matching '$1', got $n: $(printf '%s\n' "${T_NEW[@]}" | tail -n 5)"
}

# matrix DEV TRANSPORT: every memreg x dma_mr x capability combination.
matrix() {
	local dev=$1 transport=$2 caps memreg dma fr lk want got line r n=0 d=$S/devices/$1 ip_re
	IP=$(cat /tmp/guest_ip)
	ip_re=${IP//./\\.}
	# Earlier tests' connections may have used up this window of the log
	# rate limit (10 lines per 5 s).
	nap 5
	kmsg_follow
	for caps in "" no_fast_reg local_dma_lkey no_fast_reg,local_dma_lkey; do
		echo "$caps" >$P/debug_caps || fail "debug_caps=$caps refused"
		case $caps in *no_fast_reg*) fr=0 ;; *) fr=1 ;; esac
		case $caps in *local_dma_lkey*) lk=1 ;; *) lk=0 ;; esac
		for memreg in auto frmr dma_mr; do
			for dma in never ib_only always; do
				echo $memreg >$P/memreg && echo $dma >$P/dma_mr || fail "cannot set parameters"
				expected_model $transport $fr $memreg $dma
				want=$REPLY
				n=$((n + 1))
				# The device's sysfs says what the next connection gets.
				if [ -d $d ]; then
					rd $d/memreg
					[ "$REPLY" = "$want" ] || fail "$dev [$caps] memreg=$memreg dma_mr=$dma: devices/$dev/memreg=$REPLY, want $want"
					rd $d/fast_reg; got=$REPLY; rd $d/local_dma_lkey; got+=" $REPLY"
					[ "$got" = "$fr $lk" ] || fail "$dev [$caps]: device caps shown as $got, want $fr $lk"
				fi
				pace
				kmsg_window_start
				connect ""
				if [ "$want" = refused ]; then
					kmsg_window_end
					[ "$RESULT" != ESTABLISHED ] || { release_conn; fail "$dev [$caps] memreg=$memreg dma_mr=$dma: accepted, want refused"; }
					[ "$RESULT" = REJECTED ] || fail "$dev [$caps] memreg=$memreg dma_mr=$dma: $CM_LINE, want a reject"
					one_line 'svcrdma_rs: refusing connection'
					line=$REPLY
					[[ $line =~ from\ $ip_re:[0-9]+\ on\ $dev\ \($transport\) ]] || fail "refusal line lacks peer/device/transport: $line"
					if [ $memreg = frmr ]; then
						[[ $line == *memreg=frmr* ]] || fail "refusal line does not name memreg: $line"
					else
						[[ $line == *dma_mr=$dma* ]] || fail "refusal line does not name dma_mr=$dma: $line"
					fi
				else
					[ "$RESULT" = ESTABLISHED ] || fail "$dev [$caps] memreg=$memreg dma_mr=$dma: $CM_LINE, want $want"
					rd $CONN/memreg
					# Kept: release_conn sets REPLY.
					got=$REPLY
					[ "$got" = "$want" ] || { release_conn; fail "$dev [$caps] $memreg/$dma: connection memreg=$got, want $want"; }
					rd $CONN/device; got=$REPLY; rd $CONN/transport; got+=" $REPLY"
					[ "$got" = "$dev $transport" ] || fail "connection device/transport wrong: $got"
					rd $CONN/frmr_pool
					if [ $want = frmr ]; then
						[ "$REPLY" -gt 0 ] || fail "FRMR connection without an MR pool"
					else
						[ "$REPLY" = 0 ] || fail "DMA MR connection with an MR pool"
					fi
					release_conn
					# Ended once the server saw the disconnect: on iWARP the
					# client is established before the server's side is.
					kmsg_window_end
					one_line 'svcrdma_rs: connection [0-9]+ from'
					line=$REPLY
					[[ $line =~ from\ $ip_re:[0-9]+\ on\ $dev\ \($transport\) ]] || fail "accept line lacks peer/device/transport: $line"
					case $want in
					frmr) [[ $line == *"Using Fast Memory Registration" ]] || fail "bad line: $line" ;;
					dma_mr) [[ $line == *"Using a Global DMA MR" ]] || fail "bad line: $line" ;;
					dma_mr_remote_write) [[ $line == *"Using a Global DMA MR (remote write: exposes all server memory)" ]] || fail "bad line: $line" ;;
					esac
					# Our R bit: clear exactly when a remote-write key is exposed.
					[ $want = dma_mr_remote_write ] && r=00 || r=01
					[ "$SERVER_PD" = "f6ab0e1801${r}0303" ] || fail "server private data $SERVER_PD, want f6ab0e1801${r}0303"
				fi
				echo "$dev [$caps] memreg=$memreg dma_mr=$dma -> $want"
			done
		done
	done
	echo "$n combinations"
	kmsg_unfollow
	echo >$P/debug_caps
	echo auto >$P/memreg
	echo ib_only >$P/dma_mr
}

t_matrix_rxe() { matrix rxe0 roce; }

t_device_sysfs() {
	[ "$(cat $S/devices/rxe0/transport)" = roce ] || fail "rxe0 transport"
	[ "$(cat $S/devices/rxe0/fast_reg)" = 1 ] || fail "rxe0 reports no fast reg"
	[ "$(cat $S/devices/rxe0/local_dma_lkey)" = 0 ] || fail "rxe0 reports a global lkey"
	[ "$(cat $S/devices/rxe0/max_fast_reg_page_list_len)" -gt 0 ] || fail "rxe0 page list len"
	[ "$(cat $S/devices/rxe0/memreg)" = dma_mr ] || fail "rxe0 next model not dma_mr under defaults (auto on RoCE registers nothing)"
}

t_parameters_validated() {
	local p v
	for p in memreg dma_mr; do
		v=$(cat $P/$p)
		dmesg_mark
		if echo bogus >$P/$p 2>/dev/null; then fail "$p=bogus accepted"; fi
		[ "$(cat $P/$p)" = "$v" ] || fail "$p changed after a bad write"
		dmesg_since_mark | has "svcrdma_rs: $p=\"bogus\" refused" || fail "no clear line for a bad $p"
	done
	if echo fast_reg >$P/debug_caps 2>/dev/null; then fail "debug_caps=fast_reg accepted"; fi
	for p in debug_frmr_pool debug_sq_slots debug_fail_post; do
		for v in -1 65536 x; do
			if echo $v >$P/$p 2>/dev/null; then fail "$p=$v accepted"; fi
		done
		[ "$(cat $P/$p)" = 0 ] || fail "$p is $(cat $P/$p) after bad writes, not 0"
	done
	[ "$(cat $P/memreg) $(cat $P/dma_mr)" = "auto ib_only" ] || fail "defaults are not auto/ib_only"
	modinfo "$KO" | has '^parm: *memreg:' || fail "memreg not documented in modinfo"
	modinfo "$KO" | has '^parm: *dma_mr:.*ib_only' || fail "dma_mr not documented in modinfo"
}

t_real_nfs_client_connects() {
	IP=$(cat /tmp/guest_ip)
	modprobe rpcrdma
	mkdir -p /mnt/x
	timeout 60 mount -t nfs -o vers=4.2,proto=rdma,port=$PORT,soft,timeo=100,retrans=1 "$IP:/" /mnt/x &
	local mpid=$! c found= sizes peer memreg ri
	for ((i = 0; i < 120; i++)); do
		for c in $S/connections/*; do
			# Read at once: a connection the client gives up on goes away.
			rd $c/client_send_size; sizes=$REPLY
			rd $c/client_recv_size; sizes+=" $REPLY"
			rd $c/client_remote_invalidate; sizes+=" $REPLY"
			rd $c/peer; peer=$REPLY
			rd $c/memreg; memreg=$REPLY
			rd $c/remote_invalidate; ri=$REPLY
			# The Linux client sends RFC 8797 private data: 4 KiB both ways, R set.
			if [ "$sizes" = "4096 4096 1" ] && [ -n "$ri" ]; then
				found=$c
				break 2
			fi
		done
		nap 0.5
	done
	[ -n "$found" ] || { kill $mpid 2>/dev/null || true; fail "no connection from the NFS client in sysfs"; }
	echo "$found: peer=$peer client sizes/R=$sizes memreg=$memreg remote_invalidate=$ri"
	[[ $peer == "$IP:"* ]] || fail "peer $peer is not the client's address"
	[ "$memreg" = dma_mr ] || fail "NFS client connection is $memreg, not dma_mr (auto, dma_mr=ib_only on RoCE)"
	[ "$ri" = 1 ] || fail "both R bits set, but remote_invalidate is 0"
	kill $mpid 2>/dev/null || true
	wait $mpid 2>/dev/null || true
	umount -f /mnt/x 2>/dev/null || true
}

# rdma_mount_newest DIR [MEMREG]: the export mounted over RDMA at DIR
# (NFSv4.2, 1 MiB rsize and wsize), its connection accepted under memreg
# MEMREG if given (the parameter is restored after); the mount's
# connection, the newest, in REPLY.
rdma_mount_newest() {
	mkdir -p "$1"
	[ -z "${2:-}" ] || param_set memreg "$2"
	timeout 60 mount -t nfs -o vers=4.2,proto=rdma,port=$PORT,rsize=1048576,wsize=1048576 \
		"$(cat /tmp/guest_ip):/" "$1" || fail "mount over RDMA failed"
	param_restore memreg
	last_conn
	((REPLY > 0)) || fail "no connection in $S/connections"
}

# The counters agree with a known workload: 8 MiB written and
# its first 4 MiB read back (direct I/O, rsize=wsize=1M, NFSv4.2) move
# 8 MiB (and not 9) by RDMA Read and 4 MiB (and not 5) by RDMA Write on
# the mount's connection: the two directions cannot be swapped. At least
# 12 Calls, Replies by kind (the 4 READs' in Write chunks, the rest inline:
# at least the 8 WRITEs'), bytes inline both ways, registrations and
# invalidations on an FRMR connection, no error; the device and module
# totals hold at least the connection's counts, also once it is gone;
# svcrdma-stat shows it; and a bad version and a bad procedure from
# hostile.py move the module's ERR_VERS and ERR_CHUNK counters.
t_counters_rxe() {
	IP=$(cat /tmp/guest_ip)
	local m=/mnt/counters c= max k v rc=0
	local -A got
	# FRMR: registrations and invalidations are counted too.
	rdma_mount_newest $m frmr
	max=$REPLY
	c=$S/connections/$max
	[ -d $c/stats ] || fail "no $c/stats/"
	head -c $((8 << 20)) /dev/urandom >/tmp/counters.src
	dd if=/tmp/counters.src of=$m/counters.dat bs=1M oflag=direct status=none || fail "write failed"
	dd if=$m/counters.dat of=/tmp/counters.back bs=1M count=4 iflag=direct status=none || fail "read failed"
	cmp -s -n $((4 << 20)) /tmp/counters.src /tmp/counters.back || fail "read back differs"
	for k in calls bytes_read bytes_written wr_read wr_write wr_send replies_write_chunk \
		replies_inline bytes_recv_inline bytes_sent_inline mr_reg mr_inv_local mr_inv_remote \
		completion_errors rdma_errors_vers rdma_errors_chunk; do
		rd $c/stats/$k
		[[ $REPLY =~ ^[0-9]+$ ]] || fail "$c/stats/$k: '$REPLY' is not a number"
		got[$k]=$REPLY
	done
	for k in "${!got[@]}"; do echo "connection $max $k ${got[$k]}"; done | sort
	((got[bytes_read] >= 8 << 20 && got[bytes_read] < 9 << 20)) ||
		fail "bytes_read ${got[bytes_read]}: not the 8 MiB written (by RDMA Read)"
	((got[bytes_written] >= 4 << 20 && got[bytes_written] < 5 << 20)) ||
		fail "bytes_written ${got[bytes_written]}: not the 4 MiB read back (by RDMA Write)"
	((got[calls] >= 12)) || fail "calls ${got[calls]}: fewer than the 12 I/Os"
	((got[wr_read] > 0 && got[wr_write] > 0 && got[wr_send] >= got[calls])) ||
		fail "work requests: read ${got[wr_read]}, write ${got[wr_write]}, send ${got[wr_send]} for ${got[calls]} calls"
	((got[replies_write_chunk] >= 4 && got[replies_write_chunk] <= 6)) ||
		fail "replies_write_chunk ${got[replies_write_chunk]}: not the 4 READs'"
	((got[replies_inline] >= 8)) || fail "replies_inline ${got[replies_inline]}: fewer than the 8 WRITEs'"
	((got[bytes_recv_inline] >= 60 * got[calls] && got[bytes_sent_inline] >= 28 * got[calls])) ||
		fail "inline bytes: received ${got[bytes_recv_inline]}, sent ${got[bytes_sent_inline]} for ${got[calls]} calls"
	rd $c/memreg
	[ "$REPLY" = frmr ] || fail "the mount's connection is $REPLY, not frmr (memreg=frmr when it was accepted)"
	((got[mr_reg] >= 8 && got[mr_inv_local] + got[mr_inv_remote] >= 8)) ||
		fail "FRMR connection: ${got[mr_reg]} registrations, ${got[mr_inv_local]}+${got[mr_inv_remote]} invalidations for 8 WRITEs"
	((got[completion_errors] + got[rdma_errors_vers] + got[rdma_errors_chunk] == 0)) ||
		fail "errors on a clean workload"
	for k in "$S/stats" "$S/devices/rxe0/stats"; do
		rd $k/bytes_read
		((REPLY >= got[bytes_read])) || fail "$k/bytes_read $REPLY: less than the connection's ${got[bytes_read]}"
	done
	"$ROOT/scripts/svcrdma-stat" -1 --json >/tmp/counters.json || fail "svcrdma-stat failed"
	/usr/bin/python3 -c 'import json, sys
j = json.loads(open(sys.argv[1]).readline())
c = [x for x in j["connections"] if x["id"] == int(sys.argv[2])]
assert c and c[0]["calls"] >= int(sys.argv[3]) and 8.3 <= c[0]["mb_in"] < 9.5 and 4.1 <= c[0]["mb_out"] < 5.5, c' /tmp/counters.json $max "${got[calls]}" ||
		fail "svcrdma-stat does not show connection $max with its counts: $(cat /tmp/counters.json)"
	"$ROOT/scripts/svcrdma-stat" -1
	timeout 60 umount $m || fail "umount failed"
	wait_for 20 sh -c "! test -d $c" || fail "the connection stayed after the umount"
	rd $S/stats/bytes_read
	((REPLY >= got[bytes_read])) || fail "the module's bytes_read $REPLY lost the gone connection's ${got[bytes_read]}"
	rd $S/stats/rdma_errors_vers; local vers0=$REPLY
	rd $S/stats/rdma_errors_chunk; local chunk0=$REPLY
	/usr/bin/python3 "$ROOT/tests/tools/hostile.py" "$IP" $PORT --only version_0x2,proc_0x5 --timeout 10 \
		>/tmp/counters.hostile 2>&1 || rc=$?
	[ "$rc" = 0 ] || fail "hostile.py --only version_0x2,proc_0x5: exit $rc: $(tail -n 5 /tmp/counters.hostile)"
	rd $S/stats/rdma_errors_vers
	((REPLY > vers0)) || fail "rdma_errors_vers did not move ($vers0 -> $REPLY) for a bad version"
	rd $S/stats/rdma_errors_chunk
	((REPLY > chunk0)) || fail "rdma_errors_chunk did not move ($chunk0 -> $REPLY) for a bad procedure"
}

# svcrdma-stat under load: while a writer keeps an RDMA mount
# busy, the tool refreshed every 2 s shows the mount's connection moving
# data in its interval tables (RPC/s above 0, MB/s in at least 0.1: 1 MiB
# direct writes, each read by RDMA, move ~1 MB/s under TCG, where their
# inline bytes alone would be ~0.001), no error, as JSON and as the table
# an admin reads; the table goes to the log.
t_stat_under_load_rxe() {
	local m=/mnt/statload max wpid rc=0
	rdma_mount_newest $m
	max=$REPLY
	rm -f /tmp/statload.stop
	(while [ ! -e /tmp/statload.stop ]; do
		dd if=/dev/zero of=$m/statload.dat bs=1M count=16 oflag=direct status=none || exit 1
	done) &
	wpid=$!
	"$ROOT/scripts/svcrdma-stat" -i 2 -c 3 >/tmp/statload.table 2>&1 || rc=$?
	"$ROOT/scripts/svcrdma-stat" --json -i 2 -c 2 >/tmp/statload.json 2>&1 || rc=$?
	touch /tmp/statload.stop
	wait $wpid || fail "the writer failed"
	sed 's/^/svcrdma-stat: /' /tmp/statload.table >&"$CONNECT_OUT"
	[ "$rc" = 0 ] || fail "svcrdma-stat exited $rc: $(tail -n 3 /tmp/statload.json)"
	/usr/bin/python3 -c 'import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 2, lines
j = json.loads(lines[1])
assert j["interval_s"] and j["interval_s"] > 1, j["interval_s"]
c = [x for x in j["connections"] if x["id"] == int(sys.argv[2])]
assert c, "no row for the connection"
c = c[0]
assert c["rpc_per_s"] > 0 and c["mb_in_per_s"] >= 0.1 and c["errors"] == 0, c' /tmp/statload.json $max ||
		fail "svcrdma-stat's second refresh does not show connection $max moving data: $(tail -c 600 /tmp/statload.json)"
	# The table's last refresh (an interval): the connection's row, RPC/s above 0.
	awk -v id="$max" '/^svcrdma_rs: .*last/ { blk = 1; seen = 0; next }
		blk && $1 == id { seen = ($6 + 0 > 0) } END { exit !seen }' /tmp/statload.table ||
		fail "svcrdma-stat's last table has no busy row for connection $max: $(tail -n 6 /tmp/statload.table)"
	# The default on RoCE (auto, dma_mr=ib_only) registers nothing: data
	# moved by RDMA Read, and not one registration or local invalidation.
	rd $S/connections/$max/memreg
	[ "$REPLY" = dma_mr ] || fail "the mount's connection is $REPLY under the defaults, want dma_mr"
	local k reads regs invs
	rd $S/connections/$max/stats/bytes_read; reads=$REPLY
	rd $S/connections/$max/stats/mr_reg; regs=$REPLY
	rd $S/connections/$max/stats/mr_inv_local; invs=$REPLY
	echo "connection $max: bytes_read $reads, mr_reg $regs, mr_inv_local $invs"
	((reads > 0 && regs == 0 && invs == 0)) ||
		fail "default connection on RoCE: bytes_read $reads, mr_reg $regs, mr_inv_local $invs (want data and no registration)"
	rm -f $m/statload.dat
	timeout 60 umount $m || fail "umount failed"
}

# Tracepoints: with events/svcrdma_rs/ enabled in tracefs,
# - hostile.py's bad version records the connection's accept, its
#   decode_err and RDMA_ERROR (name and XID), and the CM's DISCONNECTED
#   when hostile.py leaves, all with the same, non-zero connection id;
# - a Read chunk with a key the client never registered records the failed
#   RDMA Read's wc_err (a status other than a flush) on an accepted
#   connection;
# - a connection refused (FRMR required, fast registration masked)
#   records a reject naming the peer, the device and the reason.
# Once the three clients ran as expected and the accept was found, every
# missing event is named in one failure. With the events disabled again,
# nothing more is recorded.
# post_err and sq_wait need faults no test client can cause: the debug
# build's parameters cause them (post_refused_rxe, sq_full_waits_rxe).
t_tracepoints_rxe() {
	local T=/sys/kernel/tracing rc=0 rc2=0 n id ev ip missing=() caps0 memreg0
	ip=$(cat /tmp/guest_ip)
	[ -d $T/events ] || mount -t tracefs nodev $T || fail "cannot mount tracefs"
	[ -d $T/events/svcrdma_rs ] || fail "no events/svcrdma_rs in tracefs"
	ls $T/events/svcrdma_rs
	echo 0 >$T/tracing_on
	: >$T/trace
	for ev in accept rdma_error cm_event decode_err wc_err reject; do
		echo 1 >$T/events/svcrdma_rs/svcrdma_rs_$ev/enable
	done
	echo 1 >$T/tracing_on
	/usr/bin/python3 "$ROOT/tests/tools/hostile.py" "$ip" $PORT --only version_0x2 --timeout 10 \
		>/tmp/trace.hostile 2>&1 || rc=$?
	# The CM reports the disconnection after hostile.py has gone.
	wait_for 10 grep -aq 'svcrdma_rs_cm_event: .*event=DISCONNECTED' $T/trace || true
	/usr/bin/python3 "$ROOT/tests/tools/hostile.py" "$ip" $PORT --only read_rkey_unknown --timeout 10 \
		>/tmp/trace.hostile2 2>&1 || rc2=$?
	rd $P/debug_caps; caps0=$REPLY
	rd $P/memreg; memreg0=$REPLY
	# Put back if the test fails (exits) before the restore below, which
	# then clears the trap; its errors cannot change the test's outcome.
	trap '{ echo "$caps0" >$P/debug_caps; echo "$memreg0" >$P/memreg; } 2>/dev/null || true' EXIT
	echo no_fast_reg >$P/debug_caps && echo frmr >$P/memreg || fail "cannot set debug_caps/memreg"
	connect ""
	trap - EXIT
	echo "$caps0" >$P/debug_caps || fail "cannot restore debug_caps '$caps0'"
	echo "$memreg0" >$P/memreg || fail "cannot restore memreg '$memreg0'"
	[ "$RESULT" != ESTABLISHED ] || release_conn
	echo 0 >$T/tracing_on
	[ "$rc" = 0 ] || fail "hostile.py --only version_0x2: exit $rc: $(tail -n 5 /tmp/trace.hostile)"
	[ "$rc2" = 0 ] || fail "hostile.py --only read_rkey_unknown: exit $rc2: $(tail -n 5 /tmp/trace.hostile2)"
	[ "$RESULT" = REJECTED ] || fail "memreg=frmr without fast registration: $CM_LINE, want a reject"
	grep -a 'svcrdma_rs_' $T/trace | first 20
	# No match must reach the check below, not stop the test (pipefail).
	id=$(grep -ao 'svcrdma_rs_accept: conn=[1-9][0-9]* peer=[^ ]* device=rxe0 model=[a-z_]*' $T/trace |
		head -n 1 | sed 's/.*conn=\([0-9]*\).*/\1/') || true
	[ -n "$id" ] || fail "no svcrdma_rs_accept event for hostile.py's connection"
	# hostile.py draws its XIDs from 0x48000000 up (tests/tools/hostile.py).
	grep -aEq "svcrdma_rs_decode_err: conn=$id xid=0x48[0-9a-f]{6} reason=\"[^\"]+\"" $T/trace ||
		missing+=("decode_err (conn=$id, hostile.py's XID, a reason)")
	grep -aEq "svcrdma_rs_rdma_error: conn=$id xid=0x48[0-9a-f]{6} err=ERR_VERS" $T/trace ||
		missing+=("rdma_error ERR_VERS (conn=$id, hostile.py's XID)")
	grep -aq "svcrdma_rs_cm_event: conn=$id event=DISCONNECTED" $T/trace ||
		missing+=("cm_event DISCONNECTED (conn=$id)")
	# The failed Read's status, on a connection the trace saw accepted.
	n=$(grep -aoE 'svcrdma_rs_wc_err: conn=[1-9][0-9]* status=[A-Z_]+' $T/trace | grep -v 'status=WR_FLUSH_ERR' |
		sed 's/.*conn=\([0-9]*\).*/\1/' | head -n 1) || true
	[ -n "$n" ] && grep -aq "svcrdma_rs_accept: conn=$n " $T/trace ||
		missing+=("wc_err (an accepted connection, a status other than a flush)")
	grep -aEq "svcrdma_rs_reject: peer=${ip//./\\.}:[0-9]+ device=rxe0 reason=\"[^\"]*memreg=frmr[^\"]*\"" $T/trace ||
		missing+=("reject (peer $ip, rxe0, a reason naming memreg=frmr)")
	((${#missing[@]} == 0)) || fail "missing events: ${missing[*]}"
	echo 0 >$T/events/svcrdma_rs/enable
	: >$T/trace
	echo 1 >$T/tracing_on
	/usr/bin/python3 "$ROOT/tests/tools/hostile.py" "$ip" $PORT --only version_0x2 --timeout 10 \
		>/tmp/trace.hostile 2>&1 || true
	echo 0 >$T/tracing_on
	n=$(grep -ac 'svcrdma_rs_' $T/trace) || true
	[ "${n:-0}" = 0 ] || fail "$n svcrdma_rs events recorded with the events disabled"
}

# An NFS WRITE's payload starts a page of its own: nfsd's direct-I/O
# write path (io_cache_write=2) takes only a payload whose first byte is
# aligned for the file's device, and writes it with IOCB_DIRECT
# (tracepoint nfsd_write_direct); a payload left at its XDR offset in one
# stream is written buffered (nfsd_write_vector). The export
# is an ext4 on a loop device (tmpfs reports no direct-I/O alignment);
# 4 MiB written with 1 MiB WRITEs must all be written direct, and the file
# on the server must be what the client wrote.
t_write_payload_page_aligned_rxe() {
	local T=/sys/kernel/tracing D=/sys/kernel/debug/nfsd/io_cache_write m=/mnt/dio
	local disk=/run/dio-disk dir=$NFS_EXPORT/dio img loop io0 direct vector
	[ -d $T/events ] || mount -t tracefs nodev $T || fail "cannot mount tracefs"
	[ -e $D ] || mountpoint -q /sys/kernel/debug || mount -t debugfs nodev /sys/kernel/debug
	[ -w $D ] || fail "no $D (nfsd's I/O mode)"
	[ -d $T/events/nfsd/nfsd_write_direct ] || fail "no nfsd_write_direct tracepoint"
	# The disk image in memory of its own (the guest's root is 9p).
	mkdir -p $disk
	mountpoint -q $disk || mount -t tmpfs -o size=80M tmpfs $disk || fail "cannot mount a tmpfs for the image"
	img=$disk/dio.img
	on_exit "umount $disk"
	truncate -s 64M $img
	loop=$(losetup -f --show $img) || fail "losetup failed"
	rd $D; io0=$REPLY
	# Whatever ends the test: tracing off, nfsd's mode back, the export and
	# the disk gone (nfsd lets go of the file system first), last first.
	on_exit "losetup -d $loop; rm -f $img"
	on_exit "umount -f $m; exportfs -u '*:$dir'; exportfs -f; echo $dir >/proc/fs/nfsd/unlock_filesystem;
		wait_for 10 umount $dir"
	on_exit "echo 0 >$T/tracing_on; echo 0 >$T/events/nfsd/enable; echo $io0 >$D"
	mkfs.ext4 -q -F $loop >/dev/null 2>&1 || fail "mkfs.ext4 failed"
	mkdir -p $dir && mount -t ext4 $loop $dir || fail "cannot mount the ext4"
	exportfs -o rw,no_root_squash,insecure,no_subtree_check,fsid=7 "*:$dir" || fail "exportfs failed"
	echo 2 >$D || fail "cannot set nfsd's direct I/O for writes"
	rdma_mount_newest $m
	head -c $((4 << 20)) /dev/urandom >/tmp/dio.src
	echo 0 >$T/tracing_on
	: >$T/trace
	echo 1 >$T/events/nfsd/nfsd_write_direct/enable
	echo 1 >$T/events/nfsd/nfsd_write_vector/enable
	echo 1 >$T/tracing_on
	timeout 120 dd if=/tmp/dio.src of=$m/dio/f bs=1M oflag=direct status=none || fail "write failed"
	echo 0 >$T/tracing_on
	echo 0 >$T/events/nfsd/nfsd_write_direct/enable
	echo 0 >$T/events/nfsd/nfsd_write_vector/enable
	{ grep -a 'nfsd_write_' $T/trace || true; } | first 8
	direct=$(grep -ac 'nfsd_write_direct:' $T/trace) || true
	vector=$(grep -ac 'nfsd_write_vector:' $T/trace) || true
	echo "4 MiB in 1 MiB WRITEs: ${direct:-0} written direct, ${vector:-0} buffered"
	cmp -s /tmp/dio.src $dir/f || fail "the file on the server differs from what the client wrote"
	((${vector:-0} == 0 && ${direct:-0} >= 4)) ||
		fail "${direct:-0} direct and ${vector:-0} buffered writes: payloads not page-aligned for direct I/O"
}

# A full send queue (the sq_waits counter and the sq_wait event): a
# connection accepted with 12 send-queue slots (the debug build's
# debug_sq_slots) carries 1 MiB READ Replies of 9 work requests each (8
# RDMA Writes of 32 pages, rxe's SGE limit, and the Send); four readers at
# once keep both nfsd threads replying, so one waits for the other's slots
# (rounds of four, at most 5, until one did).
# The wait is counted and traced on that connection, the data read is
# right, nothing failed, and the connection is the one the mount made (no
# reconnect).
t_sq_full_waits_rxe() {
	local m=/mnt/sqwait c max i r pids waits=0
	on_exit "umount -f $m; trace_off"
	param_set debug_sq_slots 12
	rdma_mount_newest $m
	param_restore debug_sq_slots
	max=$REPLY c=$S/connections/$REPLY
	head -c $((16 << 20)) /dev/urandom >/tmp/sqwait.src
	timeout 120 dd if=/tmp/sqwait.src of=$m/sqwait.dat bs=1M oflag=direct status=none || fail "write failed"
	trace_on sq_wait
	for ((r = 1; r <= 5 && waits == 0; r++)); do
		pids=()
		for i in 0 1 2 3; do
			timeout 120 dd if=$m/sqwait.dat of=/tmp/sqwait.$i bs=1M skip=$((i * 4)) count=4 \
				iflag=direct status=none &
			pids+=($!)
		done
		for i in 0 1 2 3; do wait "${pids[$i]}" || fail "reader $i failed (round $r)"; done
		for i in 0 1 2 3; do
			cmp -s -i $((i << 22)):0 -n $((4 << 20)) /tmp/sqwait.src /tmp/sqwait.$i ||
				fail "reader $i read wrong data (round $r)"
		done
		rd $c/stats/sq_waits; waits=$REPLY
	done
	trace_off
	{ grep -a 'svcrdma_rs_sq_wait:' /sys/kernel/tracing/trace || true; } | first 3
	echo "connection $max: sq_waits $waits after $((r - 1)) round(s)"
	((waits > 0)) || fail "sq_waits $waits: no thread waited with 12 slots for 9-request Replies"
	grep -aqE "svcrdma_rs_sq_wait: conn=$max wrs=[0-9]+" /sys/kernel/tracing/trace ||
		fail "no svcrdma_rs_sq_wait event for connection $max"
	rd $c/stats/completion_errors
	[ "$REPLY" = 0 ] || fail "completion_errors $REPLY on a clean workload"
	last_conn
	[ "$REPLY" = "$max" ] || fail "the client reconnected (connection $REPLY, was $max)"
	timeout 60 umount $m || fail "umount failed"
}

# A post the device refuses (the post_err event): with the debug build's
# debug_fail_post=1 the next chain posted fails with -ENOMEM as a device's
# refusal would. The failure is traced (connection, requests, error) and
# logged, its connection closes, and the client's write, retried on a new
# connection, lands: the file on the server is what was written.
t_post_refused_rxe() {
	local m=/mnt/postfail max
	on_exit "umount -f $m; trace_off"
	rdma_mount_newest $m
	max=$REPLY
	head -c $((2 << 20)) /dev/urandom >/tmp/postfail.src
	dmesg_mark postfail
	trace_on post_err
	param_set debug_fail_post 1
	timeout 120 dd if=/tmp/postfail.src of=$m/postfail.dat bs=1M oflag=direct status=none ||
		fail "write failed (or hung: the refused Call lost)"
	rd $P/debug_fail_post
	[ "$REPLY" = 0 ] || fail "debug_fail_post is $REPLY after the write: no post failed"
	param_restore debug_fail_post
	trace_off
	{ grep -a 'svcrdma_rs_post_err:' /sys/kernel/tracing/trace || true; } | first 3
	grep -aqE "svcrdma_rs_post_err: conn=$max wrs=[1-9][0-9]* rc=-12" /sys/kernel/tracing/trace ||
		fail "no svcrdma_rs_post_err event (conn=$max, rc=-12)"
	dmesg_since_mark postfail | grep -a "connection $max: posting [0-9]* work requests failed: error -12, closing" ||
		fail "no log line for the refused post on connection $max"
	wait_for 30 sh -c "! test -d $S/connections/$max" || fail "connection $max stayed after its post failed"
	cmp -s /tmp/postfail.src $NFS_EXPORT/postfail.dat || fail "the file on the server is not what was written"
	timeout 60 umount $m || fail "umount failed"
}

t_siw_matrix() {
	# One soft device at a time: both would claim the same address.
	rdma_del rxe0
	wait_for 20 sh -c "! ls $S/connections/* >/dev/null 2>&1" || fail "connections remain after rxe0 was deleted"
	rdma_add siw siw0
	matrix siw0 iwarp
	[ "$(cat $S/devices/siw0/transport)" = iwarp ] || fail "siw0 transport"
	[ "$(cat $S/devices/siw0/read_with_invalidate)" = 1 ] || fail "siw0 read with invalidate"
}

# The first Call of a new connection is answered at once. The Call arrives
# about when the CM's ESTABLISHED event does; a receive that completed
# before the event and is not handed to nfsd waits for the client's next
# message (on siw under make hostile, one first Call in about twenty).
# FRESH connections from hostile.py --fresh, each sending a NULL call the
# moment it is up; each must be answered within 5 s. On rxe, not siw: siw
# has its own stall there (tests/tools/hostile.py, IWARP_SETTLE), which
# hostile.py waits out; make hostile runs --fresh on both.
first_call_answered() {
	local rc=0
	/usr/bin/python3 "$ROOT/tests/tools/hostile.py" "${IP:-$(cat /tmp/guest_ip)}" $PORT \
		--fresh "$FRESH" --timeout 5 >/tmp/fresh.out 2>&1 || rc=$?
	cat /tmp/fresh.out
	grep -a '^fresh: ' /tmp/fresh.out >&"$CONNECT_OUT" || true
	[ "$rc" = 0 ] || fail "the first Call of a new connection went unanswered (hostile.py --fresh, exit $rc)"
}
t_first_call_answered_rxe() { first_call_answered; }

t_teardown_clean() {
	dmesg_mark
	nfsd_stop
	wait_for 20 rmmod svcrdma_rs || fail "rmmod failed"
	[ ! -d $S ] || fail "$S remains after rmmod"
	dmesg_clean_since_mark
}

# Figures for the log even when a test passes (t_run hides its output).
exec {CONNECT_OUT}>&1
t_plan 18
t_run setup_rxe t_setup_rxe
t_run private_data_decoding_rxe t_private_data_decoding_rxe
t_run private_data_fuzz_rxe t_private_data_fuzz_rxe
t_run device_sysfs t_device_sysfs
t_run parameters_validated t_parameters_validated
t_run matrix_rxe t_matrix_rxe
t_run real_nfs_client_connects t_real_nfs_client_connects
t_run first_call_answered_rxe t_first_call_answered_rxe
t_run counters_rxe t_counters_rxe
t_full stat_under_load_rxe t_stat_under_load_rxe
t_full tracepoints_rxe t_tracepoints_rxe
t_full write_payload_page_aligned_rxe t_write_payload_page_aligned_rxe
t_run sq_full_waits_rxe t_sq_full_waits_rxe
t_run post_refused_rxe t_post_refused_rxe
t_run siw_matrix t_siw_matrix
t_run private_data_decoding_siw t_private_data_decoding_siw
t_full private_data_fuzz_siw t_private_data_fuzz_siw
t_run teardown_clean t_teardown_clean
t_summary
