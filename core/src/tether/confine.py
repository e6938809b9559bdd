"""Runs as the first process of the Landlock envelope (stdlib only): confines itself, then execs ARGV.

    confine.py SPEC_JSON -- ARGV...   arm the policy in SPEC_JSON, then exec ARGV under it
    confine.py --probe                arm a small policy in this process; print the Landlock ABI used

The order: die with the parent; when running as root, lock the securebits and drop every capability;
no_new_privs; the Landlock ruleset (filesystem, TCP ports, scopes); the seccomp filter (built with
libseccomp: UDP and raw IP sockets when the network is off, new user namespaces, mounts); then exec.

Landlock (the kernel's own three syscalls, called here through ctypes) has no deny rule, and a right
granted on a folder covers everything below it: a denied path is enforced by granting each sibling
on its way down from the granted folder instead of the folder itself, the folders on that way keep
only the right to list them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import signal
import socket
import sys

# syscall numbers are the same on every architecture for these (they came after the unified table)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a rule on a non-folder may hold
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
)

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 1, 38, 24
PR_SET_SECUREBITS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 28, 47, 4
SECUREBITS_LOCKED_NOROOT = 0xEF  # noroot, no setuid fixup, no ambient raise: each with its lock
LINUX_CAPABILITY_VERSION_3 = 0x20080522

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ, SCMP_CMP_GE, SCMP_CMP_MASKED_EQ = 4, 5, 7
CLONE_NEWUSER = 0x10000000
SOCK_TYPE_MASK = 0xF
NOT_STREAM = (
    socket.SOCK_DGRAM,
    socket.SOCK_RAW,
    socket.SOCK_RDM,
    socket.SOCK_SEQPACKET,
    6,
    10,
)  # 6 DCCP, 10 PACKET
MOUNTS = (
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "setns",
)

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class RulesetAttr(ctypes.Structure):
    _fields_ = (("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64))


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32))


class NetPort(ctypes.Structure):
    _fields_ = (("allowed", ctypes.c_uint64), ("port", ctypes.c_uint64))


class ArgCmp(ctypes.Structure):
    _fields_ = (("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64))


class CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


class Unconfinable(Exception):
    """The policy cannot be armed here; the message says what is missing."""


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise Unconfinable(f"{what}: {os.strerror(code)} (errno {errno.errorcode.get(code, code)})")
    return result


def abi() -> int:
    """The Landlock ABI of this kernel; 0 when it has none (or the LSM is not enabled)."""
    got = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(got), 0)


def fs_rights(version: int) -> int:
    rights = (1 << 13) - 1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def grants(top: str, access: int, denied: list[str]) -> list[tuple[str, int]]:
    """(path, rights) that give ``access`` beneath ``top`` except beneath each denied path."""
    inside = [d for d in denied if _under(d, top)]
    if not inside:
        return [(top, access)]
    if top in inside:
        return []
    out = [(top, access & READ_DIR)]  # the way down may be listed, nothing more
    try:
        entries = list(os.scandir(top))
    except OSError:
        return out
    for entry in entries:
        if entry.is_symlink():
            continue  # a link is followed to its target, which has rules of its own (or none)
        out += grants(entry.path, access, denied)
    return out


def _add_path(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone since (or never there): nothing to grant
    try:
        if not os.path.isdir(path):
            access &= FILE_RIGHTS
        if not access:
            return
        rule = PathBeneath(access, fd)
        _check(
            libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)


def landlock(spec: dict, version: int) -> None:
    rights = fs_rights(version)
    attr = RulesetAttr(rights, 0, 0)
    if not spec["network"]:
        attr.net = NET_BIND_TCP | NET_CONNECT_TCP
    if version >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    size = ctypes.sizeof(RulesetAttr) if version >= 6 else (16 if version >= 4 else 8)
    ruleset = _check(
        libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    try:
        denied = [os.path.realpath(p) for p in spec["deny"] if os.path.lexists(p)]
        rules = grants("/", READ, denied)
        for top in spec["write"]:
            rules += grants(os.path.realpath(top), rights, denied)
        rules += [(d, READ | WRITE_FILE | (rights & (TRUNCATE | IOCTL_DEV))) for d in DEVICES]
        for path, access in rules:
            _add_path(ruleset, path, access)
        if not spec["network"]:
            for port in spec["ports"]:
                rule = NetPort(NET_BIND_TCP | NET_CONNECT_TCP, port)
                _check(
                    libc.syscall(
                        SYS_ADD_RULE, ruleset, RULE_NET_PORT, ctypes.byref(rule), ctypes.c_uint32(0)
                    ),
                    f"landlock_add_rule(port {port})",
                )
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def drop_capabilities() -> None:
    """As root: lock root out of regaining capabilities at exec, then empty every capability set."""
    _check(libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_NOROOT, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {cap})")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset")


def seccomp(network: bool) -> None:
    """libseccomp's filter: refuse what Landlock does not govern (see the module docstring)."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        name = ctypes.util.find_library(
            "seccomp"
        )  # slow (it runs ldconfig): only where the soname is not found
        try:
            lib = ctypes.CDLL(name or "libseccomp.so.2", use_errno=True)
        except OSError as exc:
            raise Unconfinable(f"libseccomp is not installed ({exc})") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ArgCmp),
    )
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_load.argtypes = lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise Unconfinable("seccomp_init failed")

    def refuse(syscall: str, code: int, *cmps: tuple[int, int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(syscall.encode())
        if nr < 0:
            return  # not a syscall on this architecture
        array = (ArgCmp * max(len(cmps), 1))(*(ArgCmp(*c) for c in cmps))
        got = lib.seccomp_rule_add_array(ctx, 0x00050000 | code, nr, len(cmps), array)
        if got < 0:
            raise Unconfinable(f"seccomp_rule_add({syscall}): {os.strerror(-got)}")

    try:
        if not network:
            for family in (socket.AF_INET, socket.AF_INET6):
                fam = (0, SCMP_CMP_EQ, family, 0)
                for kind in NOT_STREAM:
                    refuse("socket", errno.EACCES, fam, (1, SCMP_CMP_MASKED_EQ, SOCK_TYPE_MASK, kind))
                stream = (1, SCMP_CMP_MASKED_EQ, SOCK_TYPE_MASK, socket.SOCK_STREAM)
                # TCP only (Landlock governs TCP): no SCTP, MPTCP or any other stream protocol
                refuse("socket", errno.EACCES, fam, stream, (2, SCMP_CMP_GE, 7, 0))
                for proto in range(1, 6):
                    refuse("socket", errno.EACCES, fam, stream, (2, SCMP_CMP_EQ, proto, 0))
            refuse("socket", errno.EACCES, (0, SCMP_CMP_EQ, socket.AF_PACKET, 0))
        newuser = (0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
        refuse("unshare", errno.EPERM, newuser)
        refuse("clone", errno.EPERM, newuser)
        refuse("clone3", errno.ENOSYS)  # its flags are behind a pointer: callers fall back to clone
        for syscall in MOUNTS:
            refuse(syscall, errno.EPERM)
        got = lib.seccomp_load(ctx)
        if got < 0:
            raise Unconfinable(f"seccomp_load: {os.strerror(-got)}")
    finally:
        lib.seccomp_release(ctx)


def arm(spec: dict) -> int:
    version = abi()
    if version < 3:
        raise Unconfinable(
            f"the kernel's Landlock ABI is {version or 'absent'}, and the sandbox needs 3 or later "
            "(Linux 6.2+, with landlock in the lsm= boot list)"
        )
    if not spec["network"] and version < 4:
        raise Unconfinable(f"the kernel's Landlock ABI is {version}: TCP rules need 4 or later (Linux 6.7+)")
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.geteuid() == 0:
        drop_capabilities()
    landlock(spec, version)
    seccomp(spec["network"])
    return version


def main(args: list[str]) -> int:
    if args == ["--probe"]:
        try:
            version = arm({"network": False, "deny": [], "write": [], "ports": []})
        except Unconfinable as exc:
            print(exc, file=sys.stderr)
            return 1
        print(version)
        return 0
    split = args.index("--")
    spec, argv = json.loads(args[0]), args[split + 1 :]
    try:
        arm(spec)
    except Unconfinable as exc:
        print(f"tether sandbox: {exc}; nothing was run", file=sys.stderr)
        return 126
    env = {k: v for k, v in os.environ.items() if k not in spec["unset"]}
    env.update(spec["setenv"])
    os.chdir(spec["chdir"])
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        print(f"tether sandbox: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
