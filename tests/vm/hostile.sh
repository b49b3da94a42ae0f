#!/bin/bash
# The hostile-client suite (runs inside the VM): tests/tools/hostile.py
# sends valid, malformed and randomly mutated RPC-over-RDMA messages to
# svcrdma_rs (on soft-RoCE by default, see HOSTILE_CONFIGS), then
# tests/tools/hostile_volume sends mutated
# Calls by the million (pipelined over several connections), while the
# Linux NFS client, mounted over RDMA from the same guest, writes and reads
# back data; the data must stay correct, every hostile connection must be
# gone afterwards, and the kernel log clean.
#
# Environment:
#   HOSTILE_RANDOM=1000      hostile.py's random mutations (each may cost a
#                            timeout or a reconnect: seconds under TCG)
#   HOSTILE_VOLUME=1000000   hostile_volume's mutated Calls (make hostile);
#                            the data-path suite sources this file and, with
#                            HOSTILE_SHORT=N, runs hostile_test with N of each
#   HOSTILE_CONFIGS=rxe:auto DEV:MEMREG pairs, each a run of the suite (see
#                            the end of this file)
#   HOSTILE_SEED=8166        the seed (the same seed sends the same bytes)
#   KO=PATH                  the module (default: svcrdma_rs.ko of this tree)
#   SERVER=rs                c: the kernel's C svcrdma instead (rpcrdma.ko), to
#                            check the clients' expectations against it (no
#                            sysfs checks; not part of any make target)
#   HOSTILE_WAIT=20          seconds a message may go unanswered before it
#                            counts as a hang (or a drop, where allowed)
#   HOSTILE_KEEP=            1: keep hostile.py's and hostile_volume's whole
#                            output in the run directory (vm-run --keep);
#                            hostile.py then prints every mismatch (--verbose),
#                            not only its first 30
#   HOSTILE_PAUSE=5          seconds the well-behaved client rests between
#                            its rounds (each writes and reads back 1 MiB):
#                            it shows the mount serving correct data all
#                            along without taking the emulated CPU the
#                            hostile clients and the server need
# Sourced by data.sh after these (lib.sh twice would reset its counters).
if ! declare -F t_run >/dev/null; then
	. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
	. "$(dirname "${BASH_SOURCE[0]}")/rdma.sh"
	. "$(dirname "${BASH_SOURCE[0]}")/nfs.sh"
fi

HOSTILE_SEED=${HOSTILE_SEED:-8166}
PORT=${PORT:-20049}
HOSTILE_MNT=/mnt/hostile
HOSTILE_PY=$ROOT/tests/tools/hostile.py
HOSTILE_VOL=$ROOT/tests/tools/hostile_volume
# The suite's own output: t_run shows a test's output only when it fails,
# and the counts are wanted either way.
exec {HOSTILE_OUT}>&1

# conn_ids: the module's live connection ids, one per line.
conn_ids() {
	local d
	for d in /sys/kernel/svcrdma_rs/connections/*; do
		[ -d "$d" ] && echo "${d##*/}"
	done
	return 0
}

# data_loop FILE: writes and reads back FILE on the mount, a round every
# HOSTILE_PAUSE seconds, until /tmp/hostile.run goes; each round's result
# is a line in /tmp/hostile.rounds.
data_loop() {
	local i=0 p
	while [ -e /tmp/hostile.run ]; do
		i=$((i + 1))
		if dd if=/tmp/hostile.src of="$1" bs=64k oflag=direct status=none &&
			dd if="$1" of=/tmp/hostile.back bs=64k iflag=direct status=none &&
			cmp -s /tmp/hostile.src /tmp/hostile.back; then
			echo "ok $i"
		else
			echo "bad $i"
		fi
		for ((p = 0; p < ${HOSTILE_PAUSE:-5} * 2; p++)); do
			[ -e /tmp/hostile.run ] || break
			sleep 0.5
		done
	done >/tmp/hostile.rounds 2>&1
}

# hostile_test N [WAIT [V]]: the directed cases and N random messages of
# hostile.py, then V mutated Calls of hostile_volume (default N), against
# the listener on this guest's address (svcrdma_rs loaded, nfsd serving);
# a hostile.py message unanswered after WAIT seconds (default 20) is a
# hang, or a drop where the RFC allows no answer.
hostile_test() {
	local n=$1 wait=${2:-20} vol=${3:-$1} before after rc vrc ok bad ip left gone model=
	ip=$(guest_ip)
	# The file the client READs into a write chunk (hostile.py's pattern).
	/usr/bin/python3 -c "import sys; sys.path.insert(0, '${HOSTILE_PY%/*}'); import hostile; sys.stdout.buffer.write(hostile.pattern(65536))" \
		>"$NFS_EXPORT/hostile.dat"
	nfs_mount "vers=4.2,proto=rdma,port=$PORT" $HOSTILE_MNT || fail "mount over RDMA failed"
	before=$(conn_ids)
	[ -n "$before" ] || [ "${SERVER:-rs}" = c ] || fail "no svcrdma_rs connection for the mount"
	# The memory model hostile.py's connections get too (same device and
	# parameters).
	[ -z "$before" ] || { rd "/sys/kernel/svcrdma_rs/connections/$(echo "$before" | first 1)/memreg"; model=$REPLY; }
	# The log from here (the suite's own mark stays for teardown's check).
	dmesg_mark hostile
	head -c $((1 << 20)) /dev/urandom >/tmp/hostile.src
	touch /tmp/hostile.run
	data_loop $HOSTILE_MNT/well-behaved.bin &
	local dpid=$!
	# Every reply must grant what the server provisioned (sysfs credits:
	# every connection on one device has the same).
	local grant=0
	if [ "${SERVER:-rs}" != c ]; then
		rd "/sys/kernel/svcrdma_rs/connections/${before%%$'\n'*}/credits"
		grant=$REPLY
		[[ $grant =~ ^[1-9][0-9]*$ ]] || fail "no credits in sysfs for connection ${before%%$'\n'*}: '$grant'"
	fi
	rc=0
	/usr/bin/python3 "$HOSTILE_PY" "$ip" "$PORT" --seed "$HOSTILE_SEED" --random "$n" \
		--timeout "$wait" --progress 100000 --grant "$grant" ${HOSTILE_KEEP:+--verbose} >/tmp/hostile.out 2>&1 || rc=$?
	cat /tmp/hostile.out
	grep -a '^hostile: ' /tmp/hostile.out >&"$HOSTILE_OUT" || true
	# Its part of the log, before hostile_volume's may wrap the ring.
	dmesg_since_mark hostile >/tmp/hostile.dmesg
	grep -a -m 5 '^MISMATCH ' /tmp/hostile.out >&"$HOSTILE_OUT" || true
	vrc=0
	# Its Calls all get an answer: WAIT bounds only a hang, never less than
	# 20 s (a pipelined Call may queue behind a hundred others).
	"$HOSTILE_VOL" -n "$vol" -k 4 -s "$HOSTILE_SEED" -t $((wait > 20 ? wait : 20)) -p 100000 "$ip" "$PORT" \
		>/tmp/hostile_volume.out 2>&1 &
	local vpid=$!
	# Its progress lines (every 100,000) show on the console as they come.
	tail -n +1 -f --pid=$vpid /tmp/hostile_volume.out |
		grep -a --line-buffered '^hostile_volume: [0-9]* sent' >&"$HOSTILE_OUT" &
	local tpid=$!
	wait $vpid || vrc=$?
	# The last progress line before the summary (grep fails on a run too
	# short for one).
	wait $tpid || true
	cat /tmp/hostile_volume.out
	# HOSTILE_KEEP=1: both clients' whole output goes to the run directory
	# (shared with the host: scripts/vm-run --keep DIR keeps it), named by
	# server and configuration (DEV_MEMREG); the suite's log shows only a
	# failure's last lines.
	if [ -n "${HOSTILE_KEEP:-}" ]; then
		local keep="${SERVER:-rs}-${tag:-${model:-unknown}}"
		if [ -d "${svcrdma_run:-}" ] && cp /tmp/hostile.out "$svcrdma_run/hostile-$keep.out" &&
			cp /tmp/hostile_volume.out "$svcrdma_run/hostile_volume-$keep.out"; then
			echo "HOSTILE_KEEP: hostile-$keep.out and hostile_volume-$keep.out kept" >&"$HOSTILE_OUT"
		else
			echo "HOSTILE_KEEP: could not keep the clients' output (run directory '${svcrdma_run:-}')" >&"$HOSTILE_OUT"
		fi
	fi
	grep -a '^hostile_volume: seed' /tmp/hostile_volume.out >&"$HOSTILE_OUT" || true
	rm -f /tmp/hostile.run
	wait $dpid
	ok=$(grep -c '^ok ' /tmp/hostile.rounds || true)
	bad=$(grep -c '^bad ' /tmp/hostile.rounds || true)
	echo "well-behaved client: $ok rounds of 1 MiB written and read back correctly, $bad wrong" >/tmp/hostile.data
	cat /tmp/hostile.data
	cat /tmp/hostile.data >&"$HOSTILE_OUT"
	[ "$bad" = 0 ] || fail "the mounted client's data went wrong in $bad of $((ok + bad)) rounds"
	[ "$ok" -ge 1 ] || fail "the mounted client completed no round"
	# Every hostile connection goes; the mount's stays.
	for _ in $(seq 60); do
		after=$(conn_ids)
		[ "$after" = "$before" ] && break
		nap 0.5
	done
	# The mount's first: a mount that reconnected adds a connection that
	# is not the hostile client's (seen with the drop_reply mutant).
	gone=$(comm -23 <(echo "$before" | sort) <(echo "$after" | sort) | tr '\n' ' ')
	[ -z "$gone" ] || fail "the mount's connection went: before '$before', after '$after'"
	left=$(comm -13 <(echo "$before" | sort) <(echo "$after" | sort) | tr '\n' ' ')
	[ -z "$left" ] || fail "connections of the hostile client still in sysfs after 30 s: $left"
	# Through the mount: it may hold a directory delegation on the
	# export's root (NFSv4.1+), which a local unlink there would have to
	# recall over the backchannel. Bounded all the same.
	timeout 60 rm -f $HOSTILE_MNT/well-behaved.bin $HOSTILE_MNT/hostile.dat ||
		fail "removing the test's files through the mount took over 60 s"
	timeout 120 umount $HOSTILE_MNT || fail "umount failed"
	# The keep_failed_mrs mutant fails this: the Reads hostile.py makes
	# fail after their MRs were registered (unknown rkeys, reads past the
	# client's MR) have those MRs deregistered at once, not left
	# registered while their pages go back to nfsd.
	if [ "${SERVER:-rs}" != c ] && [ "$model" = frmr ]; then
		grep -q 'memory regions of a failed RDMA Read are deregistered' /tmp/hostile.dmesg ||
			fail "no failed RDMA Read had its memory regions deregistered"
		! grep -q 'could not deregister' /tmp/hostile.dmesg ||
			fail "memory regions of a failed RDMA Read could not be deregistered"
	fi
	# Last, so the checks above run whatever hostile.py found.
	[ "$rc" = 0 ] || fail "hostile.py: mismatches or hangs (exit $rc), see MISMATCH lines"
	[ "$vrc" = 0 ] || fail "hostile_volume: mismatches or hangs (exit $vrc), see MISMATCH lines"
}

# t_setup DEV MEMREG: svcrdma_rs (or the C svcrdma) serving over DEV (rxe
# or siw) with memreg=MEMREG (auto, frmr or dma_mr; dma_mr with
# dma_mr=always).
t_setup() {
	local dev=${1:-rxe} memreg=${2:-auto} d
	for d in rxe siw; do [ $d = "$dev" ] || rdma_del ${d}0; done
	rdma_add "$dev" "${dev}0"
	modprobe -a sunrpc ib_core rdma_cm rpcrdma
	local xprt=rdma
	if [ "${SERVER:-rs}" != c ]; then
		insmod "${KO:-$ROOT/svcrdma_rs.ko}" xprt_name=rdma_rs memreg="$memreg" dma_mr=always || fail "insmod failed"
		xprt=rdma_rs
	fi
	nfsd_prepare
	nfsd_listen $xprt "$PORT" || fail "no $xprt listener"
	nfsd_listen tcp 2049
	nfsd_start 8
	dmesg_mark
}

# t_hostile [N V]: hostile_test with N random messages and V mutated Calls
# (default HOSTILE_RANDOM, HOSTILE_VOLUME).
t_hostile() { hostile_test "${1:-${HOSTILE_RANDOM:-1000}}" "${HOSTILE_WAIT:-20}" "${2:-${HOSTILE_VOLUME:-1000000}}"; }

# The limit_closes mutant fails this: with MRs of one page
# (debug_caps=short_page_list), a Call whose Read chunk needs more MRs than
# the connection has gets ERR_CHUNK and the connection stays. Closing the
# connection instead would make the client resend the Call after
# reconnecting, forever.
t_limits() {
	[ "${SERVER:-rs}" != c ] || return 0
	local P=/sys/module/svcrdma_rs/parameters/debug_caps rc=0
	[ -w $P ] || fail "no writable $P (the test module is a debug build)"
	dmesg_mark limits
	# The case needs an MR pool: hostile.py's connection is accepted under
	# memreg=frmr, whatever this configuration's model, with a pool of 128
	# one-page MRs (debug_frmr_pool): its 600 and 900 KiB chunks need more,
	# yet fit the argument buffer (about 1 MiB; 128 credits' own pool, 256
	# one-page MRs, is as large, so no Call can be over it and in the buffer).
	param_set memreg frmr
	param_set debug_frmr_pool 128
	param_set debug_caps short_page_list
	/usr/bin/python3 "$HOSTILE_PY" "$(guest_ip)" "$PORT" --limits --timeout 20 >/tmp/hostile_limits.out 2>&1 || rc=$?
	param_restore_all
	cat /tmp/hostile_limits.out
	[ "$rc" = 0 ] || fail "hostile.py --limits: a Call over the connection's MRs was not answered with ERR_CHUNK on a live connection (exit $rc)"
	dmesg_since_mark limits | has "cannot serve the Call's read chunks (needs more memory regions" ||
		fail "no log line for the Call refused over the MR pool"
}

# A client over its credits: after one NULL call, the
# grant plus 8 more NULL calls at once. Each must get its reply or
# ERR_CHUNK (the Calls that found every context busy), the connection must
# stay and serve NULL calls after (hostile.py --overrun judges).
t_overrun() {
	local rc=0
	/usr/bin/python3 "$HOSTILE_PY" "$(guest_ip)" "$PORT" --overrun 8 --timeout 20 >/tmp/hostile_overrun.out 2>&1 || rc=$?
	cat /tmp/hostile_overrun.out
	grep -a '^overrun: ' /tmp/hostile_overrun.out >&"$HOSTILE_OUT" || true
	[ "$rc" = 0 ] || fail "hostile.py --overrun: a client over its credits was cut off, or Calls went unanswered (exit $rc)"
}

# The first Call on a new connection: a client that sends a NULL call the
# moment its connection is up reaches the server about when the CM's
# ESTABLISHED event does, and a receive not handed to nfsd then waits for
# the client's next message (on siw, one such Call in about twenty).
# HOSTILE_FRESH such connections, each Call answered within 5 s
# (hostile.py --fresh judges).
t_fresh() {
	local rc=0
	/usr/bin/python3 "$HOSTILE_PY" "$(guest_ip)" "$PORT" --fresh "${HOSTILE_FRESH:-100}" --timeout 5 >/tmp/hostile_fresh.out 2>&1 || rc=$?
	cat /tmp/hostile_fresh.out
	grep -a '^fresh: ' /tmp/hostile_fresh.out >&"$HOSTILE_OUT" || true
	[ "$rc" = 0 ] || fail "hostile.py --fresh: the first Call of a new connection went unanswered (exit $rc)"
}

t_teardown() {
	nfsd_stop
	if [ "${SERVER:-rs}" = c ]; then
		dmesg_clean_since_mark
		return 0
	fi
	wait_for 30 rmmod svcrdma_rs || fail "rmmod failed"
	dmesg_clean_since_mark
	[ ! -d /sys/kernel/svcrdma_rs ] || fail "/sys/kernel/svcrdma_rs still there after rmmod"
}

# Sourced by the data-path suite for hostile_test; the full suite otherwise:
# for each DEV:MEMREG of HOSTILE_CONFIGS (default rxe:auto; make hostile
# runs rxe and siw under auto, rxe under frmr and siw under dma_mr: every
# model on both devices, as auto is the DMA MR on RoCE and FRMR on
# iWARP), its own module load,
# the hostile clients, a client over its credits, and a clean unload. The
# first configuration gets HOSTILE_RANDOM and HOSTILE_VOLUME, the others a
# quarter of each (HOSTILE_RANDOM_OTHER, HOSTILE_VOLUME_OTHER); the
# over-the-limits case runs once, on the first (it accepts its connection
# under memreg=frmr). The C svcrdma (SERVER=c) chooses its own memory
# model: only the auto configurations run.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	HOSTILE_CONFIGS=${HOSTILE_CONFIGS:-rxe:auto}
	R=${HOSTILE_RANDOM:-1000} V=${HOSTILE_VOLUME:-1000000}
	RO=${HOSTILE_RANDOM_OTHER:-$((R / 4))} VO=${HOSTILE_VOLUME_OTHER:-$((V / 4))}
	cfgs=()
	for cfg in $HOSTILE_CONFIGS; do
		[ "${SERVER:-rs}" != c ] || [ "${cfg#*:}" = auto ] || continue
		cfgs+=("$cfg")
	done
	limits_done=0 plan=0
	for cfg in "${cfgs[@]}"; do
		plan=$((plan + 5))
		[ $limits_done = 1 ] || { plan=$((plan + 1)) limits_done=1; }
	done
	t_plan $plan
	first=1 limits_done=0
	for cfg in "${cfgs[@]}"; do
		dev=${cfg%%:*} memreg=${cfg#*:} tag=${cfg/:/_}
		t_run "${tag}_setup" t_setup "$dev" "$memreg"
		if [ $first = 1 ]; then
			t_run "${tag}_hostile" t_hostile "$R" "$V"
		else
			t_run "${tag}_hostile" t_hostile "$RO" "$VO"
		fi
		if [ $limits_done = 0 ]; then
			t_run "${tag}_limits" t_limits
			limits_done=1
		fi
		t_run "${tag}_overrun" t_overrun
		t_run "${tag}_fresh" t_fresh
		t_run "${tag}_teardown" t_teardown
		first=0
	done
	t_summary
fi
