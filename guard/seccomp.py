"""The rest of `git lane exec --sandbox`'s confinement, next to Landlock (guard/sandbox.py):
a seccomp filter against terminal injection, and (as root) no capabilities.

- Terminal injection: CMD shares the owner's terminal, and its fd 0 was opened before the
  sandbox (Landlock's ioctl right does not apply to it). `ioctl(TIOCSTI)` pushes bytes
  into the terminal's input, which the owner's shell reads after CMD; `TIOCLINUX` (on a
  virtual console) can paste. The filter makes both fail with EPERM, for every syscall ABI
  a process of this machine can use: the native one, x32 on x86_64 (syscall numbers with
  bit 30 set) and the 32-bit compat one (i386, arm); any other ABI gets EPERM for every
  syscall (fail closed). A classic BPF program, built here in the supervisor, installed
  in CMD's process after no_new_privs and before exec: prctl(PR_SET_SECCOMP).
- setuid/setgid files: the chmod family, a create (open, openat, creat, mknod, mknodat)
  with a mode holding S_ISUID or S_ISGID fail with EPERM, whoever runs CMD (a root CMD
  owns every root-owned file: a setuid-root program outside its grants is a root shell
  for every user). openat2 (its mode behind a pointer) gets ENOSYS, so callers fall back
  to openat; io_uring_setup EPERM (io_uring's requests run past this filter). mkdir is
  left alone: on a directory S_ISUID means nothing and S_ISGID only passes the group on.
- Capabilities: a root supervisor's CMD would keep every capability (chattr +a on the
  hub's config, mount, ptrace past Landlock's DAC-free checks...). As root (or with any
  capability), CMD's process drops the bounding set, clears the ambient set, locks the
  securebits so that exec does not give root its capabilities back (NOROOT), and sets its
  own sets empty. It stays uid 0: files root owns stay root's, and their owner may chmod
  them (the mode bits; not S_ISUID/S_ISGID, above) wherever they are: exec warns.

Installing either failing raises SandboxError: CMD is not run. Standard library only."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

from guard.sandbox import SandboxError

TIOCSTI = 0x5412
TIOCLINUX = 0x541C
_EPERM, _ENOSYS = 1, 38
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32 = 0x40000000
SETID = 0o6000  # S_ISUID | S_ISGID
# open's flags that create a file (and so use the mode): O_CREAT, and __O_TMPFILE (linkat
# then names it); the same bits on every ABI below
CREATES = 0o100 | 0o20000000
# What each listed syscall is checked for: _IOCTL (arg 1 is TIOCSTI or TIOCLINUX),
# ("mode", i, 0) (arg i has SETID), ("create", f, m) (arg f has CREATES and arg m has
# SETID), _DENY (EPERM), _ENOSYS_ (ENOSYS: callers fall back to a syscall we can check)
Check = tuple[str, int, int]
_IOCTL, _DENY, _ENOSYS_ = ("ioctl", 0, 0), ("deny", 0, 0), ("enosys", 0, 0)


def _table(
    ioctl: tuple[int, ...],
    chmod: int | None,
    fchmod: int,
    fchmodat: int,
    open_: int | None,
    creat: int | None,
    openat: int,
    mknod: int | None,
    mknodat: int,
    base: int = 0,
) -> list[tuple[int, Check]]:
    """One ABI's syscalls to check: the terminal ioctls; every way to give a file the
    setuid/setgid bits (chmod family, a create with such a mode, mknod of a regular file);
    io_uring (its requests run in the kernel, past this filter: it could open with a
    mode); openat2 (its mode is behind a pointer, unreadable here). fchmodat2, openat2 and
    io_uring_setup have the same number on every ABI (452, 437, 425)."""
    out: list[tuple[int, Check]] = [(nr, _IOCTL) for nr in ioctl]
    if chmod is not None:
        out.append((base | chmod, ("mode", 1, 0)))
    out += [(base | fchmod, ("mode", 1, 0)), (base | fchmodat, ("mode", 2, 0))]
    out += [(base | 452, ("mode", 2, 0))]  # fchmodat2 (Linux 6.6)
    if open_ is not None:
        out.append((base | open_, ("create", 1, 2)))
    if creat is not None:
        out.append((base | creat, ("mode", 1, 0)))
    out.append((base | openat, ("create", 2, 3)))
    if mknod is not None:
        out.append((base | mknod, ("mode", 1, 0)))
    out.append((base | mknodat, ("mode", 2, 0)))
    out += [(base | 437, _ENOSYS_), (base | 425, _DENY)]  # openat2, io_uring_setup
    return out


# per machine: (audit arch, that ABI's syscalls to check) for every ABI it runs
ARCHES: dict[str, list[tuple[int, list[tuple[int, Check]]]]] = {
    "x86_64": [
        (0xC000003E, _table((16,), 90, 91, 268, 2, 85, 257, 133, 259)),
        # x32: the x86_64 numbers with bit 30 set (its own ioctl is 514)
        (0xC000003E, _table((_X32 | 16, _X32 | 514), 90, 91, 268, 2, 85, 257, 133, 259, _X32)),
        (0x40000003, _table((54,), 15, 94, 306, 5, 8, 295, 14, 297)),  # i386
    ],
    "aarch64": [
        (0xC00000B7, _table((29,), None, 52, 53, None, None, 56, None, 33)),
        (0x40000028, _table((54,), 15, 94, 333, 5, 8, 322, 14, 324)),  # arm (EABI)
    ],
}
# classic BPF opcodes
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_OFF_NR, _OFF_ARCH, _OFF_ARGS = 0, 4, 16
# prctl
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE and KEEP_CAPS_LOCKED (keep-caps off), all locked
_SECUREBITS = 0b11101111
_CAP_VERSION_3 = 0x20080522


def _arg(i: int) -> int:
    """The offset of syscall argument i's low 32 bits in seccomp_data (every argument
    checked is an int, a mode_t or open's flags: the kernel uses those bits only)."""
    return _OFF_ARGS + 8 * i + (0 if sys.byteorder == "little" else 4)


def _label(check: Check) -> str:
    return f"mode{check[1]}" if check[0] == "mode" else "-".join(map(str, check))


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` as (code, jt, jf, k) instructions; SandboxError for a
    machine whose ABIs we do not know (never run unfiltered)."""
    arches = ARCHES.get(machine)
    if arches is None:
        raise SandboxError(f"no seccomp filter known for {machine} (x86_64 and aarch64 only)")
    # assembled with labels (a str jump target), resolved at the end: jumps only go forward
    asm: list[tuple[int, int | str, int | str, int] | str] = [(_LD_ABS, 0, 0, _OFF_ARCH)]
    seen_arch: list[int] = []
    for arch, _ in arches:  # x32 shares x86_64's audit arch: one jump to both tables
        if arch not in seen_arch:
            seen_arch.append(arch)
            asm.append((_JEQ, f"arch{arch}", 0, arch))
    asm.append((_RET, 0, 0, _RET_ERRNO | _EPERM))  # an ABI not listed: nothing runs
    checks: set[Check] = set()
    for arch in seen_arch:
        asm += [f"arch{arch}", (_LD_ABS, 0, 0, _OFF_NR)]
        for a, table in arches:
            if a == arch:
                for nr, check in table:
                    asm.append((_JEQ, _label(check), 0, nr))
                    checks.add(check)
        asm.append((_RET, 0, 0, _RET_ALLOW))
    modes = {c[2] for c in checks if c[0] == "create"} | {c[1] for c in checks if c[0] == "mode"}
    for check in sorted(checks):
        if check[0] == "mode":
            continue  # the shared mode blocks below
        asm.append(_label(check))
        if check == _IOCTL:
            asm += [
                (_LD_ABS, 0, 0, _arg(1)),
                (_JEQ, "deny", 0, TIOCSTI),
                (_JEQ, "deny", 0, TIOCLINUX),
                (_RET, 0, 0, _RET_ALLOW),
            ]
        elif check == _DENY:
            asm.append((_RET, 0, 0, _RET_ERRNO | _EPERM))
        elif check == _ENOSYS_:
            asm.append((_RET, 0, 0, _RET_ERRNO | _ENOSYS))
        else:  # a create: its mode only when it creates
            asm += [(_LD_ABS, 0, 0, _arg(check[1])), (_JSET, f"mode{check[2]}", "allow", CREATES)]
    for i in sorted(modes):
        asm += [f"mode{i}", (_LD_ABS, 0, 0, _arg(i)), (_JSET, "deny", "allow", SETID)]
    asm += ["allow", (_RET, 0, 0, _RET_ALLOW), "deny", (_RET, 0, 0, _RET_ERRNO | _EPERM)]
    where: dict[str, int] = {}
    pos = 0
    for item in asm:
        if isinstance(item, str):
            where[item] = pos
        else:
            pos += 1
    prog: list[tuple[int, int, int, int]] = []
    for item in asm:
        if isinstance(item, str):
            continue
        code, jt, jf, k = item
        here = len(prog) + 1
        t = where[jt] - here if isinstance(jt, str) else jt
        f = where[jf] - here if isinstance(jf, str) else jf
        if not (0 <= t <= 255 and 0 <= f <= 255):
            raise SandboxError("seccomp filter too long")  # not with the tables above
        prog.append((code, t, f, k))
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _caps_held() -> bool:
    """Is there a capability to drop? Any in the permitted or ambient set; as root also
    any in the bounding set (exec gives root those back). None: already dropped (a
    sandbox inside a sandbox), and dropping again would need CAP_SETPCAP."""
    names = ("CapPrm:", "CapAmb:", "CapBnd:") if os.geteuid() == 0 else ("CapPrm:", "CapAmb:")
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return any(line.startswith(names) and int(line.split()[1], 16) != 0 for line in f)
    except (OSError, ValueError):
        return True  # cannot tell: drop them (a failure then refuses)


class Seal:
    """Built in the supervisor; called in CMD's process (after no_new_privs, before exec)."""

    def __init__(self, prog: list[tuple[int, int, int, int]], drop_caps: bool) -> None:
        raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
        self._buf = ctypes.create_string_buffer(raw, len(raw))
        self._fprog = _SockFprog(len(prog), ctypes.addressof(self._buf))
        self.drop_caps = drop_caps
        self.root = os.geteuid() == 0
        try:
            with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
                self._last_cap = int(f.read())
        except (OSError, ValueError):
            self._last_cap = 63
        # capset's header and two empty data structs (version 3: 64-bit sets)
        self._hdr = ctypes.create_string_buffer(struct.pack("=Ii", _CAP_VERSION_3, 0), 8)
        self._data = ctypes.create_string_buffer(24)
        libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = libc.prctl
        self._prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]  # an address fits
        self._capset = libc.capset

    def _call(self, what: str, res: int, tolerate: tuple[int, ...] = ()) -> None:
        if res != 0:
            err = ctypes.get_errno()
            if err not in tolerate:
                raise SandboxError(f"{what}: {os.strerror(err)}")

    def _drop_caps(self) -> None:
        soft = () if self.root else (errno.EPERM,)  # without CAP_SETPCAP: no_new_privs holds
        for cap in range(self._last_cap + 1):
            self._call("prctl(PR_CAPBSET_DROP)", self._prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), soft)
        self._call(
            "prctl(PR_SET_SECUREBITS)", self._prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), soft
        )
        self._call(
            "prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
            self._prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0),
            (errno.EINVAL,),  # a kernel without ambient capabilities (before 4.3)
        )
        self._call("capset", self._capset(self._hdr, self._data))

    def __call__(self) -> None:
        if self.drop_caps:
            self._drop_caps()
        res = self._prctl(
            _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(self._fprog), 0, 0
        )
        self._call("prctl(PR_SET_SECCOMP)", res)


def prepare(drop_caps: bool | None = None) -> Seal:
    """The seal for CMD's process on this machine (SandboxError where there is none)."""
    if platform.system() != "Linux":
        raise SandboxError("seccomp is Linux-only")
    return Seal(program(platform.machine()), _caps_held() if drop_caps is None else drop_caps)
