# nfsd and NFS client helpers for guest tests (sourced).
# shellcheck shell=bash

NFS_EXPORT=/srv/export

# nfsd_prepare: modules, nfsd fs, rpcbind, the export, mountd, short grace.
nfsd_prepare() {
	modprobe nfsd
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
	mkdir -p /run/rpcbind "$NFS_EXPORT"
	# overlayfs cannot be exported: the export is a tmpfs of its own.
	mountpoint -q "$NFS_EXPORT" || mount -t tmpfs -o size=1G tmpfs "$NFS_EXPORT"
	pgrep -x rpcbind >/dev/null || rpcbind -w
	# fsid=0: the export is NFSv4's pseudo-root, so v4 mounts "server:/"
	# without walking the guest's 9p and overlay directories above it.
	echo "$NFS_EXPORT *(rw,no_root_squash,insecure,no_subtree_check,fsid=0)" >/etc/exports
	exportfs -ra
	pgrep -x rpc.mountd >/dev/null || rpc.mountd
	# Only settable while no nfsd thread runs. 1 MiB I/O (the default
	# depends on the guest's memory).
	echo 1048576 >/proc/fs/nfsd/max_block_size 2>/dev/null || true
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

# nfs_mount OPTS MOUNTPOINT: mounts the export from this guest's address
# (OPTS must name vers=).
nfs_mount() {
	local path=/
	case ",$1," in *,vers=3,*) path=$NFS_EXPORT ;; esac
	mkdir -p "$2"
	timeout 120 mount -t nfs -o "$1" "$(guest_ip):$path" "$2"
}
