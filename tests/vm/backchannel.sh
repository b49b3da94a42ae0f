#!/bin/bash
# The NFSv4.1 backchannel suite (runs inside the VM): svcrdma_rs serves
# NFSv4.1 and v4.2 mounts over soft-RoCE and soft-iWARP, under each memory
# model, and nfsd's callbacks to the client travel back over the client's
# RDMA connection (RFC 8167):
#   - nfsd shows the callback path UP, and sysfs shows the backchannel
#     bound on the mount's connection;
#   - a local write to a file the client holds a delegation on, and a local
#     unlink and create in a directory it holds a delegation on, each
#     finish within RECALL_SECS: nfsd recalled the delegation and the
#     client returned it;
#   - on the first configuration also: another client (its own network
#     and UTS namespaces, its own client id, over TCP) creating in a
#     directory the first holds a delegation on; recalls under fio load on
#     the same mount; recalls after the connection is killed (the RDMA
#     device deleted and re-added: the client reconnects and binds its
#     session's backchannel again); the hostile backward-direction client
#     (tests/vm/hostile-bc.sh), when present;
#   - then umount, nfsd stop and rmmod, each with recalls in flight: no
#     hang, no kernel report, no connection left (scripts/vm-run scans
#     kmemleak after the suite and fails the run on a leak).
# Each recall's time is printed ("recall: ...").
#
# PROFILE=off runs a short subset against a module built without the
# backchannel (SVCRDMA_RS_BACKCHANNEL=n), where it must fail: the callback
# path stays DOWN, no file delegation is granted, and an unlink in a
# directory delegated to the client waits for a recall that cannot happen.
# tests/vm/run backchannel-off runs it and passes only if those fail.
#
# Environment:
#   KO=PATH          the module (default: svcrdma_rs.ko of this tree)
#   PROFILE=check|off  (make check's core suite, T_CORE=1, leaves the
#                    recall under fio load and the hostile backchannel to
#                    make vm-test and make hostile's backchannel-full)
#   CONFIGS="rxe:frmr:4.1 rxe:dma_mr:4.2 siw:frmr:4.2 siw:dma_mr:4.1"
#                    device:memory model:NFS version, one mount each
#   RECALL_SECS=5    how long a recalled operation may take
#   RECALL_LOAD_SECS=8  the same under fio load on the mount (seen 2.9 to
#                    5.9 s under TCG; a recall that never reaches the client
#                    waits for the 10 s lease instead)
#   RECALL_BOUND=30  when a stalled operation is given up (then it fails)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
HOSTILE_BC=$(dirname "$0")/hostile-bc.sh
# shellcheck source=/dev/null
[ -f "$HOSTILE_BC" ] && . "$HOSTILE_BC"

KO=${KO:-$ROOT/svcrdma_rs.ko}
PROFILE=${PROFILE:-check}
if [ "$PROFILE" = off ]; then
	CONFIGS=${CONFIGS:-rxe:frmr:4.2}
fi
CONFIGS=${CONFIGS:-rxe:frmr:4.1 rxe:dma_mr:4.2 siw:frmr:4.2 siw:dma_mr:4.1}
RECALL_SECS=${RECALL_SECS:-5}
RECALL_LOAD_SECS=${RECALL_LOAD_SECS:-8}
RECALL_BOUND=${RECALL_BOUND:-30}
NAME=rdma_rs
PORT=20049
MNT=/mnt/bc
EXP=$NFS_EXPORT
S=/sys/kernel/svcrdma_rs
# The second client: network namespace, its end of the veth pair, addresses.
NS=bc2
NS_SRV=10.77.0.1 NS_CLI=10.77.0.2
# The suite's own output (t_run shows a test's output only when it fails;
# the recall times are wanted either way).
exec {BC_OUT}>&1

# Every nfsd client's states (delegations show as "type: deleg").
states() { cat /proc/fs/nfsd/clients/*/states 2>/dev/null || true; }
# has_deleg NAME: a delegation on a file or directory called NAME. (No
# grep -q in these pipelines: a reader that stops early fails the writer.)
has_deleg() { states | grep 'type: deleg' | grep -F "/$1\"" >/dev/null; }

# cb_state MINOR: the callback state of the newest client (highest id)
# with that minor version (empty if none).
cb_state() {
	local f minor state id max=-1 out=
	for f in /proc/fs/nfsd/clients/*/info; do
		id=${f%/info} id=${id##*/}
		[[ $id =~ ^[0-9]+$ ]] && ((id > max)) || continue
		minor= state=
		while IFS= read -r l; do
			case $l in
			"minor version: "*) minor=${l#minor version: } ;;
			"callback state: "*) state=${l#callback state: } ;;
			esac
		done <"$f" 2>/dev/null
		[ "$minor" = "$1" ] && out=$state max=$id
	done
	echo "$out"
}

# timed SECS CMD...: runs CMD with a bound of SECS; ELAPSED_US is how long
# it took (microseconds), ELAPSED the same in seconds for messages.
timed() {
	local secs=$1 t0 rc=0
	shift
	t0=${EPOCHREALTIME/./}
	timeout "$secs" "$@" || rc=$?
	ELAPSED_US=$((${EPOCHREALTIME/./} - t0))
	ELAPSED=$(printf '%d.%03d' $((ELAPSED_US / 1000000)) $((ELAPSED_US % 1000000 / 1000)))
	return $rc
}

# phase_start, phase WHAT: the time of each step of a long test, printed
# either way (where a slow run spends its time).
phase_start() { PHASE_US=${EPOCHREALTIME/./}; }
phase() {
	local now=${EPOCHREALTIME/./}
	printf '%s: %s after %d.%01d s\n' "$TAG" "$1" $(((now - PHASE_US) / 1000000)) \
		$(((now - PHASE_US) % 1000000 / 100000)) >&"$BC_OUT"
	PHASE_US=$now
}

# within SECS: the last timed command took less than SECS seconds.
within() { ((ELAPSED_US < $1 * 1000000)); }

# local_change CMD...: a change the test makes in the export, bounded: any
# change there may need a recall (the client may hold a delegation on the
# export's root), and without a backchannel it stalls.
local_change() {
	local rc=0
	timeout "$RECALL_BOUND" "$@" || rc=$?
	[ $rc = 0 ] || fail "a local change in the export ($*) stalled or failed (status $rc): a delegation could not be recalled? ($(cb_note))"
}

# recalled WHAT RC: judges the timed operation WHAT that needed a recall
# (RC its status) and prints its time.
recalled() {
	echo "recall: $TAG $1 took ${ELAPSED} s" >&"$BC_OUT"
	[ "$2" = 0 ] || fail "$1 failed or stalled (status $2, ${ELAPSED} s)"
	within "$RECALL_SECS" || fail "$1 waited ${ELAPSED} s for the recall (limit ${RECALL_SECS} s)"
}

# cb_note: says, for a failure message, whether the callback path is UP.
cb_note() { echo "callback state of the v$VERS client: '$(cb_state "${VERS#4.}")'"; }

# The server on device DEV (rxe or siw) with memory model MODEL. The model
# is a run-time parameter (new connections); a device change restarts nfsd.
server_up() {
	local dev=$1 model=$2
	if [ ! -d /sys/class/infiniband/${dev}0 ]; then
		nfsd_stop
		rdma_del rxe0
		rdma_del siw0
		rdma_add "$dev" "${dev}0"
	fi
	if [ ! -d /sys/module/svcrdma_rs ]; then
		[ -f "$KO" ] || fail "no module at $KO"
		insmod "$KO" xprt_name=$NAME || fail "insmod $KO failed"
	fi
	# A DMA MR on iWARP exposes all server memory: allowed here, for the test.
	echo always >/sys/module/svcrdma_rs/parameters/dma_mr
	echo "$model" >/sys/module/svcrdma_rs/parameters/memreg
	if ! grep -q "^$NAME " /proc/fs/nfsd/portlist 2>/dev/null; then
		nfsd_prepare
		# nfsd starts lockd (for NFSv3, which the hostile backward client
		# uses), whose own grace period (50 s by default) stops nfsd
		# granting file delegations (locks_in_grace()): 3 s here.
		modprobe lockd
		echo 3 >/proc/sys/fs/nfs/nlm_timeout || fail "cannot set lockd's nlm_timeout"
		echo 3 >/proc/sys/fs/nfs/nlm_grace_period || fail "cannot set lockd's grace period"
		nfsd_listen $NAME $PORT || fail "no $NAME listener"
		grep -q "^tcp " /proc/fs/nfsd/portlist || nfsd_listen tcp 2049 || fail "no tcp listener"
		nfsd_start 8
	fi
}

t_setup() {
	modprobe -a sunrpc rdma_cm nfsd rpcrdma
	mkdir -p $MNT /mnt/bc2
	dmesg_mark
}

t_mount() {
	server_up "$DEV" "$MODEL"
	nfs_mount "vers=$VERS,proto=rdma,port=$PORT,actimeo=1" $MNT || fail "mount -o vers=$VERS failed"
	last_conn
	CONN=$REPLY
	[ "$CONN" -gt 0 ] || fail "no svcrdma_rs connection for the mount"
	echo "$CONN" >/tmp/bc.conn
	local want=$MODEL
	[ "$want" = dma_mr ] && [ "$DEV" = siw ] && want=dma_mr_remote_write
	rd $S/connections/$CONN/memreg
	[ "$REPLY" = "$want" ] || fail "connection $CONN memreg=$REPLY, want $want"
	rd $S/connections/$CONN/device
	[ "$REPLY" = "${DEV}0" ] || fail "connection $CONN on $REPLY, want ${DEV}0"
}

# wait_callback_up SECS: the v$VERS client's callback path is UP within SECS
# (nfsd probes it with CB_NULL: a backward Call went out and its Reply
# came back), and the mount's connection shows its backchannel in sysfs.
wait_callback_up() {
	local i st conn
	for ((i = 0; i < $1 * 2; i++)); do
		st=$(cb_state "${VERS#4.}")
		[ "$st" = UP ] && break
		# The client notices a lost backchannel on its next SEQUENCE.
		stat $MNT >/dev/null 2>&1 || true
		nap 0.5
	done
	grep -H . /proc/fs/nfsd/clients/*/info | grep -E 'minor version|callback' || true
	[ "$st" = UP ] || fail "callback state of the v$VERS client: '${st:-no client}', want UP"
	last_conn
	conn=$REPLY
	rd $S/connections/$conn/backchannel
	[ "$REPLY" = 1 ] || fail "connection $conn: sysfs backchannel=$REPLY, want 1"
}

t_callback_up() {
	wait_callback_up 20
	dmesg_since_mark | grep 'NFSv4.1 backchannel bound' >/dev/null ||
		fail "no 'NFSv4.1 backchannel bound' in the log"
}

# deleg_file F: a file the client holds open for reading gets a delegation
# (nfsd grants one only while the callback path is UP, and not always on
# the first OPEN: the file is opened again, a new OPEN, until it does).
# Leaves fd 7 open.
deleg_file() {
	local f=$1 i
	local_change sh -c "echo data >'$EXP/$f'"
	for ((i = 0; i < 24; i++)); do
		((i % 4)) || { exec 7<&- 7<"$MNT/$f"; }
		has_deleg "$f" && { echo "delegation after $((i / 4 + 1)) OPEN(s)"; return 0; }
		nap 0.5
	done
	exec 7<&-
	states
	fail "no delegation granted on $f after 6 OPENs ($(cb_note))"
}

# deleg_dir D: a new directory the client holds a delegation on, in
# DELEG_DIR: D, or D.2 or D.3 when the one before got none in 10 s. The
# client asks for one (GET_DIR_DELEGATION, in a GETATTR) once per ACCESS
# it sends for the directory, which it caches: a refusal (nfsd's recall
# filter, a lease it cannot take at that moment) is not asked again, so a
# fresh directory is the next try (CI once saw D get none in 15 s).
deleg_dir() {
	local d i n
	for n in "" .2 .3; do
		d=$1$n
		local_change mkdir -p "$EXP/$d"
		local_change sh -c "echo x >'$EXP/$d/x'"
		for ((i = 0; i < 20; i++)); do
			ls -l "$MNT/$d" >/dev/null
			stat "$MNT/$d" >/dev/null
			has_deleg "$d" && { DELEG_DIR=$d; return 0; }
			nap 0.5
		done
		echo "no directory delegation on $d in 10 s"
	done
	states
	fail "no directory delegation granted on $1, $1.2 or $1.3 ($(cb_note))"
}

# A local write to a delegated file waits for the recall and DELEGRETURN.
t_file_recall() {
	local f=f.$TAG.$1 rc=0
	deleg_file "$f"
	echo "delegation on $f: $(states | grep -F "/$f\"")"
	timed "$RECALL_BOUND" sh -c "echo more >>'$EXP/$f'" || rc=$?
	exec 7<&-
	recalled "local write to a delegated file" $rc
	! has_deleg "$f" || fail "the delegation on $f is still there after the recall"
}

# A local unlink in a delegated directory, and a local create in another
# (nfsd grants no new delegation on an object it recalled one from lately).
t_dir_recall() {
	local d rc=0
	deleg_dir "d.$TAG.$1.u"
	d=$DELEG_DIR
	echo "delegation on $d: $(states | grep -F "/$d\"")"
	timed "$RECALL_BOUND" rm "$EXP/$d/x" || rc=$?
	recalled "local unlink in a delegated directory" $rc
	! has_deleg "$d" || fail "the delegation on $d is still there after the recall"
	deleg_dir "d.$TAG.$1.c"
	d=$DELEG_DIR
	timed "$RECALL_BOUND" touch "$EXP/$d/new" || rc=$?
	recalled "local create in a delegated directory" $rc
	! has_deleg "$d" || fail "the delegation on $d is still there after the recall"
}

# The second client: network namespace $NS, a veth pair to this one, and
# its own hostname (the NFS client id is made from it).
t_second_client_setup() {
	ip netns add $NS
	ip link add bc2h type veth peer name bc2c
	ip link set bc2c netns $NS
	ip addr add $NS_SRV/24 dev bc2h
	ip link set bc2h up
	ip netns exec $NS ip addr add $NS_CLI/24 dev bc2c
	ip netns exec $NS ip link set bc2c up
	ip netns exec $NS ip link set lo up
	wait_for 10 ip netns exec $NS ping -c 1 -W 1 $NS_SRV || fail "no route from namespace $NS to $NS_SRV"
}

# Another client (own client id, over TCP) creates in a directory the
# first holds a delegation on: nfsd recalls it over the RDMA backchannel.
t_second_client() {
	local d rc=0 out
	deleg_dir "d2.$TAG"
	d=$DELEG_DIR
	out=$(timeout $((RECALL_BOUND + 150)) ip netns exec $NS unshare --uts bash -c '
		hostname svcrdma-bc-client2
		timeout 60 mount -t nfs -o vers=4.2,proto=tcp '$NS_SRV':/ /mnt/bc2 || exit 90
		t0=${EPOCHREALTIME/./}
		timeout '"$RECALL_BOUND"' touch /mnt/bc2/'"$d"'/from-client2
		rc=$?
		echo "elapsed_us $((${EPOCHREALTIME/./} - t0))"
		timeout 60 umount /mnt/bc2 || timeout 30 umount -f -l /mnt/bc2
		exit $rc' 2>&1) || rc=$?
	echo "$out"
	[ $rc != 90 ] || fail "the second client's mount failed"
	ELAPSED_US=$(echo "$out" | awk '/^elapsed_us/ { print $2 }')
	[ -n "$ELAPSED_US" ] || fail "no time from the second client"
	ELAPSED=$(printf '%d.%03d' $((ELAPSED_US / 1000000)) $((ELAPSED_US % 1000000 / 1000)))
	recalled "another client's create in a delegated directory" $rc
	[ -e "$EXP/$d/from-client2" ] || fail "the second client's file is not in the export"
	! has_deleg "$d" || fail "the delegation on $d is still there after the recall"
}

# Recalls while fio writes and reads on the same mount.
t_recall_under_load() {
	local fpid rc=0
	fio --name=bcload --directory=$MNT --rw=randrw --bs=64k --size=4m --direct=1 \
		--ioengine=psync --numjobs=2 --time_based --runtime=60 --output=/tmp/bc.fio >/dev/null 2>&1 &
	fpid=$!
	nap 5
	kill -0 $fpid 2>/dev/null || { cat /tmp/bc.fio; fail "fio ended early"; }
	# In this test's subshell only.
	RECALL_SECS=$RECALL_LOAD_SECS
	t_file_recall load
	t_dir_recall load
	kill -0 $fpid 2>/dev/null || { cat /tmp/bc.fio; fail "fio ended before the recalls did: no load"; }
	wait $fpid || rc=$?
	[ $rc = 0 ] || { cat /tmp/bc.fio; fail "fio failed (status $rc)"; }
	grep -E 'READ:|WRITE:' /tmp/bc.fio || true
}

# The connection killed (its RDMA device deleted and re-added): the client
# reconnects, binds its session's backchannel again, and recalls work.
t_recall_after_reconnect() {
	local old
	old=$(cat /tmp/bc.conn)
	timeout 120 rdma link delete "${DEV}0" || fail "rdma link delete ${DEV}0 did not complete"
	rdma_add "$DEV" "${DEV}0"
	# Any I/O makes the client reconnect.
	timeout 120 ls $MNT >/dev/null || fail "the mount did not come back"
	wait_callback_up 90
	last_conn
	[ "$REPLY" -gt "$old" ] || fail "no new connection after the reconnect (newest $REPLY, old $old)"
	echo "connection $old replaced by $REPLY"
	t_file_recall reconnect
	t_dir_recall reconnect
}

# in_flight N: N local writes to N new files, started at once once the
# client holds delegations on some of them (each of those writes needs a
# recall); their pids in INFLIGHT. At least one delegation must be held, or
# nothing would be in flight. (The names carry the test's pid: files written
# here are blocked from delegation for a while.)
#
# nfsd grants by its own heuristics: never on a file whose handle hashes into
# its filter of recently recalled ones (fs/nfsd's block_delegations: 30-60 s,
# so a whole batch can stay refused), and a client may give back delegations
# on files it has no open for (CB_RECALL_ANY from nfsd's shrinker, under the
# debug guest's memory pressure). So the files stay open here (re-opened, a
# new OPEN, until delegated), and a batch that gets none for 10 s is replaced
# by new files, up to 4 batches (CI once saw 15 s of OPENs of one batch of
# 6 files get no delegation).
in_flight() {
	local i b r f held=0 fds=() base=fl.$TAG.$BASHPID
	INFLIGHT=()
	for ((b = 0; b < 4 && held == 0; b++)); do
		# One local change for the batch (each may need a recall of the
		# client's delegation on the export's root).
		local_change sh -c "for i in \$(seq 0 $(($1 - 1))); do echo data >'$EXP/$base.$b.'\$i; done"
		for ((i = 0; i < $1; i++)); do fds[i]=; done
		for ((r = 0; r < 10 && held == 0; r++)); do
			for ((i = 0; i < $1; i++)); do
				f=$base.$b.$i
				has_deleg "$f" && continue
				[ -z "${fds[i]}" ] || exec {fds[i]}<&-
				exec {fds[i]}<"$MNT/$f" || fail "cannot open $MNT/$f"
			done
			nap 1
			held=0
			for ((i = 0; i < $1; i++)); do
				has_deleg "$base.$b.$i" && held=$((held + 1))
			done
		done
		((held)) || close_fds
	done
	b=$((b - 1))
	[ $held -gt 0 ] || { states; fail "no delegation held on $(($1 * 4)) files in 4 batches: no recall would be in flight ($(cb_note))"; }
	echo "recalls in flight: $held of $1 files delegated (batch $((b + 1)))" >&"$BC_OUT"
	for ((i = 0; i < $1; i++)); do
		# (not holding the client's files open itself)
		(close_fds && exec sh -c "echo more >>'$EXP/$base.$b.$i'") &
		INFLIGHT+=($!)
	done
	# The writers wait for the recalls; the client's files are closed (an
	# open file would keep the umount busy).
	close_fds
}

# close_fds: closes in_flight's descriptors (its local array fds).
close_fds() {
	local i
	for i in "${!fds[@]}"; do
		[ -z "${fds[i]}" ] || exec {fds[i]}<&-
		fds[i]=
	done
}

# wait_in_flight WHAT: the writers started by in_flight all finish (nfsd gives
# up a recall when the client or nfsd goes away) within RECALL_BOUND.
wait_in_flight() {
	local p i alive
	for ((i = 0; i < RECALL_BOUND * 2; i++)); do
		alive=0
		for p in "${INFLIGHT[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && return 0
		nap 0.5
	done
	fail "local writes still waiting ${RECALL_BOUND} s after $1"
}

t_umount() {
	timeout 120 umount $MNT || { sleep 2; timeout 60 umount $MNT; } || fail "umount failed"
}

# umount while recalls are in flight.
t_umount_in_flight() {
	phase_start
	in_flight 6
	phase "delegations held"
	t_umount
	phase umount
	wait_in_flight umount
	phase "writers done"
}

# nfsd stop with recalls in flight: every connection goes; nfsd started
# again, the client recovers and unmounts.
t_nfsd_stop_in_flight() {
	server_up "$DEV" "$MODEL"
	nfs_mount "vers=$VERS,proto=rdma,port=$PORT" $MNT || fail "mount failed"
	wait_callback_up 20
	phase_start
	in_flight 6
	phase "delegations held"
	timeout 120 sh -c 'echo 0 >/proc/fs/nfsd/threads' || fail "stopping nfsd did not complete within 120 s"
	phase "nfsd stopped"
	wait_in_flight "nfsd stop"
	phase "writers done"
	local i
	for ((i = 0; i < 120; i++)); do
		last_conn
		[ "$REPLY" = 0 ] && break
		nap 0.5
	done
	[ "$REPLY" = 0 ] || fail "connection $REPLY still in sysfs 60 s after nfsd stopped"
	phase "connections gone"
	# nfsd back: the client reconnects and its mount works and goes.
	server_up "$DEV" "$MODEL"
	timeout 120 ls $MNT >/dev/null || fail "the mount did not come back after nfsd restarted"
	phase "mount back"
	t_umount
	phase umount
}

# rmmod once nfsd is stopped. Each backchannel holds a module reference
# until sunrpc destroys it (from a work item), so rmmod may wait briefly.
t_rmmod() {
	timeout 120 sh -c 'echo 0 >/proc/fs/nfsd/threads' || fail "stopping nfsd did not complete within 120 s"
	local i
	for ((i = 0; i < 40; i++)); do
		rmmod svcrdma_rs 2>/dev/null && break
		nap 0.5
	done
	[ ! -d /sys/module/svcrdma_rs ] || fail "rmmod svcrdma_rs failed: refcount $(cat /sys/module/svcrdma_rs/refcnt)"
	dmesg_clean_since_mark
	rdma_del rxe0
	rdma_del siw0
}

t_run setup t_setup
first=1
for cfg in $CONFIGS; do
	IFS=: read -r DEV MODEL VERS <<<"$cfg"
	TAG=${DEV}_${MODEL}_v$VERS
	t_run "${TAG}_mount" t_mount
	t_run "${TAG}_callback_up" t_callback_up
	t_run "${TAG}_file_recall" t_file_recall 1
	if [ $first = 0 ]; then
		# (make check's core suite recalls directory delegations on the
		# first configuration only)
		t_full "${TAG}_dir_recall" t_dir_recall 1
		t_run "${TAG}_umount" t_umount
		continue
	fi
	first=0
	t_run "${TAG}_dir_recall" t_dir_recall 1
	t_run second_client_setup t_second_client_setup
	t_run "${TAG}_second_client_create" t_second_client
	if [ "$PROFILE" = off ]; then
		t_run "${TAG}_umount" t_umount
		continue
	fi
	t_full "${TAG}_recall_under_fio" t_recall_under_load
	t_run "${TAG}_recall_after_reconnect" t_recall_after_reconnect
	if declare -F hostile_bc_test >/dev/null; then
		t_full "${TAG}_hostile_backchannel" hostile_bc_test
	fi
	# make check's core suite stops with recalls in flight once
	# (nfsd_stop_with_recalls_in_flight, below) and unmounts here.
	if [ -n "${T_CORE:-}" ]; then
		t_full "${TAG}_umount_with_recalls_in_flight" t_umount_in_flight
		t_run "${TAG}_umount" t_umount
	else
		t_run "${TAG}_umount_with_recalls_in_flight" t_umount_in_flight
	fi
done
if [ "$PROFILE" != off ]; then
	t_run "${TAG}_nfsd_stop_with_recalls_in_flight" t_nfsd_stop_in_flight
fi
t_run rmmod_clean t_rmmod
t_summary
