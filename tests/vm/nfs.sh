# nfsd and NFS client helpers for guest tests (sourced).
# shellcheck shell=bash

NFS_EXPORT=/srv/export

# nfsd_prepare: modules, nfsd fs, rpcbind, the export, mountd, short grace.
nfsd_prepare() {
	modprobe nfsd
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
	mkdir -p /run/rpcbind "$NFS_EXPORT"
	pgrep -x rpcbind >/dev/null || rpcbind -w
	echo "$NFS_EXPORT *(rw,no_root_squash,insecure,no_subtree_check)" >/etc/exports
	exportfs -ra
	pgrep -x rpc.mountd >/dev/null || rpc.mountd
	# Only settable while no nfsd thread runs.
	echo 10 >/proc/fs/nfsd/nfsv4leasetime 2>/dev/null || true
	echo 10 >/proc/fs/nfsd/nfsv4gracetime 2>/dev/null || true
}

# nfsd_listen NAME PORT: asks nfsd for a listener of transport class NAME.
nfsd_listen() { echo "$1 $2" >/proc/fs/nfsd/portlist; }

# nfsd_start [THREADS]: starts nfsd threads (listeners must exist first)
# and ends the NFSv4 grace period so tests need not wait for it.
nfsd_start() {
	echo "${1:-4}" >/proc/fs/nfsd/threads
	echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null || true
}

# nfsd_stop: stops the threads, which closes every listener and connection.
nfsd_stop() {
	[ -w /proc/fs/nfsd/threads ] && echo 0 >/proc/fs/nfsd/threads
	return 0
}

# nfs_mount OPTS MOUNTPOINT: mounts the export from this guest's address.
nfs_mount() {
	mkdir -p "$2"
	timeout 120 mount -t nfs -o "$1" "$(guest_ip):$NFS_EXPORT" "$2"
}
