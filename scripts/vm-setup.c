// SPDX-License-Identifier: GPL-2.0
/*
 * PID 1 of a svcrdma_rs test guest, first stage (booted by scripts/vm-run).
 *
 * Sets the guest up with system calls only, then execs bash on
 * scripts/vm-init, which runs the command. Under TCG with the debug kernel
 * every fork+exec of a dynamic program costs about a second; the ~40 of them
 * a shell needs for this setup cost 45 s per guest, this program ~0.1 s.
 *
 * What it sets up: /proc, /sys, /dev (with /dev/fd, /dev/std*), devpts,
 * /dev/shm, /run, debugfs, configfs; writable private copies (overlayfs on
 * the tmpfs /run) of the directories programs write to; the run directory
 * (9p, writable); /lib/modules/$(uname -r) pointing at the test kernel's
 * modules; the host name; lo and the first NIC (10.0.2.15/24, default route
 * via 10.0.2.2, QEMU's user network); kmemleak's automatic scan off (vm-init
 * scans when it wants); stdout/stderr on the virtio port named svcrdma.out
 * (or on ttyS0 with svcrdma_debug=1).
 *
 * Environment (from the kernel command line): svcrdma_run, svcrdma_kdir,
 * svcrdma_scripts, svcrdma_debug. A failed step is reported on the console
 * and the setup goes on: vm-init then fails visibly where it matters.
 *
 * Built static by scripts/vm-run: gcc -static -O2 -o ... vm-setup.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

static int failures;

static void warn(const char *what, const char *arg)
{
	dprintf(2, "vm-setup: %s %s: %s\n", what, arg ? arg : "", strerror(errno));
	failures++;
}

static void do_mount(const char *src, const char *dst, const char *type,
		     unsigned long flags, const char *opts, int quiet)
{
	if (mount(src, dst, type, flags, opts) && !quiet)
		warn("mount", dst);
}

static void mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		warn("mkdir", path);
		return;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) && errno != EEXIST) {
			warn("mkdir", buf);
			return;
		}
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		warn("mkdir", buf);
}

static void link_if_absent(const char *target, const char *path)
{
	if (access(path, F_OK) && symlink(target, path))
		warn("symlink", path);
}

static int is_dir(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* A private, writable copy of DIR: overlayfs with its upper layer on /run. */
static void overlay(const char *dir)
{
	char upper[256], work[256], opts[1024], name[64];
	size_t i;

	if (!is_dir(dir))
		return;
	for (i = 0; dir[i] && i < sizeof(name) - 1; i++)
		name[i] = dir[i] == '/' ? '_' : dir[i];
	name[i] = 0;
	snprintf(upper, sizeof(upper), "/run/ovl/%s/upper", name);
	snprintf(work, sizeof(work), "/run/ovl/%s/work", name);
	mkdir_p(upper, 0755);
	mkdir_p(work, 0755);
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", dir,
		 upper, work);
	do_mount("overlay", dir, "overlay", 0, opts, 0);
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		warn("write", path);
	if (fd >= 0)
		close(fd);
}

/* The first line of a small file (sysfs) in BUF, without its newline. */
static int read_line(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int if_flags_up(int s, const char *ifname)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(s, SIOCGIFFLAGS, &ifr))
		return -1;
	ifr.ifr_flags |= IFF_UP;
	return ioctl(s, SIOCSIFFLAGS, &ifr);
}

static void set_sin(struct sockaddr *sa, const char *addr)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)sa;

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, addr, &sin->sin_addr);
}

/*
 * The real NIC (one with a device: not lo or a virtual one) with the lowest
 * index. tests/vm/lib.sh's guest_nic finds the same one.
 */
static int first_nic(char *out, size_t len)
{
	DIR *d = opendir("/sys/class/net");
	struct dirent *e;
	long best = -1;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[512], buf[32];
		long idx;

		if (e->d_name[0] == '.' || strlen(e->d_name) >= len)
			continue;
		snprintf(path, sizeof(path), "/sys/class/net/%s/device", e->d_name);
		if (access(path, F_OK))
			continue;
		snprintf(path, sizeof(path), "/sys/class/net/%s/ifindex", e->d_name);
		if (read_line(path, buf, sizeof(buf)))
			continue;
		idx = strtol(buf, NULL, 10);
		if (best < 0 || idx < best) {
			best = idx;
			memcpy(out, e->d_name, strlen(e->d_name) + 1);
		}
	}
	closedir(d);
	return best < 0 ? -1 : 0;
}

static void network(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	char nic[IFNAMSIZ];
	struct ifreq ifr;
	struct rtentry rt;

	if (s < 0) {
		warn("socket", NULL);
		return;
	}
	if (if_flags_up(s, "lo"))
		warn("link up", "lo");
	if (first_nic(nic, sizeof(nic))) {
		close(s);
		return;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", nic);
	set_sin(&ifr.ifr_addr, "10.0.2.15");
	if (ioctl(s, SIOCSIFADDR, &ifr))
		warn("address", nic);
	set_sin(&ifr.ifr_netmask, "255.255.255.0");
	if (ioctl(s, SIOCSIFNETMASK, &ifr))
		warn("netmask", nic);
	if (if_flags_up(s, nic))
		warn("link up", nic);
	memset(&rt, 0, sizeof(rt));
	set_sin(&rt.rt_dst, "0.0.0.0");
	set_sin(&rt.rt_genmask, "0.0.0.0");
	set_sin(&rt.rt_gateway, "10.0.2.2");
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	rt.rt_dev = nic;
	if (ioctl(s, SIOCADDRT, &rt))
		warn("default route via", "10.0.2.2");
	close(s);
}

/* stdout and stderr on the virtio port named svcrdma.out (vm-run's stdout). */
static void output(int debug)
{
	const char *dev = "/dev/null";
	char path[512], name[64], port[300];
	DIR *d;
	struct dirent *e;
	int fd;

	d = debug ? NULL : opendir("/sys/class/virtio-ports");
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
		if (read_line(path, name, sizeof(name)))
			continue;
		if (!strcmp(name, "svcrdma.out")) {
			snprintf(port, sizeof(port), "/dev/%s", e->d_name);
			dev = port;
			break;
		}
	}
	if (d)
		closedir(d);
	if (debug)
		dev = "/dev/ttyS0";
	fd = open(dev, O_WRONLY | O_NOCTTY);
	if (fd < 0) {
		warn("open", dev);
		return;
	}
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

int main(void)
{
	static const char *const writable[] = { "/etc", "/var", "/srv", "/home", "/root",
						"/opt", "/mnt", "/usr", "/tmp" };
	const char *run = getenv("svcrdma_run");
	const char *kdir = getenv("svcrdma_kdir");
	const char *scripts = getenv("svcrdma_scripts");
	int debug = getenv("svcrdma_debug") != NULL;
	char path[4096], target[4096], init2[4096];
	struct utsname u;

	/* The kernel gave us the console on 0, 1 and 2. */
	do_mount("proc", "/proc", "proc", 0, NULL, 0);
	do_mount("sysfs", "/sys", "sysfs", 0, NULL, 0);
	do_mount("devtmpfs", "/dev", "devtmpfs", 0, NULL, 1);
	mkdir_p("/dev/pts", 0755);
	mkdir_p("/dev/shm", 01777);
	/* What udev would create: process substitution needs /dev/fd. */
	link_if_absent("/proc/self/fd", "/dev/fd");
	link_if_absent("/proc/self/fd/0", "/dev/stdin");
	link_if_absent("/proc/self/fd/1", "/dev/stdout");
	link_if_absent("/proc/self/fd/2", "/dev/stderr");
	do_mount("devpts", "/dev/pts", "devpts", 0, NULL, 0);
	do_mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777", 0);
	do_mount("tmpfs", "/run", "tmpfs", 0, "mode=0755", 0);
	do_mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL, 0);
	do_mount("configfs", "/sys/kernel/config", "configfs", 0, NULL, 1);
	/*
	 * kmemleak's own thread would start a scan a minute after boot, in the
	 * middle of the command; vm-init scans after the command.
	 */
	if (!access("/sys/kernel/debug/kmemleak", W_OK))
		write_file("/sys/kernel/debug/kmemleak", "scan=off");

	/* overlayfs, not tmpfs: the repository may live under any of them. */
	for (size_t i = 0; i < sizeof(writable) / sizeof(writable[0]); i++)
		overlay(writable[i]);
	/* The run directory, after the overlays (which would hide it). */
	if (run)
		do_mount("svcrdma_run", run, "9p", 0,
			 "trans=virtio,version=9p2000.L,msize=512000", 0);
	else
		dprintf(2, "vm-setup: svcrdma_run is not set\n");
	/* The test kernel's own modules, for modprobe. */
	if (kdir && !uname(&u)) {
		mkdir_p("/lib/modules", 0755);
		snprintf(target, sizeof(target), "%s/modules-install/lib/modules/%s",
			 kdir, u.release);
		snprintf(path, sizeof(path), "/lib/modules/%s", u.release);
		link_if_absent(target, path);
	}
	if (sethostname("svcrdma-guest", strlen("svcrdma-guest")))
		warn("sethostname", NULL);
	network();
	if (failures)
		dprintf(2, "vm-setup: %d step(s) failed\n", failures);

	output(debug);
	snprintf(init2, sizeof(init2), "%s/vm-init", scripts ? scripts : "/");
	execl("/bin/bash", "bash", init2, (char *)NULL);
	warn("exec /bin/bash", init2);
	sync();
	reboot(RB_AUTOBOOT);
	return 1;
}
