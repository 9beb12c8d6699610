/*
 * rootfence-envfilter MODE[,MODE...] -- COMMAND [ARGS...]
 *
 * Runs COMMAND under a seccomp filter that reproduces the rules of an
 * environment MCP hosts run in, so that rootfence's tests can run `exec`
 * and `run` there without the environment itself:
 *
 *   docker      Docker's default seccomp profile (also Flatpak and
 *               Chromium-derived sandboxes): clone3 answers ENOSYS (libc
 *               falls back to clone), new namespaces are refused (clone and
 *               unshare with CLONE_NEW* flags, setns: EPERM), and so are
 *               mounts (EPERM, as without CAP_SYS_ADMIN).
 *   apparmor    Ubuntu 24.04's kernel.apparmor_restrict_unprivileged_userns:
 *               a user namespace can be made, but it holds no capability:
 *               every mount operation is denied (EACCES, as AppArmor's
 *               unprivileged_userns profile denies them).
 *   no-landlock A kernel without Landlock: the landlock_* calls answer
 *               ENOSYS.
 *   no-userns   user.max_user_namespaces = 0: a new user namespace is
 *               refused (ENOSPC), other namespaces are not (clone3, whose
 *               flags a filter cannot read, answers ENOSYS).
 *   no-netns    a kernel or sandbox that refuses network namespaces
 *               (net.* namespaces disabled, a profile that lists
 *               CLONE_NEWNET) while it grants the others: clone and
 *               unshare with CLONE_NEWNET answer EPERM (clone3 ENOSYS).
 *
 * The filter is inherited by everything COMMAND starts, and stacks under
 * any filter those install. Sets no_new_privs (needed to install a filter
 * without CAP_SYS_ADMIN).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "unsupported architecture"
#endif

/* Calls older headers may not name. */
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#define __NR_move_mount 429
#define __NR_fsopen 430
#define __NR_fsconfig 431
#define __NR_fsmount 432
#define __NR_fspick 433
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

/* CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET,
 * the mask Docker's profile checks clone's flags against. */
#define NEW_NAMESPACES 0x7E020000u
#define CLONE_NEWTIME_FLAG 0x00000080u
#define CLONE_NEWUSER_FLAG 0x10000000u
#define CLONE_NEWNET_FLAG 0x40000000u

#define MAX_INSNS 256
static struct sock_filter prog[MAX_INSNS];
static unsigned short len;

static void emit(struct sock_filter f)
{
	if (len == MAX_INSNS) {
		fprintf(stderr, "rootfence-envfilter: filter too long\n");
		exit(125);
	}
	prog[len++] = f;
}

#define LOAD_NR() emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)))
#define RET(v) emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, (v)))

/* nr -> errno. */
static void refuse(int nr, int err)
{
	LOAD_NR();
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
	RET(SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA));
}

/* nr with any of `flags` in its first argument -> errno. */
static void refuse_flags(int nr, unsigned flags, int err)
{
	LOAD_NR();
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 3));
	emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])));
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, flags, 0, 1));
	RET(SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA));
}

static const int mounts[] = {
	__NR_mount, __NR_umount2, __NR_pivot_root, __NR_open_tree, __NR_move_mount,
	__NR_fsopen, __NR_fsconfig, __NR_fsmount, __NR_fspick, __NR_mount_setattr,
};

static void mode(const char *m)
{
	size_t i;
	if (strcmp(m, "docker") == 0) {
		refuse(__NR_clone3, ENOSYS);
		refuse_flags(__NR_clone, NEW_NAMESPACES, EPERM);
		refuse_flags(__NR_unshare, NEW_NAMESPACES | CLONE_NEWTIME_FLAG, EPERM);
		refuse(__NR_setns, EPERM);
		for (i = 0; i < sizeof mounts / sizeof mounts[0]; i++)
			refuse(mounts[i], EPERM);
	} else if (strcmp(m, "apparmor") == 0) {
		for (i = 0; i < sizeof mounts / sizeof mounts[0]; i++)
			refuse(mounts[i], EACCES);
	} else if (strcmp(m, "no-userns") == 0) {
		refuse(__NR_clone3, ENOSYS);
		refuse_flags(__NR_clone, CLONE_NEWUSER_FLAG, ENOSPC);
		refuse_flags(__NR_unshare, CLONE_NEWUSER_FLAG, ENOSPC);
	} else if (strcmp(m, "no-netns") == 0) {
		refuse(__NR_clone3, ENOSYS);
		refuse_flags(__NR_clone, CLONE_NEWNET_FLAG, EPERM);
		refuse_flags(__NR_unshare, CLONE_NEWNET_FLAG, EPERM);
	} else if (strcmp(m, "no-landlock") == 0) {
		refuse(__NR_landlock_create_ruleset, ENOSYS);
		refuse(__NR_landlock_add_rule, ENOSYS);
		refuse(__NR_landlock_restrict_self, ENOSYS);
	} else {
		fprintf(stderr, "rootfence-envfilter: unknown mode %s (docker, apparmor, no-landlock, no-userns, no-netns)\n", m);
		exit(125);
	}
}

int main(int argc, char **argv)
{
	if (argc < 4 || strcmp(argv[2], "--") != 0) {
		fprintf(stderr, "usage: rootfence-envfilter MODE[,MODE...] -- COMMAND [ARGS...]\n");
		return 125;
	}
	/* Another architecture's calls: refused whole. */
	emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0));
	RET(SECCOMP_RET_KILL_PROCESS);
	char *modes = strdup(argv[1]);
	for (char *m = strtok(modes, ","); m; m = strtok(NULL, ","))
		mode(m);
	RET(SECCOMP_RET_ALLOW);
	struct sock_fprog fprog = { .len = len, .filter = prog };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		perror("rootfence-envfilter: no_new_privs");
		return 125;
	}
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
		perror("rootfence-envfilter: seccomp");
		return 125;
	}
	execvp(argv[3], argv + 3);
	fprintf(stderr, "rootfence-envfilter: cannot run %s: %s\n", argv[3], strerror(errno));
	return 127;
}
