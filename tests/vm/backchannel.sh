#!/bin/bash
# The NFSv4.1 backchannel suite (runs inside the VM): svcrdma_rs built with
# SVCRDMA_RS_BACKCHANNEL=y serves NFSv4.1 and v4.2 mounts over soft-RoCE;
# nfsd's callback path to the client is UP, and nfsd recalls a file
# delegation (a local write in the export) and a directory delegation (a
# local unlink in it) over the RDMA connection within RECALL_SECS, twice
# per mount. Without a backchannel nfsd reports the callback path DOWN and
# a directory delegation cannot be recalled (the unlink waits until nfsd
# revokes it): with a module built without the switch this suite fails.
# Then umount, nfsd stop, and rmmod with no kernel report.
#
# Not in make check's list: `tests/vm/run backchannel` builds the module
# with the switch on in build/backchannel/ (a copy of the sources) and runs
# this suite on it.
#
# Environment:
#   KO=PATH          the module (default: build/backchannel/svcrdma_rs.ko)
#   VERSIONS="4.1 4.2"  NFS versions mounted, one after the other
#   ROUNDS=2         recalls of each kind per mount
#   RECALL_SECS=10   how long a recall may take
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"

KO=${KO:-$ROOT/build/backchannel/svcrdma_rs.ko}
VERSIONS=${VERSIONS:-4.1 4.2}
ROUNDS=${ROUNDS:-2}
RECALL_SECS=${RECALL_SECS:-10}
NAME=rdma_rs
PORT=20049
MNT=/mnt/bc
EXP=$NFS_EXPORT

# Every nfsd client's states (delegations show as "type: deleg").
states() { cat /proc/fs/nfsd/clients/*/states 2>/dev/null || true; }
# has_deleg NAME: a delegation on a file or directory called NAME. (No
# grep -q in these pipelines: a reader that stops early fails the writer.)
has_deleg() { states | grep 'type: deleg' | grep -F "/$1\"" >/dev/null; }

# cb_state MINOR: the callback state of the client with that minor
# version (empty if none).
cb_state() {
	local f minor state
	for f in /proc/fs/nfsd/clients/*/info; do
		minor= state=
		while IFS= read -r l; do
			case $l in
			"minor version: "*) minor=${l#minor version: } ;;
			"callback state: "*) state=${l#callback state: } ;;
			esac
		done <"$f" 2>/dev/null
		[ "$minor" = "$1" ] && { echo "$state"; return 0; }
	done
	return 0
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

# within SECS: the last timed command took less than SECS seconds.
within() { ((ELAPSED_US < $1 * 1000000)); }

t_setup() {
	[ -f "$KO" ] || fail "no module at $KO (tests/vm/run backchannel builds it)"
	rdma_add rxe rxe0
	modprobe -a sunrpc rdma_cm nfsd
	dmesg_mark
	insmod "$KO" xprt_name=$NAME || fail "insmod $KO failed"
	nfsd_prepare
	nfsd_listen $NAME $PORT || fail "no $NAME listener"
	nfsd_listen tcp 2049 || fail "no tcp listener"
	nfsd_start 8
}

# The module registered its backchannel's client transport class (sunrpc
# logs each one).
t_class_registered() {
	dmesg_since_mark | grep 'Registered svcrdma_rs backchannel transport module' >/dev/null ||
		fail "no 'Registered svcrdma_rs backchannel transport module' in the log: is $KO built with SVCRDMA_RS_BACKCHANNEL=y?"
}

t_mount() {
	nfs_mount "vers=$1,proto=rdma,port=$PORT,actimeo=1" $MNT || fail "mount -o vers=$1 failed"
}

# nfsd probes the callback path with CB_NULL over the backchannel: UP
# means a backward Call went out and its Reply came back.
t_callback_up() {
	local minor=${1#4.} i st
	for ((i = 0; i < 40; i++)); do
		st=$(cb_state "$minor")
		[ "$st" = UP ] && break
		nap 0.5
	done
	grep -H . /proc/fs/nfsd/clients/*/info | grep -E 'minor version|callback' || true
	[ "$st" = UP ] || fail "callback state of the v$1 client: '${st:-no client}', want UP"
	dmesg | grep 'NFSv4.1 backchannel bound' >/dev/null || fail "no 'NFSv4.1 backchannel bound' in the log"
}

# A file the client holds open for reading gets a delegation; a local
# write to it must wait for nfsd's recall and the client's DELEGRETURN.
t_file_recall() {
	local v=$1 r=$2 f i
	f=f$v.$r
	[ "$(cb_state "${v#4.}")" = UP ] || fail "callback path not UP: no recall can work"
	echo data >"$EXP/$f"
	exec 7<"$MNT/$f"
	for ((i = 0; i < 20; i++)); do
		has_deleg "$f" && break
		nap 0.5
	done
	has_deleg "$f" || { exec 7<&-; states; fail "no delegation granted on $f"; }
	echo "delegation on $f: $(states | grep -F "/$f\"")"
	local rc=0
	timed 60 sh -c "echo more >>'$EXP/$f'" || rc=$?
	exec 7<&-
	[ $rc = 0 ] || fail "the local write of $f failed or hung (status $rc, ${ELAPSED} s)"
	echo "local write of $f took ${ELAPSED} s"
	within "$RECALL_SECS" || fail "the local write of $f waited ${ELAPSED} s for the recall (limit ${RECALL_SECS} s)"
	! has_deleg "$f" || fail "the delegation on $f is still there after the recall"
}

# The client asks for a directory delegation when it revalidates a
# directory it has looked at; a local unlink in it must wait for the recall.
t_dir_recall() {
	local v=$1 r=$2 d i
	d=d$v.$r
	[ "$(cb_state "${v#4.}")" = UP ] || fail "callback path not UP: no recall can work"
	mkdir "$EXP/$d"
	echo x >"$EXP/$d/x"
	for ((i = 0; i < 30; i++)); do
		ls -l "$MNT/$d" >/dev/null
		stat "$MNT/$d" >/dev/null
		has_deleg "$d" && break
		nap 0.5
	done
	has_deleg "$d" || { states; fail "no directory delegation granted on $d"; }
	echo "delegation on $d: $(states | grep -F "/$d\"")"
	local rc=0
	timed 60 rm "$EXP/$d/x" || rc=$?
	[ $rc = 0 ] || fail "the local unlink in $d failed or hung (status $rc, ${ELAPSED} s)"
	echo "local unlink in $d took ${ELAPSED} s"
	within "$RECALL_SECS" || fail "the local unlink in $d waited ${ELAPSED} s for the recall (limit ${RECALL_SECS} s)"
	! has_deleg "$d" || fail "the delegation on $d is still there after the recall"
}

t_umount() {
	timeout 120 umount $MNT || { sleep 2; timeout 60 umount $MNT; } || fail "umount failed"
}

# Stopping nfsd closes every connection; sunrpc destroys each backchannel
# after its last reference (from a work item), and each holds a module
# reference until then: rmmod may have to wait for that, briefly.
t_rmmod() {
	nfsd_stop
	local i
	for ((i = 0; i < 40; i++)); do
		rmmod svcrdma_rs 2>/dev/null && break
		nap 0.5
	done
	[ ! -d /sys/module/svcrdma_rs ] || fail "rmmod svcrdma_rs failed: refcount $(cat /sys/module/svcrdma_rs/refcnt)"
	dmesg_clean_since_mark
	rdma_del rxe0
}

t_run setup t_setup
t_run backchannel_class_registered t_class_registered
for v in $VERSIONS; do
	t_run "mount_v$v" t_mount "$v"
	t_run "callback_up_v$v" t_callback_up "$v"
	for ((r = 1; r <= ROUNDS; r++)); do
		t_run "file_delegation_recall_v${v}_$r" t_file_recall "$v" "$r"
		t_run "dir_delegation_recall_v${v}_$r" t_dir_recall "$v" "$r"
	done
	t_run "umount_v$v" t_umount
done
t_run rmmod_clean t_rmmod
t_summary
