"""Landlock + seccomp for one kernel process: restrict this process, then exec the kernel.

The sandbox's second tier (`sandbox.py`), for machines where bubblewrap cannot create namespaces.
Run as a script before the kernel's own argv, with the standard library only (`python -I -S
landlock.py --write PATH ... [--network] [--setenv K=V ...] -- kernel argv...`), so it starts fast
and works whatever interpreter runs the kernel.

* **Landlock** (Linux >= 6.2, ABI >= 3, so truncation is controlled too): every write right is
  handled, and granted only beneath the `--write` paths (a directory: its whole subtree; a file:
  writing and truncating it). Reads are not handled: the rest of the system stays readable. With
  ABI >= 4 TCP bind/connect are handled (no rule: denied) unless `--network`; with ABI >= 6 the
  process cannot signal processes outside its domain nor (without `--network`) connect to abstract
  Unix sockets.
* **seccomp** (without `--network`): `socket()` for AF_INET, AF_INET6 and AF_PACKET fails with
  EACCES (Landlock has no UDP rule), `io_uring_setup` with ENOSYS (io_uring can open sockets without
  the `socket` syscall), and a syscall of another ABI (x32, i386) with ENOSYS.

Both stay on the process across `execve` and are inherited by its children; `no_new_privs` is set.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

# Landlock syscalls have the same numbers on every architecture (the generic table).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_IO_URING_SETUP = 425
_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # AUDIT_ARCH_*, __NR_socket
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
DIR_RIGHTS = WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE | _REFER | TRUNCATE
FILE_RIGHTS = WRITE_FILE | TRUNCATE
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2
MIN_ABI = 3

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EACCES, _ENOSYS = 13, 38
_AF_INET, _AF_INET6, _AF_PACKET = 2, 10, 17


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> tuple[int, str]:
    """This kernel's Landlock ABI (0 when unavailable) and why it cannot be used, if so."""
    if sys.platform != "linux":
        return 0, "Landlock is Linux only"
    if platform.machine() not in _ARCH:
        return 0, f"the seccomp filter is not written for {platform.machine()}"
    libc = _libc()
    abi = int(libc.syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION))
    if abi < 0:
        errno = ctypes.get_errno()
        return (
            0,
            f"Landlock is not enabled in this kernel ({os.strerror(errno)}; needs Linux >= 6.2 with lsm=landlock)",
        )
    if abi < MIN_ABI:
        return abi, f"Landlock ABI {abi} < {MIN_ABI} cannot control truncation (needs Linux >= 6.2)"
    return abi, ""


def _check(result: int, what: str) -> None:
    if result < 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def restrict_filesystem(writable: list[tuple[str, int]], *, network: bool, abi: int) -> None:
    """Apply a Landlock domain to this process: writes only beneath `writable` (path, rights)."""
    libc = _libc()
    attr = struct.pack("Q", DIR_RIGHTS)
    if abi >= 4:
        attr += struct.pack("Q", 0 if network else _NET_BIND_TCP | _NET_CONNECT_TCP)
    if abi >= 6:
        attr += struct.pack("Q", _SCOPE_SIGNAL | (0 if network else _SCOPE_ABSTRACT_UNIX))
    ruleset = int(libc.syscall(_CREATE_RULESET, attr, len(attr), 0))
    _check(ruleset, "landlock_create_ruleset")
    try:
        for path, rights in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # removed since the host listed it (an editor's temp file): nothing to grant
            try:
                rule = struct.pack("=Qi", rights, fd)  # struct landlock_path_beneath_attr (packed)
                _check(int(libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0)), f"rule for {path}")
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(int(libc.syscall(_RESTRICT_SELF, ruleset, 0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


class _Filter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    )


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter)))


def _no_network_filter() -> list[tuple[int, int, int, int]]:
    arch, socket_nr = _ARCH[platform.machine()]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    allow, eacces, enosys = 10, 11, 12  # indexes of the three returns below
    program = [
        (ld, 0, 0, 4),  # 0: seccomp_data.arch
        (jeq, 0, enosys - 2, arch),  # 1: another ABI (i386 via int 0x80) -> ENOSYS
        (ld, 0, 0, 0),  # 2: seccomp_data.nr
        (jge, enosys - 4, 0, 0x40000000),  # 3: x32 syscalls -> ENOSYS
        (jeq, enosys - 5, 0, _IO_URING_SETUP),  # 4
        (jeq, 0, allow - 6, socket_nr),  # 5: not socket() -> allow
        (ld, 0, 0, 16),  # 6: args[0] (the family; low 32 bits, little endian)
        (jeq, eacces - 8, 0, _AF_INET),  # 7
        (jeq, eacces - 9, 0, _AF_INET6),  # 8
        (jeq, eacces - 10, 0, _AF_PACKET),  # 9
        (ret, 0, 0, _RET_ALLOW),  # 10
        (ret, 0, 0, _RET_ERRNO | _EACCES),  # 11
        (ret, 0, 0, _RET_ERRNO | _ENOSYS),  # 12
    ]
    return program


def restrict_network() -> None:
    """Install the seccomp filter: no IPv4/IPv6/packet sockets, no io_uring, no foreign ABI."""
    rows = _no_network_filter()
    filters = (_Filter * len(rows))(*(_Filter(*row) for row in rows))
    program = _Program(len(rows), filters)
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0), "seccomp")


def main(argv: list[str]) -> None:
    """Parse `--write P`, `--write-file P`, `--network`, `--setenv K=V`, then `--` and exec the rest."""
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    writable: list[tuple[str, int]] = []
    network = False
    i = 0
    while i < len(options):
        flag = options[i]
        if flag == "--network":
            network = True
            i += 1
            continue
        value = options[i + 1]
        if flag == "--write":
            writable.append((value, DIR_RIGHTS if os.path.isdir(value) else FILE_RIGHTS))
        elif flag == "--setenv":
            name, _, text = value.partition("=")
            os.environ[name] = text
        else:
            raise SystemExit(f"landlock.py: unknown option {flag}")
        i += 2
    abi, reason = abi_version()
    if reason:
        raise SystemExit(f"landlock.py: {reason}")
    restrict_filesystem(writable, network=network, abi=abi)
    if not network:
        restrict_network()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
