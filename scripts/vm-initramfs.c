// SPDX-License-Identifier: GPL-2.0
/*
 * /init of the initramfs scripts/vm-run boots a stock distribution kernel
 * with (--initrd): such a kernel has 9p, virtio-net and overlayfs as
 * modules, so it cannot mount the host's root before they are loaded.
 *
 * Loads every module listed in /modules/order (uncompressed .ko files, in
 * dependency order), mounts the host's root (9p tag /dev/root, read-only,
 * the options vm-run gives a test kernel), moves it over / and execs the
 * program named by svcrdma_setup= (scripts/vm-setup.c, vm-run's usual PID 1)
 * with the same environment: from there the guest is set up as on the test
 * kernel. Failures are reported on the console; a failed root mount powers
 * the guest off.
 *
 * Built static by scripts/distro-kernel vm-tree:
 * gcc -static -O2 -o init vm-initramfs.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static void say(const char *what, const char *arg, int err)
{
	dprintf(2, "vm-initramfs: %s %s%s%s\n", what, arg ? arg : "", err ? ": " : "",
		err ? strerror(err) : "");
}

static void halt(void)
{
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static void load_modules(void)
{
	FILE *f = fopen("/modules/order", "r");
	char line[512];

	if (!f) {
		say("no", "/modules/order", errno);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		int fd;

		line[strcspn(line, "\n")] = 0;
		if (!line[0])
			continue;
		fd = open(line, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			say("open", line, errno);
			continue;
		}
		if (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST)
			say("finit_module", line, errno);
		close(fd);
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	const char *setup = getenv("svcrdma_setup");
	const char *opts = "trans=virtio,version=9p2000.L,msize=512000,cache=loose";

	(void)argc;
	load_modules();
	mkdir("/newroot", 0755);
	if (mount("/dev/root", "/newroot", "9p", MS_RDONLY, opts)) {
		say("mount 9p root /dev/root on", "/newroot", errno);
		halt();
	}
	if (chdir("/newroot") || mount(".", "/", NULL, MS_MOVE, NULL) || chroot(".") || chdir("/")) {
		say("switching root to", "/newroot", errno);
		halt();
	}
	if (!setup) {
		say("svcrdma_setup= is not on the kernel command line", NULL, 0);
		halt();
	}
	argv[0] = (char *)setup;
	execve(setup, argv, environ);
	say("exec", setup, errno);
	halt();
	return 1;
}
