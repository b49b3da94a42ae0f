#!/bin/bash
# The data-path suite (runs inside the VM): a stock Linux NFS client mounts
# over RDMA and moves real data, on soft-RoCE (rxe) and soft-iWARP (siw),
# under each memory model. SERVER=c runs the same tests against the
# kernel's C svcrdma, to prove each test is a valid test.
#
# Environment:
#   SERVER=rs|c         the server transport (default rs: svcrdma_rs)
#   PROFILE=full|check  full (make vm-test-data): every test on every
#                       configuration below. check (make check, sized for
#                       CI's budget under TCG): everything on the first
#                       configuration with smaller sizes, and one version
#                       test per configuration, the NFS version rotating so
#                       the run still covers every version and every model.
#   CONFIGS="rxe:frmr rxe:dma_mr siw:dma_mr siw:frmr"   devices x models
#   FULL=first          which configurations also run the rsize/wsize, fio
#                       and tarball tests: "first" (the first on each
#                       device), "all", or "one" (the first configuration)
#   BIG_MB=256          the large direct-I/O file (first configuration):
#                       ~13 min here, the debug test kernel under TCG moves
#                       ~0.7 MB/s (the C svcrdma as this one)
#   FILE_MB=1           the per-version and per-rsize files
#   DIR_ENTRIES=10000   the large directory (first configuration)
#   CYCLES=50           mount/umount cycles (first configuration)
#   HOSTILE_SHORT=N     the hostile-client test on the first configuration
#                       (svcrdma_rs, check profile): hostile.py's directed
#                       cases and N random messages, then
#   HOSTILE_SHORT_VOLUME=5000  hostile_volume's mutated Calls (unset
#                       HOSTILE_SHORT: not run; data-check.sh sets it, make
#                       hostile runs the full counts)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"
# The hostile-client test only when asked for (HOSTILE_SHORT).
[ -z "${HOSTILE_SHORT:-}" ] || . "$(dirname "$0")/hostile.sh"

SERVER=${SERVER:-rs}
PROFILE=${PROFILE:-full}
CONFIGS=${CONFIGS:-rxe:frmr rxe:dma_mr siw:dma_mr siw:frmr}
if [ "$PROFILE" = check ]; then
	FULL=${FULL:-one} BIG_MB=${BIG_MB:-8} CYCLES=${CYCLES:-3}
	# Still hundreds of READDIR calls with replies in Reply chunks.
	DIR_ENTRIES=${DIR_ENTRIES:-3000}
	TREE_DIRS=${TREE_DIRS:-rdma sound}
fi
FULL=${FULL:-first}
BIG_MB=${BIG_MB:-256}
FILE_MB=${FILE_MB:-1}
DIR_ENTRIES=${DIR_ENTRIES:-10000}
CYCLES=${CYCLES:-50}
KO=${KO:-$ROOT/svcrdma_rs.ko}
PORT=20049
MNT=/mnt/data
S=/sys/kernel/svcrdma_rs
if [ "$SERVER" = c ]; then NAME=rdma; else NAME=rdma_rs; fi
FIRST=${CONFIGS%% *}

# sha FILE: its SHA-256.
sha() { sha256sum "$1" | cut -d' ' -f1; }

mnt() { nfs_mount "$1,proto=rdma,port=$PORT" $MNT || fail "mount -o $1,proto=rdma,port=$PORT failed"; }
umnt() { timeout 120 umount $MNT || { sleep 2; timeout 60 umount $MNT; } || fail "umount failed"; }

# direct_rw MB NAME: writes MB MiB of random data to the mount with direct
# I/O, checks the file nfsd wrote on the server side (the export, read
# locally: not through the transport under test), reads it back over the
# mount the same way, and compares checksums.
direct_rw() {
	local mb=$1 name=$2 want got srv
	head -c $((mb << 20)) /dev/urandom >/tmp/src.$name
	want=$(sha /tmp/src.$name)
	dd if=/tmp/src.$name of=$MNT/$name bs=1M oflag=direct status=none || fail "direct write of $name failed"
	srv=$(sha "$NFS_EXPORT/$name") || fail "the server has no $NFS_EXPORT/$name"
	[ "$srv" = "$want" ] || fail "$name: the server's file is $srv, wrote $want"
	dd if=$MNT/$name of=/tmp/back.$name bs=1M iflag=direct status=none || fail "direct read of $name failed"
	got=$(sha /tmp/back.$name)
	rm -f /tmp/src.$name /tmp/back.$name
	[ "$got" = "$want" ] || fail "$name: read back $got, wrote $want"
	echo "$name: ${mb} MiB written, the server's file and the read-back match, sha256 $want"
}

# The server side of configuration DEV:MODEL. Only the device change needs
# a restart: the memory model is a run-time parameter (new connections).
server_up() {
	local dev=$1 model=$2
	if [ -d /sys/class/infiniband/${dev}0 ] && grep -q "^$NAME " /proc/fs/nfsd/portlist 2>/dev/null; then
		if [ "$SERVER" = rs ]; then
			echo $model >/sys/module/svcrdma_rs/parameters/memreg
			echo always >/sys/module/svcrdma_rs/parameters/dma_mr
		fi
		return 0
	fi
	nfsd_stop
	rdma_del rxe0
	rdma_del siw0
	rdma_add $dev ${dev}0
	if [ "$SERVER" = rs ]; then
		if [ -d /sys/module/svcrdma_rs ]; then
			echo $model >/sys/module/svcrdma_rs/parameters/memreg
			echo always >/sys/module/svcrdma_rs/parameters/dma_mr
		else
			insmod "$KO" xprt_name=$NAME memreg=$model dma_mr=always || fail "insmod failed"
		fi
	fi
	nfsd_prepare
	grep -q "^$NAME " /proc/fs/nfsd/portlist 2>/dev/null || nfsd_listen $NAME $PORT || fail "no $NAME listener"
	grep -q "^tcp " /proc/fs/nfsd/portlist || nfsd_listen tcp 2049
	nfsd_start 8
}

# The model the newest connection (the mount just made) got, from sysfs
# (svcrdma_rs only).
check_model() {
	local want=$1 c n max=0
	[ "$SERVER" = rs ] || return 0
	[ "$want" = dma_mr ] && [ "$CUR_DEV" = siw ] && want=dma_mr_remote_write
	for c in $S/connections/*; do
		n=${c##*/}
		[[ $n =~ ^[0-9]+$ ]] && ((n > max)) && max=$n
	done
	[ $max -gt 0 ] || fail "no connection in sysfs while mounted"
	rd $S/connections/$max/memreg
	[ "$REPLY" = "$want" ] || fail "connection $max memreg=$REPLY, want $want"
	rd $S/connections/$max/device
	[ "$REPLY" = "${CUR_DEV}0" ] || fail "connection $max on $REPLY, want ${CUR_DEV}0"
}

# conn_kept WHAT ID: the mount's connection ID (svcrdma_rs only) is still
# up and still the newest: the server never closed a well-behaved client's
# connection (after a close, the client reconnects and resends, and the
# data would still arrive, only late).
conn_kept() {
	[ "$SERVER" = rs ] || return 0
	last_conn
	[ "$REPLY" = "$2" ] && [ -d $S/connections/$2 ] && return 0
	dmesg | grep -a 'svcrdma_rs' | tail -n 8 || true
	fail "$1: the mount's connection $2 went (newest now: $REPLY): the server closed it mid-test (its log above)"
}

t_setup() {
	modprobe -a sunrpc ib_core rdma_cm rpcrdma
	mkdir -p $MNT
}

# versions [VERSION...]: each NFS version mounts (default: all); a file
# goes both ways.
t_versions() {
	local v c0 vs=("$@")
	[ $# -gt 0 ] || vs=(3 4.0 4.1 4.2)
	for v in "${vs[@]}"; do
		mnt vers=$v
		check_model "$CUR_MODEL"
		last_conn
		c0=$REPLY
		direct_rw $FILE_MB v$v.bin
		# Buffered I/O through the page cache, read back from the server.
		head -c 300000 /dev/urandom >/tmp/small
		cp /tmp/small $MNT/small.$v
		sync
		echo 3 >/proc/sys/vm/drop_caches
		cmp /tmp/small "$NFS_EXPORT/small.$v" || fail "v$v: the server's copy of the buffered file differs"
		cmp /tmp/small $MNT/small.$v || fail "v$v: buffered file differs when read back"
		ls -l $MNT >/dev/null || fail "v$v: listing failed"
		rm -f $MNT/small.$v $MNT/v$v.bin
		conn_kept "v$v" "$c0"
		umnt
	done
}

t_rsize_wsize() {
	local sz
	for sz in 4096 1048576; do
		mnt vers=4.2,rsize=$sz,wsize=$sz
		grep " $MNT " /proc/mounts | has "rsize=$sz,wsize=$sz" || fail "rsize/wsize $sz not in effect: $(grep " $MNT " /proc/mounts)"
		direct_rw $FILE_MB rw$sz.bin
		rm -f $MNT/rw$sz.bin
		umnt
	done
}

t_big_file() {
	mnt vers=4.2
	direct_rw $BIG_MB big.bin
	rm -f $MNT/big.bin
	umnt
}

# A source tarball (C headers: many small files, a few large ones).
TREE_DIRS=${TREE_DIRS:-rdma sound asm-generic mtd}

t_tarball() {
	local d
	mnt vers=4.2
	mkdir -p $MNT/tree
	# shellcheck disable=SC2086
	tar -C /usr/include -czf /tmp/tree.tgz $TREE_DIRS
	tar -C $MNT/tree -xzf /tmp/tree.tgz || fail "unpacking onto the mount failed"
	umnt
	mnt vers=3
	for d in $TREE_DIRS; do
		diff -r /usr/include/$d $MNT/tree/$d || fail "unpacked $d differs from the original"
	done
	echo "tree of $(find $MNT/tree -type f | wc -l) files matches"
	rm -rf $MNT/tree /tmp/tree.tgz
	umnt
}

t_big_directory() {
	local n
	# Made on the server (creating them over NFS would take most of an
	# hour here); what is tested is the listing: READDIR replies that only
	# fit Reply chunks, over many calls.
	rm -rf $NFS_EXPORT/many
	mkdir -p $NFS_EXPORT/many
	(cd $NFS_EXPORT/many && seq -f 'entry_with_a_longish_name_%06g' 1 $DIR_ENTRIES | timeout 300 xargs touch) || fail "creating $DIR_ENTRIES files failed"
	echo "$DIR_ENTRIES entries made on the server"
	mnt vers=3
	# In isolation each listing takes ~10 s here: a hang is a failure.
	n=$(timeout 300 ls -f $MNT/many | grep -c '^entry_with_a_longish_name_' || true)
	[ "$n" = "$DIR_ENTRIES" ] || fail "v3 listing shows $n of $DIR_ENTRIES entries"
	umnt
	mnt vers=4.2
	n=$(timeout 300 ls -f $MNT/many | grep -c '^entry_with_a_longish_name_' || true)
	[ "$n" = "$DIR_ENTRIES" ] || fail "v4.2 listing shows $n of $DIR_ENTRIES entries"
	umnt
	# Removed on the server too: 10,000 REMOVE calls would take ~10 min here.
	rm -rf $NFS_EXPORT/many
}

t_fio_verify() {
	mnt vers=4.2
	fio --name=verify --directory=$MNT --numjobs=4 --size=1M --bsrange=4k-256k \
		--rw=randwrite --direct=1 --ioengine=psync --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --group_reporting >/tmp/fio.out 2>&1 ||
		{ tail -n 20 /tmp/fio.out; fail "fio verify failed"; }
	grep -E 'WRITE:|READ:' /tmp/fio.out || true
	grep -q 'verify: bad' /tmp/fio.out && fail "fio reported bad blocks"
	rm -f $MNT/verify.*
	umnt
}

t_mount_cycles() {
	local i
	for ((i = 1; i <= CYCLES; i++)); do
		mnt vers=4.2
		[ -d $MNT/. ] || fail "cycle $i: mount point unusable"
		umnt
	done
	echo "$CYCLES mount/umount cycles"
}

t_teardown() {
	dmesg_mark
	nfsd_stop
	if [ "$SERVER" = rs ]; then
		wait_for 30 rmmod svcrdma_rs || fail "rmmod failed"
	fi
	dmesg_clean_since_mark
}

t_run setup t_setup
seen=
# The check profile's one version per configuration (the other tests on
# the first configuration mount v3 and v4.2 too).
rotate=(4.0 4.1 3 4.2)
i=0
for cfg in $CONFIGS; do
	CUR_DEV=${cfg%%:*} CUR_MODEL=${cfg#*:}
	full=0
	case " $seen " in *" $CUR_DEV "*) ;; *) full=1 seen="$seen $CUR_DEV" ;; esac
	[ "$FULL" = all ] && full=1
	[ "$FULL" = one ] && { [ "$cfg" = "$FIRST" ] && full=1 || full=0; }
	tag="${SERVER}_${CUR_DEV}_${CUR_MODEL}"
	t_run "${tag}_server_up" server_up "$CUR_DEV" "$CUR_MODEL"
	if [ "$PROFILE" = check ]; then
		t_run "${tag}_version_${rotate[i % 4]}" t_versions "${rotate[i % 4]}"
		i=$((i + 1))
	else
		t_run "${tag}_versions" t_versions
	fi
	if [ $full = 1 ]; then
		t_run "${tag}_rsize_wsize" t_rsize_wsize
		t_run "${tag}_fio_verify" t_fio_verify
		t_full "${tag}_tarball" t_tarball
	fi
	if [ "$cfg" = "$FIRST" ]; then
		t_run "${tag}_big_file" t_big_file
		t_full "${tag}_big_directory" t_big_directory
		t_run "${tag}_mount_cycles" t_mount_cycles
		if [ "$PROFILE" = check ] && [ "$SERVER" = rs ] && [ -n "${HOSTILE_SHORT:-}" ]; then
			t_run "${tag}_hostile_client" hostile_test "$HOSTILE_SHORT" 3 "${HOSTILE_SHORT_VOLUME:-5000}"
		fi
	fi
done
t_run teardown t_teardown
t_summary
