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
- Capabilities: a root supervisor's CMD would keep every capability (chattr +a on the
  hub's config, mount, ptrace past Landlock's DAC-free checks...). As root (or with any
  capability), CMD's process drops the bounding set, clears the ambient set, locks the
  securebits so that exec does not give root its capabilities back (NOROOT), and sets its
  own sets empty. It stays uid 0: files root owns stay root's.

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
_EPERM = 1
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32 = 0x40000000
# per machine: (audit arch, the ioctl syscall numbers of that ABI) for every ABI it runs
ARCHES: dict[str, list[tuple[int, tuple[int, ...]]]] = {
    "x86_64": [(0xC000003E, (16, _X32 | 16, _X32 | 514)), (0x40000003, (54,))],
    "aarch64": [(0xC00000B7, (29,)), (0x40000028, (54,))],
}
# classic BPF opcodes
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
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


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` as (code, jt, jf, k) instructions; SandboxError for a
    machine whose ABIs we do not know (never run unfiltered)."""
    arches = ARCHES.get(machine)
    if arches is None:
        raise SandboxError(f"no seccomp filter known for {machine} (x86_64 and aarch64 only)")
    # ioctl's second argument is an unsigned int: its low 32 bits are what the kernel uses
    low = _OFF_ARGS + 8 * 1 + (0 if sys.byteorder == "little" else 4)
    # built backwards from the end, so every jump is a known count of instructions ahead
    deny = [(_RET, 0, 0, _RET_ERRNO | _EPERM)]
    check = [
        (_LD_ABS, 0, 0, low),
        (_JEQ, 2, 0, TIOCSTI),  # -> deny
        (_JEQ, 1, 0, TIOCLINUX),  # -> deny
        (_RET, 0, 0, _RET_ALLOW),
    ]
    tail = check + deny
    body = [(_RET, 0, 0, _RET_ERRNO | _EPERM)]  # an ABI not listed: nothing runs
    for arch, nrs in reversed(arches):
        block: list[tuple[int, int, int, int]] = [(_LD_ABS, 0, 0, _OFF_NR)]
        for i, nr in enumerate(nrs):
            to_check = len(nrs) - i - 1 + 1 + len(body)  # the rest of nrs, ALLOW, body
            block.append((_JEQ, to_check, 0, nr))
        block.append((_RET, 0, 0, _RET_ALLOW))
        body = [(_JEQ, 0, len(block), arch), *block, *body]
    prog = [(_LD_ABS, 0, 0, _OFF_ARCH), *body, *tail]
    if any(jt > 255 or jf > 255 for _, jt, jf, _ in prog):
        raise SandboxError("seccomp filter too long")  # not with the tables above
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
