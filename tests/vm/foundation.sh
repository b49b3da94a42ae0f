#!/bin/bash
# The foundation suite (runs inside the VM, started by tests/vm/run):
# soft-RoCE, the module's load/parameters/registration, an RDMA listener for
# nfsd, clean teardown, the name-taken refusal, and the C svcrdma reference
# mount that proves the client side of the testbed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdma.sh"
. "$(dirname "$0")/nfs.sh"

KO=$ROOT/svcrdma_rs.ko
NAME=rdma_rs   # rpcrdma.ko (the NFS client) takes "rdma" in a single VM
PORT=20049

load_deps() { modprobe -a sunrpc ib_core rdma_cm; }

t_rxe_up() {
	rdma_add rxe rxe0
	rdma_link rxe0 | has "state ACTIVE" || fail "rxe0 not ACTIVE"
	ibv_devices | has rxe0 || fail "ibv_devices does not list rxe0"
}

t_module_loads() {
	[ -f "$KO" ] || fail "$KO not built"
	local info
	info=$(modinfo "$KO")
	echo "$info"
	echo "$info" | has '^parm: *xprt_name:.*portlist' || fail "modinfo does not document xprt_name"
	echo "$info" | has '^license: *GPL' || fail "no GPL license in modinfo"
	load_deps
	insmod "$KO" xprt_name=$NAME || fail "insmod failed"
	[ -d /sys/module/svcrdma_rs ] || fail "/sys/module/svcrdma_rs missing"
	[ "$(cat /sys/module/svcrdma_rs/parameters/xprt_name)" = $NAME ] || fail "xprt_name not shown in sysfs"
}

t_listener() {
	nfsd_prepare
	nfsd_listen $NAME $PORT || fail "echo $NAME $PORT > portlist failed"
	nfsd_listen tcp 2049
	nfsd_start 2
	cat /proc/fs/nfsd/portlist
	grep -qx "$NAME $PORT" /proc/fs/nfsd/portlist || fail "portlist does not list '$NAME $PORT'"
	local cm
	cm=$(rdma resource show cm_id)
	echo "$cm"
	echo "$cm" | grep 'state LISTEN' | grep 'comm \[svcrdma_rs\]' | has "src-addr 0.0.0.0:$PORT" ||
		fail "no IPv4 svcrdma_rs listener on $PORT in 'rdma resource show cm_id'"
	echo "$cm" | grep 'state LISTEN' | grep 'comm \[svcrdma_rs\]' | has -E "src-addr (\[::\]|::):$PORT" ||
		fail "no IPv6 svcrdma_rs listener on $PORT in 'rdma resource show cm_id'"
}

t_rmmod_refused_while_listening() {
	if rmmod svcrdma_rs 2>/tmp/rmmod.err; then
		fail "rmmod succeeded while nfsd holds a listener"
	fi
	cat /tmp/rmmod.err
	grep -qi 'in use' /tmp/rmmod.err || fail "rmmod failed, but not because the module is in use"
	[ -d /sys/module/svcrdma_rs ] || fail "module gone"
	grep -qx "$NAME $PORT" /proc/fs/nfsd/portlist || fail "listener gone after the refused rmmod"
}

t_stop_and_rmmod_clean() {
	dmesg_mark
	nfsd_stop
	wait_for 20 sh -c "! rdma resource show cm_id | grep -q 'comm \[svcrdma_rs\]'" ||
		fail "svcrdma_rs CM ids remain after nfsd stopped"
	wait_for 20 rmmod svcrdma_rs || fail "rmmod failed after nfsd stopped"
	[ ! -d /sys/module/svcrdma_rs ] || fail "module still loaded"
	dmesg_clean_since_mark
}

t_bad_name_refused() {
	dmesg_mark
	# The kernel's parameter parser takes double quotes around a value.
	if insmod "$KO" 'xprt_name="bad name"' 2>/dev/null; then
		rmmod svcrdma_rs
		fail "a name with a space was accepted"
	fi
	dmesg_since_mark | has 'xprt_name="bad name" refused' || fail "no clear line for a bad xprt_name"
	if insmod "$KO" xprt_name=abcdefghijklmnop 2>/dev/null; then
		rmmod svcrdma_rs
		fail "a 16-byte name was accepted"
	fi
}

t_name_taken() {
	modprobe rpcrdma || fail "modprobe rpcrdma failed"
	dmesg_mark
	if insmod "$KO" 2>/tmp/insmod.err; then
		rmmod svcrdma_rs
		fail "loaded under 'rdma' although rpcrdma.ko registered it"
	fi
	cat /tmp/insmod.err
	local line
	line=$(dmesg_since_mark | grep 'svcrdma_rs:')
	echo "$line"
	[ "$(echo "$line" | grep -c .)" = 1 ] || fail "expected exactly one log line, got: $line"
	echo "$line" | has 'transport name "rdma" is already registered' || fail "the line does not say the name is taken"
	echo "$line" | has 'xprt_name=' || fail "the line does not say how to choose another name"
	echo "$line" | has 'rmmod rpcrdma' || fail "the line does not say how to take the name from rpcrdma"
	# Loading twice: the second load is refused, the first keeps working.
	insmod "$KO" xprt_name=$NAME || fail "insmod under $NAME failed"
	if insmod "$KO" xprt_name=other 2>/dev/null; then
		fail "a second instance loaded"
	fi
	[ "$(cat /sys/module/svcrdma_rs/parameters/xprt_name)" = $NAME ] || fail "first instance disturbed"
	rmmod svcrdma_rs || fail "rmmod failed"
}

t_c_svcrdma_reference_mount() {
	# rpcrdma.ko (loaded above) is both the client and the C server.
	nfsd_prepare
	nfsd_listen rdma $PORT || fail "C svcrdma listener failed"
	nfsd_listen tcp 2049
	nfsd_start 4
	local src=/tmp/ref.bin mnt=/mnt/ref vers a b c
	dd if=/dev/urandom of=$src bs=1M count=4 status=none
	a=$(sha256sum <$src)
	for vers in 3 4.2; do
		nfs_mount "vers=$vers,proto=rdma,port=$PORT" $mnt || fail "v$vers: mount -o rdma,port=$PORT failed"
		grep " $mnt " /proc/mounts | has 'proto=rdma' || fail "v$vers: mount is not proto=rdma"
		dd if=$src of=$mnt/ref-$vers.bin bs=1M oflag=direct status=none || fail "v$vers: write failed"
		# Direct I/O: the read goes to the server, not the client's cache.
		b=$(dd if=$mnt/ref-$vers.bin bs=1M iflag=direct status=none | sha256sum)
		umount $mnt
		c=$(sha256sum <"$NFS_EXPORT/ref-$vers.bin")
		[ "$a" = "$c" ] || fail "v$vers: the file on the server differs from what was written"
		[ "$a" = "$b" ] || fail "v$vers: data read back differs"
		echo "v$vers: 4 MiB written (checked on the server) and read back identical over RDMA"
	done
	nfsd_stop
}

t_plan 8
t_run rxe_up t_rxe_up
t_run module_loads t_module_loads
t_run listener t_listener
t_run rmmod_refused_while_listening t_rmmod_refused_while_listening
t_run stop_and_rmmod_clean t_stop_and_rmmod_clean
t_run bad_name_refused t_bad_name_refused
t_run name_taken t_name_taken
t_full c_svcrdma_reference_mount t_c_svcrdma_reference_mount
t_summary
