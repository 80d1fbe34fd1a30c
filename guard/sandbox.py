"""The kernel sandbox of `git lane exec --sandbox`: Landlock, through its three syscalls.

A small ctypes layer over the three syscalls and prctl, not a PyPI package: `landlock` is a
pre-release (1.0.0.dev5) and `landlockpy` (0.2.0) is months old; either would be a new
runtime dependency for ~100 lines, and we need the build/apply split below (ruleset built
in the supervisor, only two syscalls between fork and exec), which we then control and
test against the real kernel (tests/test_sandbox.py). Three steps:

- `abi()`: the kernel's Landlock ABI (0 = none), never raises;
- `grants(repo, rec)`: the decision, pure given the facts: read+execute everywhere, every
  right on the lane's worktree, the lane's admin dir under `worktrees/` (with its private
  object store `objects/`: the shared `objects/` is not writable, guard/objects.py), the loose-ref and reflog directories of lane branches (`refs/heads/lane/`,
  `logs/refs/heads/lane/`: shared by every lane, see docs/trust-boundary.md), `rr-cache/`
  when rerere is on, the temp and cache dirs, `sandbox_writable`, and the terminal devices;
- `prepare(grants)`: builds the ruleset in the caller (the supervisor: it opens the paths
  and adds the rules, and stays unconfined) and returns the function CMD's process runs
  just before exec: `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self`, two syscalls.

Standard library only."""

from __future__ import annotations

import ctypes
import os
import platform
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from guard.repo import Repo
    from guard.store import LaneRecord

# x86_64 and the generic table (aarch64) share the numbers; elsewhere we do not guess.
_NR = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# filesystem access rights, by the ABI that introduced them
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
_ABI1 = (1 << 13) - 1
READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
MIN_ABI = 2  # ABI 1 forbids every rename across directories: git could not store an object

# the devices a terminal program and a shell write to
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm")


def handled(abi_version: int) -> int:
    """Every filesystem right the kernel of this ABI knows."""
    rights = _ABI1
    if abi_version >= 2:
        rights |= REFER
    if abi_version >= 3:
        rights |= TRUNCATE
    if abi_version >= 5:
        rights |= IOCTL_DEV
    return rights


class SandboxError(Exception):
    """The ruleset could not be built (or applied)."""


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _RulesetAttr(ctypes.Structure):  # only handled_access_fs: the network stays untouched
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when there is none (not Linux, an unknown
    architecture, a kernel without it or with it switched off, a seccomp filter)."""
    return probe()[0]


def probe() -> tuple[int, str]:
    """(ABI, why it is 0)."""
    try:
        if platform.system() != "Linux":
            return 0, f"Landlock is Linux-only (this is {platform.system()})"
        nrs = _NR.get(platform.machine())
        if nrs is None:
            return 0, f"no known Landlock syscall numbers on {platform.machine()}"
        libc = _libc()
        res = libc.syscall(
            ctypes.c_long(nrs[0]),
            ctypes.c_void_p(None),
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
        if res >= 1:
            return int(res), ""
        err = ctypes.get_errno()
    except (OSError, AttributeError, ValueError) as exc:
        return 0, f"cannot call syscall(2): {exc}"
    import errno

    why = {
        errno.ENOSYS: "the kernel has no Landlock (needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK)",
        errno.EOPNOTSUPP: "Landlock is built in but switched off (add landlock to lsm=)",
        errno.EPERM: "a seccomp filter forbids landlock_create_ruleset",
    }
    return 0, why.get(err, f"landlock_create_ruleset failed: {os.strerror(err) if err else res}")


def usable(abi_version: int) -> str:
    """'' when a kernel of this ABI can run git sandboxed, else why not."""
    if abi_version <= 0:
        return "the kernel has no Landlock"
    if abi_version < MIN_ABI:
        return (
            f"Landlock ABI {abi_version} forbids renames across directories, which git needs "
            f"to store objects (ABI {MIN_ABI}, Linux 5.19, is the least that works)"
        )
    return ""


# -- the decision -----------------------------------------------------------------------
@dataclass(frozen=True)
class Grants:
    writable: list[str]
    readable: list[str] = field(default_factory=lambda: ["/"])
    notes: list[str] = field(default_factory=list)
    # the temp dir encloses something protected (the repository lives in /tmp): CMD gets
    # a private directory made under this one (mkdtemp at exec), and TMPDIR naming it
    private_tmp_under: str | None = None


@dataclass(frozen=True)
class Facts:
    """What grants() decides from, gathered by facts()."""

    lane_path: str
    admin_dir: str  # the lane's <common>/worktrees/<id>
    common: str
    main_ref: str
    protected: list[str]  # what no grant may enclose: the hub, other lanes, the common dir
    rerere: bool
    tmp: str
    cache: str
    cache_entries: list[str]  # realpaths of the directories in `cache`
    extra: list[str]


class BadGrant(SandboxError):
    """A `sandbox_writable` entry that cannot be granted."""

    def __init__(self, entry: str, why: str) -> None:
        super().__init__(f"sandbox_writable entry {entry!r} {why}")
        self.entry = entry
        self.why = why


def _real(p: str) -> str:
    return os.path.realpath(p)


def _encloses(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def decide(f: Facts) -> Grants:
    """The grants for these facts (pure)."""
    common = f.common
    lane_refs = ("refs/heads/lane", "logs/refs/heads/lane")
    writable = [
        f.lane_path,
        f.admin_dir,
        os.path.join(f.admin_dir, "objects"),  # the lane's private object store
        *(os.path.join(common, r) for r in lane_refs),
    ]
    notes = [
        "read and execute everywhere; the network is not confined",
        "refs/heads/lane/ and logs/refs/heads/lane/ are shared by every lane: the kernel lets "
        "this lane's processes write other lanes' branches too (sync/land detect a moved "
        "lane branch: lane_branch_moved)",
        "objects/ is not writable: CMD's git writes objects into the lane's own store "
        "(worktrees/<id>/objects, GIT_OBJECT_DIRECTORY), which land re-hashes into objects/",
        "packed-refs is not writable, and git locks it to delete any ref: git branch -d and "
        "update-ref -d fail, and a rebase leaves a stale CHERRY_PICK_HEAD in the lane "
        "(git lane sync removes it; git lane release, outside, deletes lane branches)",
    ]
    if f.main_ref.startswith("refs/heads/lane/"):
        raise SandboxError(f"main ({f.main_ref}) is inside the lane branches' directory")
    if f.rerere:
        writable.append(os.path.join(common, "rr-cache"))
    private_tmp = None
    if any(_encloses(f.tmp, p) for p in f.protected):
        private_tmp = f.tmp
        notes.append(
            f"the temp dir {f.tmp} holds the repository: CMD gets a private one under it "
            "(TMPDIR), removed when CMD ends"
        )
    else:
        writable.append(f.tmp)
    if any(_encloses(f.cache, p) for p in f.protected):
        kids = [c for c in f.cache_entries if not any(_encloses(c, p) for p in f.protected)]
        writable += kids
        notes.append(
            f"the cache dir {f.cache} holds lane worktrees (or the repository): only its "
            "entries that hold none are writable, and no new entry can be made in it"
        )
    else:
        writable.append(f.cache)
    for entry in f.extra:
        if not os.path.isabs(entry):
            raise BadGrant(entry, "is not an absolute path")
        real = _real(entry)
        hit = next(
            (p for p in [*f.protected, common] if _encloses(real, p) or _encloses(p, real)), None
        )
        if hit is not None:
            raise BadGrant(entry, f"would open {hit} (the hub, another lane or the git dir)")
        writable.append(real)
    writable += list(DEVICES)
    out: list[str] = []
    for w in writable:
        if w not in out:
            out.append(w)
    return Grants(writable=out, notes=notes, private_tmp_under=private_tmp)


def facts(
    lane_path: str,
    common: str,
    main_ref: str,
    worktree_paths: Sequence[str],
    rerere: bool,
    extra: Sequence[str],
    env: Mapping[str, str],
) -> Facts:
    """Facts from the repository's answers (worktree_paths: every worktree of it)."""
    lane_real = _real(lane_path)
    common_real = _real(common)
    dotgit = os.path.join(lane_real, ".git")
    try:
        with open(dotgit, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SandboxError(f"cannot read {dotgit}: {exc.strerror}") from None
    if not text.startswith("gitdir: "):
        raise SandboxError(f"{dotgit} does not name the lane's git dir")
    admin = text[len("gitdir: ") :].rstrip("\n")
    admin = _real(admin if os.path.isabs(admin) else os.path.join(lane_real, admin))
    if os.path.dirname(admin) != os.path.join(common_real, "worktrees"):
        raise SandboxError(f"the lane's git dir {admin} is not under {common_real}/worktrees")
    protected = [_real(p) for p in worktree_paths if _real(p) != lane_real]
    protected.append(common_real)
    tmp = _real(env.get("TMPDIR") or "/tmp")
    home = env.get("HOME") or os.path.expanduser("~")
    # `~/.codex` is the user's (exec's HOME); anything else must be absolute
    extra = [home + e[1:] if e == "~" or e.startswith("~/") else e for e in extra]
    cache = _real(env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"))
    try:
        entries = sorted(e.path for e in os.scandir(cache) if e.is_dir(follow_symlinks=False))
    except OSError:
        entries = []
    return Facts(
        lane_path=lane_real,
        admin_dir=admin,
        common=common_real,
        main_ref=main_ref,
        protected=protected,
        rerere=rerere,
        tmp=tmp,
        cache=cache,
        cache_entries=entries,
        extra=list(extra),
    )


def grants(repo: Repo, rec: LaneRecord, env: Mapping[str, str] | None = None) -> Grants:
    """The grants for lane `rec` of `repo` (raises SandboxError / BadGrant)."""
    from guard import git

    wts = [w.path for w in repo.worktrees()]
    rerere = git.config_bool(rec.path, "rerere.enabled", False) or os.path.isdir(
        os.path.join(repo.common_dir, "rr-cache")
    )
    extra = repo.config["sandbox_writable"]
    f = facts(
        rec.path,
        str(repo.common_dir),
        repo.main_ref,
        wts,
        rerere,
        extra,
        os.environ if env is None else env,
    )
    return decide(f)


def clear_stale_pick(path: str) -> bool:
    """Remove the CHERRY_PICK_HEAD a finished rebase left in the lane at `path` because its
    delete could not lock packed-refs (every ref delete does, and the sandbox keeps
    packed-refs unwritable). Only when nothing is in progress (no rebase, no sequencer, no
    conflict) and HEAD is that pick, committed (same author and message): a cherry-pick
    still being resolved keeps its CHERRY_PICK_HEAD. True when it was removed."""
    from guard import git

    gd = git.worktree_git_dir(path)
    if gd is None or not (gd / "CHERRY_PICK_HEAD").is_file():
        return False
    if any((gd / d).exists() for d in ("rebase-merge", "rebase-apply", "sequencer")):
        return False
    if git.unmerged(path):
        return False
    fmt = "--format=%an%x00%ae%x00%ad%x00%B"
    head = git.run(["show", "-s", fmt, "HEAD"], path, check=False)
    pick = git.run(["show", "-s", fmt, "CHERRY_PICK_HEAD"], path, check=False)
    if not (head.ok and pick.ok and head.stdout == pick.stdout):
        return False
    try:
        (gd / "CHERRY_PICK_HEAD").unlink()
    except OSError:
        return False
    return True


# -- applying it ------------------------------------------------------------------------
class Prepared:
    """A ruleset built in the supervisor; calling it (in CMD's process, just before exec)
    confines that process and everything it starts. close() in the supervisor after."""

    def __init__(self, ruleset_fd: int, abi_version: int, granted: list[str]) -> None:
        self.fd = ruleset_fd
        self.abi = abi_version
        self.granted = granted
        libc = _libc()
        self._syscall = libc.syscall
        self._prctl = libc.prctl
        self._nr = _NR[platform.machine()][2]

    def __call__(self) -> None:
        if self._prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SandboxError(f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
        if self._syscall(ctypes.c_long(self._nr), ctypes.c_int(self.fd), ctypes.c_uint32(0)) != 0:
            raise SandboxError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def prepare(g: Grants, extra_writable: Sequence[str] = ()) -> Prepared:
    """Build the ruleset for `g` (and `extra_writable`: the private temp dir). Paths that
    do not exist are left out (nothing to grant); raises SandboxError when the kernel
    refuses a step."""
    ver = abi()
    why = usable(ver)
    if why:
        raise SandboxError(why)
    create, add, _ = _NR[platform.machine()]
    libc = _libc()
    rights = handled(ver)
    attr = _RulesetAttr(handled_access_fs=rights)
    fd = libc.syscall(
        ctypes.c_long(create), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0
    )
    if fd < 0:
        raise SandboxError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    granted: list[str] = []
    try:
        for path, allowed in [
            *((r, READ) for r in g.readable),
            *((w, rights) for w in [*g.writable, *extra_writable]),
        ]:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise SandboxError(f"cannot open {path}: {exc.strerror}") from None
            try:
                if not stat.S_ISDIR(os.fstat(pfd).st_mode):
                    allowed &= FILE_RIGHTS
                rule = _PathBeneath(allowed_access=allowed & rights, parent_fd=pfd)
                res = libc.syscall(
                    ctypes.c_long(add), ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH),
                    ctypes.byref(rule), ctypes.c_uint32(0),
                )  # fmt: skip
                if res != 0:
                    err = ctypes.get_errno()
                    raise SandboxError(f"landlock_add_rule {path}: {os.strerror(err)}")
            finally:
                os.close(pfd)
            granted.append(path)
    except BaseException:
        os.close(fd)
        raise
    return Prepared(fd, ver, granted)
