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
  `logs/refs/heads/lane/`: shared by every lane, see docs/trust-boundary.md), CMD's own
  cache dir (never the owner's: code the owner runs is kept there), `sandbox_writable`,
  and the terminal devices (each through the same fence); never `rr-cache/`, however
  rerere is set: it is shared by every lane and the owner, and what is recorded there is
  what the next conflicted rebase or merge of anyone takes as its resolution (exec turns
  rerere off for CMD's git, sync never uses it);
  in git's own directories (the admin dir, its store, the lane refs) without the
  rights to make a link, a FIFO, a socket or a device (SPECIALS: git makes none there, and
  the owner's engine git runs in them) nor REFER (nothing renamed in from elsewhere: git
  renames only within one directory there, but for a blob past core.bigFileThreshold
  streamed by unpack-objects, which fails with EXDEV);
- `prepare(grants)`: builds the ruleset in the caller (the supervisor: it opens the paths
  and adds the rules, and stays unconfined) and returns the function CMD's process runs
  just before exec: `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self`, two syscalls.

Standard library only."""

from __future__ import annotations

import ctypes
import os
import platform
import site
import stat
import sys
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
# what git never makes in a git dir: a link, a FIFO, a socket, a device. None is granted in
# the lane's admin dir, its object store or the lane refs: the owner's engine git runs in
# them (commit, rebase, worktree lock) and would write through a link or block on a FIFO
# planted there while it runs (a walk before cannot see what comes after it)
SPECIALS = MAKE_SYM | MAKE_FIFO | MAKE_SOCK | MAKE_CHAR | MAKE_BLOCK
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
_ABI1 = (1 << 13) - 1
READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
# Below ABI 3 the kernel cannot deny truncation: truncate(2), or open(O_RDONLY|O_TRUNC),
# of any file outside the grants passes (packed-refs, a hook, another lane's files)
MIN_ABI = 3

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
    """The ruleset could not be built (or applied); `next`: the commands that fix it,
    when they are known."""

    def __init__(self, message: str, next: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.next = list(next)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _RulesetAttr(ctypes.Structure):  # the network stays untouched (no net rights)
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),  # ABI 4
        ("scoped", ctypes.c_uint64),  # ABI 6
    ]


# ABI 6: CMD may not signal, nor connect to an abstract Unix socket of, a process outside
# its Landlock domain (the supervisor may still signal CMD: it is outside, CMD inside)
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
SCOPE_ABI = 6


def scoped(abi_version: int) -> int:
    """The IPC scopes a kernel of this ABI enforces (0 before ABI 6)."""
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi_version >= SCOPE_ABI else 0


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when there is none (not Linux, an unknown
    architecture, a kernel without it or with it switched off, a seccomp filter)."""
    return probe()[0]


_UNDETERMINED = "the Landlock probe failed"


def undetermined(why: str) -> bool:
    """Is this probe()'s answer "could not tell" (an error, not a kernel without Landlock)?
    `best-effort` runs with the shims only where Landlock is known to be missing, never
    where the probe itself failed."""
    return why.startswith(_UNDETERMINED)


def probe() -> tuple[int, str]:
    """(ABI, why it is 0); see undetermined()."""
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
    except (OSError, AttributeError, ValueError, TypeError) as exc:
        return 0, f"{_UNDETERMINED}: cannot call syscall(2): {exc}"
    import errno

    why = {
        errno.ENOSYS: "the kernel has no Landlock (needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK)",
        errno.EOPNOTSUPP: "Landlock is built in but switched off (add landlock to lsm=)",
        errno.EPERM: "a seccomp filter forbids landlock_create_ruleset",
    }
    failed = f"landlock_create_ruleset returned {res}: {os.strerror(err) if err else 'no errno'}"
    return 0, why.get(err, f"{_UNDETERMINED}: {failed}")


def usable(abi_version: int) -> str:
    """'' when a kernel of this ABI can run git sandboxed, else why not."""
    if abi_version <= 0:
        return "the kernel has no Landlock"
    if abi_version < MIN_ABI:
        return (
            f"Landlock ABI {abi_version} cannot deny truncating a file outside the lane "
            f"(ABI {MIN_ABI}, Linux 6.2, is the least that confines it)"
        )
    return ""


# -- the decision -----------------------------------------------------------------------
@dataclass(frozen=True)
class Grants:
    writable: list[str]
    readable: list[str] = field(default_factory=lambda: ["/"])
    notes: list[str] = field(default_factory=list)
    # CMD gets a private temp directory made under this one (mkdtemp at exec), and
    # TMPDIR/TMP/TEMP naming it; the shared temp dir itself is never granted
    private_tmp_under: str | None = None
    # writable paths granted without SPECIALS and without REFER (git's own directories,
    # the store too: git renames only within one directory there, and a directory renamed
    # in from the lane would bring the links and FIFOs in it; a rule follows its inode, so
    # a store keeping REFER could be renamed to another name in the admin dir and take
    # REFER with it: red team 13U)
    plain: list[str] = field(default_factory=list)
    # CMD's own cache dir (in `writable` too): made by cache_env(), which points
    # XDG_CACHE_HOME and PRE_COMMIT_HOME at it; the owner's cache dir is not writable
    private_cache: str = ""


@dataclass(frozen=True)
class Facts:
    """What grants() decides from, gathered by facts()."""

    lane_path: str
    admin_dir: str  # the lane's <common>/worktrees/<id>
    common: str
    main_ref: str
    protected: list[str]  # what no grant may enclose: the hub, other lanes, the common dir
    tmp: str
    cache: str
    extra: list[str]
    # where lanes are made (worktrees_root, git-lane's dir in the cache) and where Codex's
    # temp dirs are (CODEX_TMP): no grant may enclose or lie in them, or a lane made later
    # (or another repository's) is writable, or a Codex root re-pointable
    roots: list[str] = field(default_factory=list)
    # CMD's own cache dir (its XDG_CACHE_HOME, kept per lane: private_cache()); "": none
    private_cache: str = ""
    # the code git-lane and its hooks run, as the owner, outside the sandbox: its package,
    # its python, GITLANE_PYPATH/GITLANE_PYTHON, pre-commit's clones (PRE_COMMIT_HOME). No
    # grant may enclose or lie in them: CMD would rewrite what the owner runs next
    code: list[str] = field(default_factory=list)


class BadGrant(SandboxError):
    """A `sandbox_writable` entry that cannot be granted."""

    def __init__(self, entry: str, why: str, rest: Sequence[str] = ()) -> None:
        from guard.git import q

        fix = "git lane config " + (
            "set sandbox_writable " + q(",".join(rest)) if rest else "unset sandbox_writable"
        )
        super().__init__(f"sandbox_writable entry {entry!r} {why}", [fix])
        self.entry = entry
        self.why = why


def _real(p: str) -> str:
    return os.path.realpath(p)


def _encloses(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


class _Fence:
    """What no grant may open: a grant that encloses, equals or lies in a protected path
    (the hub, another lane, the common dir, where lanes are made), or that encloses the
    lane's own worktree (it would open its neighbours); one inside the lane is harmless."""

    def __init__(self, f: Facts) -> None:
        self.lane = f.lane_path
        self.fenced = [*f.protected, f.common, *f.roots]

    def inside(self, g: str) -> str | None:
        """The protected path `g` is (or lies in), if any."""
        if _encloses(self.lane, g):
            return None
        return next((p for p in self.fenced if _encloses(p, g)), None)

    def encloses(self, g: str) -> str | None:
        """The protected path `g` encloses (or the lane, when g is above it), if any."""
        hit = next((p for p in self.fenced if _encloses(g, p)), None)
        if hit is None and g != self.lane and _encloses(g, self.lane):
            hit = self.lane
        return hit


def _code_hit(f: Facts, g: str, under: bool = True) -> str | None:
    """The code git-lane runs (f.code) that `g` lies in, or (`under`) encloses, if any.
    A code path that is `/` (a python prefix) encloses everything: only equal to it."""
    return next(
        (
            c
            for c in f.code
            if (_encloses(c, g) if c != "/" else g == "/") or (under and _encloses(g, c))
        ),
        None,
    )


_CODE = (
    "code the owner runs outside the sandbox (git-lane's package or python, the hooks' "
    "GITLANE_PYPATH/GITLANE_PYTHON, pre-commit's hook clones in PRE_COMMIT_HOME)"
)


def private_cache(cache: str, slug: str, key: str) -> str:
    """CMD's own cache dir for lane `key` of the repository `slug`, under the owner's cache
    dir `cache`: next to git-lane's dir there (never in it: lanes are made there)."""
    return os.path.join(cache, "git-lane-sandbox", slug, key)


# where Codex's temp dir (its TMPDIR, one of its writable roots: agent-setup --for codex)
# lives, under the owner's cache dir: beside CMD's cache dirs, never in one. Fenced as the
# places lanes are made are (facts(): Facts.roots): no grant of `exec --sandbox` (CMD's
# cache dir is granted with every right, making links too) and no `sandbox_writable`
# entry may enclose or lie in it, so no sandboxed CMD can re-point the root before Codex
# resolves it (red team 17 F4)
CODEX_TMP = "git-lane-codex-tmp"


def codex_tmp(cache: str, slug: str, key: str) -> str:
    """Codex's temp dir for lane `key` of the repository `slug`: made by the owner
    (agent-setup), removed with the lane (release)."""
    return os.path.join(cache, CODEX_TMP, slug, key)


def hold_roots(paths: Sequence[str], make: Sequence[str] = ()) -> None:
    """Each of `paths` (absolute) is what it names: reached from / one component at a time
    through directory fds, each opened O_NOFOLLOW|O_DIRECTORY (no symlink anywhere on the
    way, each a directory), each owned by this user or by root, the path itself by this
    user. One of `make` that is missing (its last component only) is made, 0700. Raises
    SandboxError naming the first that is not (a link, no directory, missing, another
    user's): a sandbox that resolves its roots itself (Codex's) would grant what a link
    names instead."""
    uid = os.geteuid()
    for path in paths:
        if not os.path.isabs(path) or os.path.normpath(path) != path:
            raise SandboxError(f"the root {path} is not an absolute, normal path")
        parts = [p for p in path.split("/") if p]
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        here = ""
        try:
            for i, part in enumerate(parts):
                here += "/" + part
                last = i == len(parts) - 1
                try:
                    nfd = os.open(part, _DIR_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not (last and path in make):
                        why = f"{here} (on the way to the root {path}) is missing"
                        raise SandboxError(why) from None
                    os.mkdir(part, 0o700, dir_fd=fd)
                    nfd = os.open(part, _DIR_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    what = os.readlink(part, dir_fd=fd) if _is_link(fd, part) else None
                    is_ = f"a symlink to {what}" if what is not None else exc.strerror
                    raise SandboxError(
                        f"{here} (on the way to the root {path}) is {is_ or 'not a directory'}"
                    ) from None
                os.close(fd)
                fd = nfd
                owner = os.fstat(fd).st_uid
                if owner != uid and (last or owner != 0):
                    raise SandboxError(f"{here} (the root {path} or on its way) is uid {owner}'s")
        except OSError as exc:
            raise SandboxError(f"{here}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)


def make_dir(tmp: str, replace: bool = True) -> None:
    """Codex's temp dir `tmp` (codex_tmp) made 0700 by the owner if missing (its parents as
    the umask allows), reached through directory fds from /. With `replace`, what is at
    its name and no directory (a link, a file: never what a link names) is removed first;
    without, it is left for hold_roots to refuse. Raises OSError (a link above: ELOOP)."""
    from guard import dirfd

    fd, _ = dirfd.walk("/", os.path.dirname(tmp).lstrip("/"), create=True)
    name = os.path.basename(tmp)
    try:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if replace and st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=fd)
            st = None
        if st is None:
            os.mkdir(name, 0o700, dir_fd=fd)
    finally:
        os.close(fd)


_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _is_link(dfd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def cache_env(g: Grants) -> dict[str, str]:
    """Make CMD's private cache dir (0700, kept between runs) and return the variables
    that point CMD's tools at it; {} when there is none. Raises SandboxError."""
    if not g.private_cache:
        return {}
    try:
        os.makedirs(g.private_cache, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise SandboxError(
            f"cannot make CMD's cache dir {g.private_cache}: {exc.strerror}"
        ) from None
    return {
        "XDG_CACHE_HOME": g.private_cache,
        "PRE_COMMIT_HOME": os.path.join(g.private_cache, "pre-commit"),
    }


LANE_REFS = ("refs/heads/lane", "logs/refs/heads/lane")


def git_dirs(f: Facts) -> list[str]:
    """What a lane's process may write of git's own directories, and nothing else of the
    common dir: the lane's admin dir, its private object store in it (the shared
    `objects/` never: guard/objects.py), the directories of lane branches and their
    reflogs (`rr-cache/` never: shared by every lane and the owner). decide() grants them
    (without SPECIALS and REFER); agent-setup gives Codex's sandbox the same (guard/commands/agent_setup.py).
    Raises SandboxError when main is itself a lane branch (it would be writable)."""
    if f.main_ref.startswith("refs/heads/lane/"):
        raise SandboxError(f"main ({f.main_ref}) is inside the lane branches' directory")
    return lane_git_dirs(f.common, f.admin_dir)


def lane_git_dirs(common: str, admin_dir: str) -> list[str]:
    """git_dirs() of the lane whose admin dir is `admin_dir` (exec --own-objects, which
    decides no grants, walks the same for hard links: guard/linked.py)."""
    return [
        admin_dir,
        os.path.join(admin_dir, "objects"),  # the lane's private object store
        *(os.path.join(common, r) for r in LANE_REFS),
    ]


def decide(f: Facts) -> Grants:
    """The grants for these facts (pure but for resolving the device paths). Raises
    SandboxError when the temp or cache dir is one that cannot be granted (`/`, or in
    the repository or a lane), BadGrant for such a `sandbox_writable` entry."""
    fence = _Fence(f)
    writable = [f.lane_path, *git_dirs(f)]
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
        "rr-cache/ is not writable (shared by every lane and the owner: a resolution "
        "recorded there is what anyone's next rebase or merge takes): CMD's git runs with "
        "rerere.enabled=false, and git lane sync never uses rerere",
    ]
    hit = next((p for p in fence.fenced if _encloses(f.lane_path, p)), None)
    if hit is not None:
        raise SandboxError(f"the lane worktree {f.lane_path} encloses {hit}")
    # the temp dir is not granted, but CMD's private one is made in it; CMD's own cache
    # dir (in XDG_CACHE_HOME) is granted whole
    pc = f.private_cache
    for what, d in (("temp dir (TMPDIR)", f.tmp), ("cache dir CMD gets (in XDG_CACHE_HOME)", pc)):
        if not d:
            continue
        hit = "/" if d == "/" else fence.inside(d) or _code_hit(f, d, under=d == pc)
        if hit is None and d == pc:
            hit = fence.encloses(d)
        if hit is not None:
            nxt = []
            tmp = _real("/tmp")
            free = tmp != "/" and not fence.inside(tmp) and not _code_hit(f, tmp, False)
            if d == f.tmp and free:
                nxt = ["env TMPDIR=/tmp"]  # exec puts the command after it
            raise SandboxError(
                f"the {what} {d} " + ("is /" if hit == "/" else f"lies in or holds {hit}")
                + ": granting it would open the repository, a lane, everything or "
                f"{_CODE}; point it at a directory of its own",
                nxt,
            )  # fmt: skip
    # never the shared temp dir: the engine's own temp files (clean gate worktrees, the
    # attributes repository of a land, land-socket dirs) live there, and so do other lanes'
    private_tmp = f.tmp
    notes.append(
        f"the temp dir {f.tmp} is not writable (it holds the engine's gate worktrees and "
        "other lanes' files): CMD gets a private one under it (TMPDIR, TMP, TEMP), made "
        "0700 by exec and removed when CMD ends"
    )
    # the owner's cache dir is readable only: the owner's tools keep code there that they
    # run later, unconfined (pre-commit's hook clones, the tools uvx runs)
    if pc:
        writable.append(pc)
        notes.append(
            f"the cache dir {f.cache} is not writable (the owner's tools run code kept there): "
            f"CMD gets its own, {pc} (XDG_CACHE_HOME, and PRE_COMMIT_HOME in it), made 0700 "
            "by exec, kept between runs and removed when the lane is released; a tool CMD "
            "points at the owner's cache (UV_CACHE_DIR, PIP_CACHE_DIR...) cannot write there"
        )
    for entry in f.extra:
        if not os.path.isabs(entry):
            raise BadGrant(entry, "is not an absolute path", [e for e in f.extra if e != entry])
        real = _real(entry)
        hit = "/" if real == "/" else (fence.inside(real) or fence.encloses(real))
        if hit is not None:
            raise BadGrant(
                entry,
                f"would open {hit} (the hub, a lane, the git dir or where lanes are made)",
                [e for e in f.extra if e != entry],
            )
        hit = _code_hit(f, real)
        if hit is not None:
            raise BadGrant(entry, f"would open {hit}, {_CODE}", [e for e in f.extra if e != entry])
        writable.append(real)
    # the devices pass the fence too: /dev/shm is a directory anything may live in (a
    # repository on a RAM disk, TMPDIR=/dev/shm): left out when it holds what no grant may
    for d in DEVICES:
        real = _real(d)
        hit = fence.encloses(real) or fence.inside(real) or _code_hit(f, real)
        hit = hit or next((p for p in (f.tmp, f.cache) if p and _encloses(real, p)), None)
        if hit is None:
            writable.append(real)
        else:
            notes.append(
                f"{d} is not writable: it is or holds {hit}, which no grant may open (the "
                "repository, a lane, the temp or cache dir, code the owner runs); programs "
                "that use shared memory there (shm_open, POSIX semaphores, python's "
                "multiprocessing) fail"
            )
    if _real("/dev/shm") in writable:
        notes.append(
            "/dev/shm is writable (shm_open makes its files there, by name): so are the "
            "shared-memory files other processes of this user keep there"
        )
    out: list[str] = []
    for w in writable:
        if w not in out:
            out.append(w)
    notes.append(
        "no link, FIFO, socket or device can be made in the lane's admin dir, its object "
        "store or the lane refs (git makes none there; the owner's git runs in them), and "
        "nothing can be renamed into them from another directory (git renames within one "
        "there but for a streamed blob past core.bigFileThreshold: fetch it with "
        "git -c fetch.unpackLimit=1 fetch)"
    )
    gits = git_dirs(f)
    plain = [p for p in out if p in gits]
    return Grants(
        writable=out,
        notes=notes,
        private_tmp_under=private_tmp,
        plain=plain,
        private_cache=pc,
    )


def facts(
    lane_path: str,
    common: str,
    main_ref: str,
    worktree_paths: Sequence[str],
    extra: Sequence[str],
    env: Mapping[str, str],
    roots: Sequence[str] = (),
    lane_id: tuple[str, str] | None = None,
) -> Facts:
    """Facts from the repository's answers (worktree_paths: every worktree of it; roots:
    where lanes are made; lane_id: the repository's slug and the lane's key, which name
    CMD's own cache dir)."""
    lane_real = _real(lane_path)
    common_real = _real(common)
    dotgit = os.path.join(lane_real, ".git")
    from guard import binding
    from guard.git import read_admin  # the lane's to write: a FIFO there never blocks

    try:
        text = read_admin(dotgit)
    except OSError as exc:
        raise SandboxError(f"cannot read {dotgit}: {exc.strerror}") from None
    if not text.startswith("gitdir: "):
        raise SandboxError(f"{dotgit} does not name the lane's git dir")
    admin = text[len("gitdir: ") :].rstrip("\n")
    admin = _real(admin if os.path.isabs(admin) else os.path.join(lane_real, admin))
    if os.path.dirname(admin) != os.path.join(common_real, "worktrees"):
        raise SandboxError(f"the lane's git dir {admin} is not under {common_real}/worktrees")
    # The lane's .git file is the lane's own (writable from inside): it could name another
    # lane's admin dir. git's record there, `gitdir`, points back at the worktree that owns
    # it, and only the owner of that lane could have written it.
    try:
        back = read_admin(os.path.join(admin, "gitdir")).rstrip("\n")
    except OSError as exc:
        raise SandboxError(f"cannot read {admin}/gitdir: {exc.strerror}") from None
    if _real(back if os.path.isabs(back) else os.path.join(admin, back)) != _real(dotgit):
        raise SandboxError(
            f"{dotgit} names the git dir {admin}, which belongs to another worktree ({back})"
        )
    protected = [_real(p) for p in worktree_paths if _real(p) != lane_real]
    protected.append(common_real)
    tmp = _real(env.get("TMPDIR") or "/tmp")
    home = env.get("HOME") or os.path.expanduser("~")
    # `~/.codex` is the user's (exec's HOME); anything else must be absolute
    extra = [home + e[1:] if e == "~" or e.startswith("~/") else e for e in extra]
    cache = _real(env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"))
    code = [os.path.dirname(os.path.abspath(__file__))]  # the guard package
    code += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.executable]
    if site.ENABLE_USER_SITE:  # its .pth files run in every python the owner starts
        code.append(site.getusersitepackages())
    code += [env.get(binding.PYPATH, ""), env.get(binding.PYTHON, "")]
    code.append(env.get("PRE_COMMIT_HOME") or os.path.join(cache, "pre-commit"))
    return Facts(
        lane_path=lane_real,
        admin_dir=admin,
        common=common_real,
        main_ref=main_ref,
        protected=protected,
        tmp=tmp,
        cache=cache,
        extra=list(extra),
        roots=sorted(
            {
                _real(r)
                for r in [*roots, os.path.join(cache, "git-lane"), os.path.join(cache, CODEX_TMP)]
            }
        ),
        private_cache=private_cache(cache, *lane_id) if lane_id else "",
        code=sorted({_real(c) for c in code if c and os.path.isabs(c)}),
    )


def grants(repo: Repo, rec: LaneRecord, env: Mapping[str, str] | None = None) -> Grants:
    """The grants for lane `rec` of `repo` (raises SandboxError / BadGrant)."""
    return decide(lane_facts(repo, rec, env))


def lane_facts(
    repo: Repo,
    rec: LaneRecord,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] | None = None,
) -> Facts:
    """The facts grants() decides from for lane `rec` of `repo` (`extra`: the
    `sandbox_writable` entries, the repository's own when None). Raises SandboxError."""
    from guard import git

    if git.worktree_config_on(repo.common_dir):
        cq = git.q(repo.common_dir)
        raise SandboxError(
            "extensions.worktreeConfig is on in the repository's config: git would read the "
            "lane's own config.worktree (in its admin dir, which CMD can write) in the "
            "owner's git calls outside the sandbox, and a program it names would run there",
            next=[f"git -C {cq} config --unset extensions.worktreeConfig"],
        )
    wts = [w.path for w in repo.worktrees()]
    if extra is None:
        extra = repo.config["sandbox_writable"]
    from guard import lane
    from guard.errors import Refusal

    try:
        roots = [str(lane.worktrees_root(repo))]
    except Refusal as r:  # an invalid worktrees_root: nothing can be decided
        raise SandboxError(r.message) from None
    return facts(
        rec.path,
        str(repo.common_dir),
        repo.main_ref,
        wts,
        extra,
        os.environ if env is None else env,
        roots,
        (repo.slug, rec.key),
    )


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


def _open_grant(path: str) -> int | None:
    """An O_PATH fd of `path`, which must be exactly what it names: absolute, no symlink
    on the way (the kernel's own name for the opened file, /proc/self/fd, must be
    `path`: a grant that is a symlink, or was swapped for one since it was decided, is
    refused). None when it does not exist (nothing to grant); SandboxError when it
    cannot be opened or its name cannot be read."""
    if not os.path.isabs(path):
        raise SandboxError(f"the grant {path} is not an absolute path")
    try:
        pfd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SandboxError(f"cannot open {path}: {exc.strerror}") from None
    try:
        actual: str | None = os.readlink(f"/proc/self/fd/{pfd}")
        if stat.S_ISLNK(os.fstat(pfd).st_mode):
            actual = f"a symlink to {os.readlink(path)}"
    except OSError:
        actual = None
    if actual != path:
        os.close(pfd)
        raise SandboxError(
            f"the grant {path} is not what it names"
            + (f" (it is {actual}: a symlink, or moved)" if actual else " (/proc cannot say)")
        )
    return pfd


def _rights(g: Grants, path: str, rights: int) -> int:
    """The rights granted on writable `path`: all, but SPECIALS and REFER in git's own
    directories (g.plain) and anything in them (the lane's store too, which exec adds
    again: a Landlock rule follows the inode, and a same-directory rename needs no REFER,
    so a store keeping REFER could be renamed to any name in the admin dir, red team 13U)."""
    real = _real(path)
    if any(_encloses(_real(p), real) for p in g.plain):
        return rights & ~(SPECIALS | REFER)
    return rights


def _rules(g: Grants, extra_writable: Sequence[str], rights: int) -> list[tuple[str, int, int]]:
    """(path, fd, rights) of every rule for `g`: what prepare() grants and --explain and
    doctor list. The caller closes the fds."""
    out: list[tuple[str, int, int]] = []
    try:
        for path, allowed in [
            *((r, READ) for r in g.readable),
            *((w, _rights(g, w, rights)) for w in [*g.writable, *extra_writable]),
        ]:
            pfd = _open_grant(path)
            if pfd is None:
                continue
            out.append((path, pfd, allowed))
            if not stat.S_ISDIR(os.fstat(pfd).st_mode):
                out[-1] = (path, pfd, allowed & FILE_RIGHTS)
    except BaseException:
        for _, pfd, _ in out:
            os.close(pfd)
        raise
    return out


def granted(g: Grants, extra_writable: Sequence[str] = ()) -> list[str]:
    """The writable paths prepare() would grant (those of g that exist), checked as it
    checks them (raises SandboxError where it would)."""
    rules = _rules(g, extra_writable, handled(MIN_ABI))
    for _, pfd, _ in rules:
        os.close(pfd)
    writable = {*g.writable, *extra_writable}
    return [p for p, _, _ in rules if p in writable]


def prepare(g: Grants, extra_writable: Sequence[str] = ()) -> Prepared:
    """Build the ruleset for `g` (and `extra_writable`: the private temp dir, a clean gate
    worktree). Paths that do not exist are left out (nothing to grant); raises
    SandboxError when a path cannot be opened or is not what it names, or the kernel
    refuses a step."""
    ver = abi()
    why = usable(ver)
    if why:
        raise SandboxError(why)
    create, add, _ = _NR[platform.machine()]
    libc = _libc()
    rights = handled(ver)
    attr = _RulesetAttr(handled_access_fs=rights, scoped=scoped(ver))
    size = ctypes.sizeof(attr) if ver >= SCOPE_ABI else 8  # an older kernel: fs rights only
    fd = libc.syscall(ctypes.c_long(create), ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if fd < 0:
        raise SandboxError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    granted: list[str] = []
    try:
        rules = _rules(g, extra_writable, rights)
        try:
            for path, pfd, allowed in rules:
                rule = _PathBeneath(allowed_access=allowed & rights, parent_fd=pfd)
                res = libc.syscall(
                    ctypes.c_long(add), ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH),
                    ctypes.byref(rule), ctypes.c_uint32(0),
                )  # fmt: skip
                if res != 0:
                    err = ctypes.get_errno()
                    raise SandboxError(f"landlock_add_rule {path}: {os.strerror(err)}")
                granted.append(path)
        finally:
            for _, pfd, _ in rules:
                os.close(pfd)
    except BaseException:
        os.close(fd)
        raise
    return Prepared(fd, ver, granted)
