"""Files a sandboxed lane may write that git reads whole, held to a size (red team 14G F7).

`exec --sandbox` grants the lane refs (`refs/heads/lane/`, every lane's, and their
reflogs in `logs/refs/heads/lane/`) and the lane's admin dir (`worktrees/<id>/`). git
reads a loose ref, `HEAD` and the pseudo-refs whole into memory (strbuf_read), and a
reflog a line at a time: a sparse file (`truncate -s 20G refs/heads/lane/x`, no disk
used) makes every `git branch`, `for-each-ref`, `log --all`, `gc`, `worktree list` the
owner runs read it to the end (memory exhaustion). Such a file was never written by git:

- REF_MAX (4 KiB) for a ref's value: a loose ref is an object name and a newline (41 or 65
  bytes), a symbolic one `ref: ` and a name (a path under the git dir: PATH_MAX is 4096);
  `gitdir`, `commondir`, the rebase's `head-name`, `onto`, `orig-head`, `BISECT_START`
  are one path or name (`locked`, a reason the owner types, gets LOCKED_MAX). It is also the most git-lane's own readers take of a ref file (loose_symbolic,
  head_takes): nothing lies between what they refuse and what is moved here;
- LOG_MAX (64 MiB) for a file of lines: a reflog entry is about 150-300 bytes, so 64 MiB
  is a quarter of a million ref moves, more than any lane makes; `FETCH_HEAD` (a line per
  fetched ref) and `locked` (a reason the owner types) too. git reads these a line at a
  time, so no git call holds more than that in memory.

Each file under its bound, a lane may still make them by the thousand: what is no lane's
own (not a lane's branch's loose ref or reflog, not main's, not an admin dir's HEAD reflog)
is held to STRAY_MAX entries and STRAY_LOG_MAX bytes (`git gc` reads every reflog, of every
worktree; every `git branch` every loose ref), the largest moved first, each entry at the
top of those directories whole (_Tally, counted in the same listing and lstat), in pools
of their own: the lane refs and their reflogs (every lane's: the shared pool), and each
admin dir's `refs/` and `logs/` (under the sandbox, only its own lane writes there). One
lane's bulk never moves another lane's per-worktree refs (`refs/worktree/`, `refs/bisect/`,
`refs/rewritten/`: the only ref to a commit, which gc then drops; red team 15C F3,
tests/test_oversize_pools.py).

Nor is anything under the lane refs or their reflogs that is no regular file nor
directory (a FIFO git's open blocks on, a link it reads through, to /dev/zero or /usr):
such an entry is moved as a grown file is (_odd, red team 15A F6; in an admin dir, each is
admin_unreadable's). So is a FIFO, socket, device or link to one anywhere else under
refs/heads/ (but main's name: Repo.ref_file_blocks refuses it) and under refs/git-lane/ (a
landed ref: reconcile writes it back), which only a process outside the sandbox can make,
and which git-lane's own look for main and the landed refs would wait on for ever
(_blocking_refs, red team 15C F2).

The index is not held to one: git maps it and reads what its header says (no checksum
pass on read), so a sparse one costs nothing. Nor is the lane's object store (its reads
are bounded, guard/objects.py), nor the rest of the rebase state (read by git in that
lane only, which the lane could fill at will anyway).

`set_aside(repo)` finds them (a directory listing and an lstat per file: no process, no
read; about 1.4 ms with 50 lanes) and moves each into git-lane's `kept/` (a rename through
directory fds, never a copy, never a delete): every engine command's first step
(guard/cli.py), doctor's first check, and exec's when CMD ends (while CMD runs, exec's
absorb skips a branch whose ref is too big: ref_oversized). Standard library and the
engine's own modules only."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard import dirfd, policy
from guard.repo import symlink_ref
from guard.errors import Refusal

if TYPE_CHECKING:
    from guard.repo import Repo
    from guard.store import LaneRecord

REF_MAX = 4096
LOG_MAX = 64 << 20
# `locked`, a reason the owner types, is read whole by every worktree listing (worktree.c),
# of every worktree: held to far less than a reflog, far more than anyone types
LOCKED_MAX = 64 << 10
# how deep the lane refs and an admin dir's refs/ and logs/ are looked into (git.ADMIN_DEPTH)
DEPTH = 24
# what a lane may make in bulk, each file under its bound, in each pool (_pool: the lane
# refs and their reflogs; each admin dir's refs/ and logs/): the entries (files and
# directories) that are no lane's own (its branch's loose ref and reflog, an admin dir's
# HEAD reflog), and their bytes together (`git gc` and `reflog expire --all` read every
# reflog; every `for-each-ref`, `git branch` every loose ref)
STRAY_MAX = 256
STRAY_LOG_MAX = LOG_MAX
_LANE_ROOTS = ("refs/heads/lane", "logs/refs/heads/lane")
# the entries an oversized_kept event names (what was moved, what could not be)
EVENT_MAX = 1000

# the top of an admin dir: what git reads whole, and its bound
_ADMIN_TOP = {
    **dict.fromkeys(
        (
            "HEAD",
            "ORIG_HEAD",
            "MERGE_HEAD",
            "CHERRY_PICK_HEAD",
            "REVERT_HEAD",
            "AUTO_MERGE",
            "BISECT_HEAD",
            "BISECT_EXPECTED_REV",
            "REBASE_HEAD",
            "BISECT_START",  # (a branch name: every worktree listing's get_branch reads it)
            "gitdir",
            "commondir",
        ),
        REF_MAX,
    ),
    "FETCH_HEAD": LOG_MAX,
    "locked": LOCKED_MAX,
    # git-lane's lane marker (lane.KEY_FILE): every hook reads it a byte at a time (sh's
    # `read`), so a sparse 20 GB one held the owner's `git lane checkpoint` an hour (red
    # team 16A F1); written back from the lane's record (_heads_back)
    "gitlane-lane": REF_MAX,
}
# the directories of an admin dir: how deep, and the bound of their files (the rebase
# state: what every worktree list and `git branch` read of every worktree)
_REBASE_FILES = dict.fromkeys(("head-name", "onto", "orig-head"), REF_MAX)
_ADMIN_DIRS: tuple[tuple[str, int, int | dict[str, int]], ...] = (
    ("refs", DEPTH, REF_MAX),
    ("logs", DEPTH, LOG_MAX),
    ("rebase-merge", 0, _REBASE_FILES),
    ("rebase-apply", 0, _REBASE_FILES),
)


def bound(rel: str) -> int | None:
    """The size a file at `rel` (relative to the common dir) is held to here, None where
    none is (the index, an object, a submodule's git dir): what set_aside() moves past it.
    guard/linked.py copies no more than this of a file it splits."""
    parts = os.path.normpath(rel).split("/")
    for root, limit in zip(_LANE_ROOTS, (REF_MAX, LOG_MAX), strict=True):
        n = root.count("/") + 1
        if parts[:n] == root.split("/") and len(parts) > n:
            return limit
    if len(parts) < 3 or parts[0] != "worktrees":
        return None
    if len(parts) == 3:
        return _ADMIN_TOP.get(parts[2])
    for sub, depth, bounds in _ADMIN_DIRS:
        if parts[2] == sub and len(parts) - 4 <= depth:
            return bounds if isinstance(bounds, int) else bounds.get(parts[-1])
    return None


@dataclass(frozen=True)
class Oversized:
    """A file larger than its bound: `rel` under the common dir; or (`deep`) a directory
    deeper than the scan looks (DEPTH levels), where git reads refs at any depth."""

    rel: str
    size: int
    bound: int
    deep: bool = False
    unlisted: bool = False  # a directory that could not be listed, even with its owner's bits
    entries: int = 0  # bulk: one of what a lane made past STRAY_MAX / STRAY_LOG_MAX (_Tally)
    odd: str = ""  # neither a file nor a directory (_ODD): git would open it, or follow it

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"file": self.rel, "size": self.size, "bound": self.bound}
        d = {**d, "deep": True} if self.deep else d
        d = {**d, "bulk": True, "entries": self.entries} if self.entries else d
        d = {**d, "odd": self.odd} if self.odd else d
        return {**d, "unlisted": True} if self.unlisted else d


class _Tally:
    """What the scan saw under the lane refs and each admin dir's refs/ and logs/ (the
    roots, in pools: _pool): bytes and entries (files and directories) by unit, an entry
    at the top of a root with all that lies under it (a lane's branch is one file there:
    keys hold no `/`; a directory in its name is no lane's own). An admin dir's
    `logs/HEAD` file is left out: git writes it, repair reads it, and LOG_MAX holds it."""

    def __init__(self) -> None:
        # by root, by the name of the unit at its top: [bytes, entries]
        self.units: dict[str, dict[str, list[int]]] = {}
        self.touched: set[tuple[str, str]] = set()  # a file in it moved on its own
        # units that are a directory: never a lane's branch (one file), whatever their name
        self.dirs: set[tuple[str, str]] = set()

    def root(self, top: str) -> dict[str, list[int]]:
        return self.units.setdefault(top, {})

    def drop(self, o: Oversized) -> None:
        """`o` was moved on its own (a file past its bound, a directory too deep)."""
        for root, names in self.units.items():
            if o.rel.startswith(root + "/"):
                name = o.rel[len(root) + 1 :].partition("/")[0]
                u = names.get(name)
                if u is not None:
                    u[0] -= o.size
                    u[1] -= 1
                    self.touched.add((root, name))
                return

    def pools(self) -> dict[str, dict[tuple[str, str], list[int]]]:
        """The units by pool (_pool): the shared lane refs, and each admin dir's own."""
        out: dict[str, dict[tuple[str, str], list[int]]] = {}
        for r, names in self.units.items():
            pool = out.setdefault(_pool(r), {})
            pool.update({(r, n): u for n, u in names.items()})
        return out

    def over(self) -> bool:
        """A pool past a bound even counting the lanes' own: only then is the store read."""
        for units in self.pools().values():
            if sum(u[1] for u in units.values()) > STRAY_MAX:
                return True
            if sum(u[0] for u in units.values()) > STRAY_LOG_MAX:
                return True
        return False

    def strays(self, repo: Repo) -> list[Oversized]:
        """The units to move, each whole, pool by pool (_pool), the largest of each first (in
        bytes while its bytes are past their bound, then in entries), until what is no
        lane's own in it is back within STRAY_LOG_MAX bytes and STRAY_MAX entries. What
        one pool holds never moves a unit of another (red team 15C F3: a lane's 256 refs
        under refs/heads/lane/ moved another lane's refs/worktree/, the only ref to a
        commit, and gc dropped it). For the entries, a file in the name of any lane
        git-lane has a record of (a listing of the store) is its own; for the bytes, only
        a lane's that is not released (its record read, only when the bytes of the shared
        pool are past the bound: the common case reads no record)."""
        out: list[Oversized] = []
        for pool, units in sorted(self.pools().items()):
            every = {k: v for k, v in units.items() if v[1] > 0}
            if pool:  # an admin dir: nothing in it is a lane's branch
                out += _over(every, set(), set())
                continue
            keep = {k for k in every if k not in self.dirs} & _own(repo, read=False)
            own = keep
            if sum(v[0] for v in every.values()) > STRAY_LOG_MAX:
                own = keep & _own(repo, read=True)
            out += _over(every, keep, own)
        return out


def _pool(root: str) -> str:
    """Whose a root of _Tally is: "" for the lane refs and their reflogs (every lane's, and
    the owner's), `worktrees/<id>` for that admin dir's refs/ and logs/ (under the sandbox
    only its own lane writes there)."""
    parts = root.split("/")
    return "/".join(parts[:2]) if parts[0] == "worktrees" else ""


def _over(
    every: dict[tuple[str, str], list[int]], keep: set[tuple[str, str]], own: set[tuple[str, str]]
) -> list[Oversized]:
    """The units of one pool (`every`) to move, the largest first, until what is neither
    `own` (in bytes) nor `keep` (in entries) is within the bounds."""
    size = sum(v[0] for k, v in every.items() if k not in own)
    count = sum(v[1] for k, v in every.items() if k not in keep)
    by_size = sorted((k for k in every if k not in own), key=lambda k: (-every[k][0], k))
    by_count = sorted((k for k in every if k not in keep), key=lambda k: (-every[k][1], k))
    out: list[Oversized] = []
    taken: set[tuple[str, str]] = set()
    while size > STRAY_LOG_MAX or count > STRAY_MAX:
        order = by_size if size > STRAY_LOG_MAX else by_count
        k = next((k for k in order if k not in taken), None)
        if k is None:
            break  # (never: what is counted can be moved)
        taken.add(k)
        s, c = every[k]
        size -= s if k not in own else 0
        count -= c if k not in keep else 0
        out.append(Oversized(f"{k[0]}/{k[1]}", s, STRAY_LOG_MAX, entries=c))
    return out


def _size(dfd: int, name: str) -> int | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False).st_size
    except OSError:
        return None  # gone since it was listed


def _big(dfd: int, here: str, name: str, bound: int) -> Oversized | None:
    size = _size(dfd, name)
    if size is None or size <= bound:
        return None
    return Oversized(os.path.normpath(f"{here}/{name}"), size, bound)


_ODD = {stat.S_IFLNK: "symlink", stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket"}


def _odd(dfd: int, here: str, name: str) -> Oversized | None:
    """What lies at `name` when it is no regular file nor directory (lstat: never followed),
    None when it is one of them (or gone): a FIFO git's open blocks on for ever, a link
    git reads through (to /dev/zero: to the end), or walks (to /usr), a socket, a device.
    git-lane never makes one there (its git runs with core.preferSymlinkRefs=false), and
    one git made as a symbolic ref (preferSymlinkRefs=true in a lane) goes as well: a
    link's target cannot be held to a bound by its lstat. Under the lane refs and their
    reflogs only: in an admin dir each is admin_unreadable's already (every command that
    lists the worktrees refuses it, reconcile's mend unlinks it, or names the chattr
    that stops it)."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    odd = _ODD.get(stat.S_IFMT(st.st_mode), "device")
    return Oversized(os.path.normpath(f"{here}/{name}"), 0, 0, odd=odd)  # (the tally's 0)


def _found(
    common: str,
    rel: str,
    depth: int,
    bounds: int | dict[str, int],
    tally: _Tally | None = None,
    own: str = "",
) -> Iterator[tuple[int, str, Oversized]]:
    """(an fd on its directory, its name, what it is) for each regular file under
    `common/rel` (its top only: `depth` 0) larger than `bounds` (a dict: only the names
    it holds, each to its own bound), and each entry there that is neither a file nor a
    directory (_odd: a FIFO, a link, ...; not in an admin dir); and, `depth` > 0, each
    directory just past `depth` levels, which the scan does not look into and git reads
    refs in all the same (no
    ref a lane or git-lane makes is so deep: it goes whole, as one file does). A directory
    the lane made unlistable (chmod 0100: git opens a file in it by name all the same) gets
    its owner's read and search bits back first; one that still cannot be listed is
    yielded `unlisted` (fd -1): never taken for "nothing there". With `tally`, every
    entry is counted into it (its size for a file) but `own` at the top (logs/HEAD)."""
    top = os.path.normpath(rel)
    admin = top.startswith("worktrees/")  # its FIFOs and links: admin_unreadable's (_odd)
    refused: list[str] = []
    counts = tally.root(top) if tally is not None else None
    try:
        for here, dfd, entries in dirfd.scan(common, rel, depth, refused=refused, restore=True):
            level = 0 if here == top else here[len(top) + 1 :].count("/") + 1
            unit = "" if here == top else here[len(top) + 1 :].partition("/")[0]
            for name, kind in entries:
                size = 0
                bound = bounds if isinstance(bounds, int) else bounds.get(name)
                if depth > 0 and level == depth and kind == stat.S_IFDIR:
                    yield dfd, name, Oversized(os.path.normpath(f"{here}/{name}"), 0, 0, True)
                elif kind == stat.S_IFREG and bound is not None:
                    got = _size(dfd, name)
                    if got is None:
                        continue  # gone since it was listed
                    size = got
                    if size > bound:
                        yield dfd, name, Oversized(os.path.normpath(f"{here}/{name}"), size, bound)
                elif kind != stat.S_IFDIR and bound is not None and not admin:
                    o = _odd(dfd, here, name)
                    if o is not None:
                        yield dfd, name, o
                if counts is None or (not level and name == own and kind == stat.S_IFREG):
                    continue
                u = counts.get(unit or name)
                if u is None:
                    counts[unit or name] = [size, 1]
                    if not level and kind != stat.S_IFREG and tally is not None:
                        tally.dirs.add((top, name))
                else:
                    u[0] += size
                    u[1] += 1
    except (FileNotFoundError, NotADirectoryError):
        return  # not there, or no directory: nothing git reads as one
    except OSError:
        refused.append(top)
    for r in refused:
        yield -1, os.path.basename(r), Oversized(r, 0, 0, unlisted=True)


def _listed(common: str, name: str) -> list[tuple[str, int]]:
    """The entries of `common/name`, its owner's read and search bits given back first
    when a lane took them (chmod: every admin dir is below it)."""
    cfd, _ = dirfd.walk(common)
    try:
        dfd = dirfd.open_dir(cfd, name, 0o500)
    finally:
        os.close(cfd)
    try:
        return dirfd.listing(dfd)
    finally:
        os.close(dfd)


def _root_odd(common: str, rel: str) -> Iterator[tuple[int, str, Oversized]]:
    """`common/rel` itself when it is no directory (_odd): a process of a lane under plain
    exec may replace all of refs/heads/lane/ with a FIFO (git lists refs/heads/ and opens
    it as a ref) or a link (followed, to /usr); the scan would not go into it."""
    where, name = os.path.split(rel)
    try:
        pfd, _ = dirfd.walk(common, where)
    except OSError:
        return  # not there: nothing git reads; refused on the way: the scan says so
    try:
        o = _odd(pfd, where, name)
        if o is not None:
            yield pfd, name, o
    finally:
        os.close(pfd)


def _blocking(dfd: int, name: str) -> str:
    """What lies at `name` in `dfd` when git's open of it would wait for ever or read
    without end (a FIFO, a socket, a device, or a link to one: its kind), "" otherwise (a
    file, a directory, nothing, a link git takes for a symbolic ref, one that leads
    nowhere). lstat, and stat through a link: never opened."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            if symlink_ref(os.readlink(name, dir_fd=dfd)):
                return ""
            if stat.S_ISREG((to := os.stat(name, dir_fd=dfd)).st_mode) or stat.S_ISDIR(to.st_mode):
                return ""
            return "symlink"
    except OSError:
        return ""
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return ""
    return _ODD.get(stat.S_IFMT(st.st_mode), "device")


def _blocking_refs(common: str, mains: set[str]) -> Iterator[tuple[int, str, Oversized]]:
    """Each entry under refs/git-lane/ (the landed refs, the baseline) and refs/heads/ (but
    the lane refs, scanned on their own, and main's names, `mains`: Repo.ref_file_blocks
    refuses those) that git's open would wait on for ever or read without end (_blocking:
    a FIFO a same-user process outside the sandbox made with mkfifo; red team 15C F2).
    git-lane's own look for main lists every loose ref under refs/heads/, and every land
    and doctor every landed ref. It holds no commit: moved as _odd is (a landed ref is
    written back by reconcile, vouched by its land event: restores). A listing (the
    kind of each entry), a stat only for what is no file nor directory."""
    for rel, skip in (("refs/git-lane", frozenset[str]()), ("refs/heads", frozenset({"lane"}))):
        try:
            for here, dfd, entries in dirfd.scan(common, rel, DEPTH, skip=skip):
                for name, kind in entries:
                    if kind in (stat.S_IFREG, stat.S_IFDIR):
                        continue
                    path = f"{here}/{name}"
                    if path in mains or (here == "refs/heads" and name == "lane"):
                        continue  # (refs/heads/lane itself no directory: _root_odd's)
                    odd = _blocking(dfd, name)
                    if odd:
                        yield dfd, name, Oversized(path, 0, 0, odd=odd)
        except OSError:
            continue  # not there, or not listable: git's open fails there too, never waits


def _mains(repo: Repo) -> set[str]:
    try:
        configured = repo.owner_config.get("main_branch")
    except Refusal:
        configured = None
    names = [configured] if isinstance(configured, str) and configured else ["main", "master"]
    return {f"refs/heads/{n}" for n in names}


def _each(
    common: str, tally: _Tally | None = None, mains: set[str] | None = None
) -> Iterator[tuple[int, str, Oversized]]:
    if mains is not None:
        yield from _blocking_refs(common, mains)
    for root in _LANE_ROOTS:
        yield from _root_odd(common, root)
    yield from _found(common, "refs/heads/lane", DEPTH, REF_MAX, tally)
    yield from _found(common, "logs/refs/heads/lane", DEPTH, LOG_MAX, tally)
    try:
        ids = sorted(n for n, kind in _listed(common, "worktrees") if kind == stat.S_IFDIR)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError:
        yield -1, "worktrees", Oversized("worktrees", 0, 0, unlisted=True)
        return
    for wid in ids:
        admin = f"worktrees/{wid}"
        dirs: set[str] = set()
        try:
            for here, dfd, entries in dirfd.scan(common, admin, 0, restore=True):  # a listing
                for name, kind in entries:
                    if kind == stat.S_IFDIR:
                        dirs.add(name)
                    elif kind == stat.S_IFREG and name in _ADMIN_TOP:
                        o = _big(dfd, here, name, _ADMIN_TOP[name])
                        if o is not None:
                            yield dfd, name, o
        except (FileNotFoundError, NotADirectoryError):
            continue  # gone (a release), or no directory
        except OSError:
            yield -1, wid, Oversized(admin, 0, 0, unlisted=True)
            continue
        for sub, depth, bounds in _ADMIN_DIRS:
            if sub in dirs:
                # refs/ and logs/ are counted (git reads every worktree's per-worktree refs
                # and reflogs: gc, reflog expire --all), but its HEAD reflog
                counted = tally if sub in ("refs", "logs") else None
                own = "HEAD" if sub == "logs" else ""
                yield from _found(common, f"{admin}/{sub}", depth, bounds, counted, own)


@dataclass(frozen=True)
class Moved:
    """What set_aside() did: `moved` (each with `kept`, where it is now), `failed` (each
    with `why`), and `kept` the kept/ directory they went to ("" when none)."""

    moved: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    kept: str = ""


def set_aside(repo: Repo) -> Moved:
    """Move every oversized file (scan) into a new directory of git-lane's kept/, at its
    path under the common dir: a rename through the fd of the directory it was listed in
    (a directory the lane made unwritable gets its owner's write bit back first, and a
    directory moved whole its own: its `..` changes), never a
    copy (it may be 20 GB), never a delete. Then, when what a lane made in bulk under the
    lane refs, or in one admin dir's refs/ and logs/, is past STRAY_MAX entries or
    STRAY_LOG_MAX bytes (_Tally, each pool on its own: no lane's own branch, main, nor an
    admin dir's HEAD reflog), the largest of it, each top entry whole (a file, or a
    directory with all in it), the same way. Nothing found: nothing made, no event."""
    common = os.fspath(repo.common_dir)
    moved: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    kept = repo.kept_dir("oversized")
    tally = _Tally()
    with _Into(common, kept) as into:
        for dfd, name, o in _each(common, tally, _mains(repo)):
            if into.move(dfd, name, o, moved, failed):
                tally.drop(o)
        if tally.over():
            strays = tally.strays(repo)
            again = [o for o in strays if _unit(o) in tally.touched]
            with _Into(common, repo.kept_dir("oversized")) as other:
                for o in strays:
                    (other if o in again else into).move_whole(o, moved, failed)
    _heads_back(repo, moved)
    if moved or failed:
        # one line, however many a lane made (100,000 flat refs: each its own entry); the
        # rest lie at their paths in kept/ all the same
        more = max(0, len(moved) - EVENT_MAX) + max(0, len(failed) - EVENT_MAX)
        said: dict[str, Any] = {"moved": moved[:EVENT_MAX], "failed": failed[:EVENT_MAX]}
        if more:
            said["more"] = more
        repo.store.event("oversized_kept", code="kept", **said)
    repo.oversized_kept.extend(moved)
    return Moved(moved, failed, str(kept) if moved else "")


def _own(repo: Repo, read: bool) -> set[tuple[str, str]]:
    """The units of _Tally named for a lane's branch (its loose ref and reflog), and for
    main when it is configured under lane/ (exec --sandbox refuses that): with `read`,
    only the lanes whose record is not released (an orphaned lane's branch still holds
    its work; a record that cannot be read counts by its key: never taken for no lane),
    else every record's key (a listing). A store that cannot be listed refuses (never
    "no lane")."""
    names: set[str] = set()
    for key in repo.store.lane_keys():
        rec = repo.store.read_lane(key) if read else None
        if rec is not None and rec.status == "released":
            continue
        names.add(rec.branch if rec is not None else f"lane/{key}")
    main = repo.owner_config.get("main_branch")  # (main and master lie outside lane/)
    if isinstance(main, str):
        names.add(main)
    tops = {b[len("lane/") :].partition("/")[0] for b in names if b.startswith("lane/")}
    return {(root, t) for root in _LANE_ROOTS for t in tops}


def _unit(o: Oversized) -> tuple[str, str]:
    root, _, name = o.rel.rpartition("/")
    return root, name


class _Into:
    """Moves into one kept/ directory, each at its path there (its directories made once,
    their fds kept until the end)."""

    def __init__(self, common: str, kept: Path) -> None:
        self.common = common
        self.kept = kept
        self.fds: dict[str, int] = {}

    def __enter__(self) -> _Into:
        return self

    def __exit__(self, *_: object) -> None:
        for fd in self.fds.values():
            os.close(fd)

    def move(
        self,
        dfd: int,
        name: str,
        o: Oversized,
        moved: list[dict[str, Any]],
        failed: list[dict[str, Any]],
    ) -> bool:
        """Rename `name` in `dfd` (`o`) into kept/; True when it is there now."""
        if o.unlisted:
            failed.append({**o.to_dict(), "why": "its owner may not list it"})
            return False
        dest = os.path.join(os.path.relpath(self.kept, self.common), o.rel)
        try:
            kfd = self._fd_made(os.path.dirname(dest))
        except OSError as exc:
            failed.append({**o.to_dict(), "why": exc.strerror or str(exc)})
            return False
        move = partial(os.rename, name, name, src_dir_fd=dfd, dst_dir_fd=kfd)
        done = dirfd.owner_may(dfd, move)
        if not done and (o.deep or o.entries) and dirfd.give_owner(dfd, name, 0o200):
            # a directory moved to another parent needs its own write bit (its `..`)
            done = dirfd.owner_may(dfd, move)
        there = done and _exists(kfd, name)  # owner_may: True when it went meanwhile
        if there:
            moved.append({**o.to_dict(), "kept": str(self.kept / o.rel)})
        elif not done:
            failed.append({**o.to_dict(), "why": "it cannot be renamed out of its directory"})
        return there

    def _fd_made(self, rel: str) -> int:
        fd = self.fds.get(rel)
        if fd is None:
            fd, _ = dirfd.walk(self.common, rel, create=True)
            self.fds[rel] = fd
        return fd

    def move_whole(
        self, o: Oversized, moved: list[dict[str, Any]], failed: list[dict[str, Any]]
    ) -> None:
        """Move a unit of _Tally, from its root (reached from the common dir as walk does)."""
        root, name = _unit(o)
        try:
            sfd = self.fds.get(root)
            if sfd is None:
                sfd, _ = dirfd.walk(self.common, root)
                self.fds[root] = sfd
        except OSError as exc:
            failed.append({**o.to_dict(), "why": exc.strerror or str(exc)})
            return
        self.move(sfd, name, o, moved, failed)


def _exists(dfd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _active(repo: Repo) -> tuple[dict[str, LaneRecord], dict[str, str]]:
    """The active lanes by their admin dir (relative to the common dir, from their
    records) and their keys by their branch's ref."""
    try:
        recs = [r for r in repo.store.lanes() if r.status == "active"]
    except Refusal:
        recs = []
    common = os.path.realpath(repo.common_dir)
    admins: dict[str, LaneRecord] = {}
    for r in recs:
        admin = repo.store.admin_dir(r)
        if admin is None and r.admin and "/" not in r.admin and r.admin not in (".", ".."):
            # its `gitdir` was among what was moved (store.admin_dir takes no directory
            # without one): the recorded one, a plain directory under worktrees/, is still
            # the lane's (red team 16C F4: its HEAD was then never written back)
            d = os.path.join(common, "worktrees", r.admin)
            try:
                plain = stat.S_ISDIR(os.lstat(d).st_mode)
            except OSError:
                plain = False
            admin = Path(d) if plain else None
        if admin is not None:
            admins[os.path.relpath(os.path.realpath(admin), common)] = r
    return admins, {f"refs/heads/{r.branch}": r.key for r in recs}


def _heads_back(repo: Repo, moved: list[dict[str, Any]]) -> None:
    """An active lane's HEAD that was moved is written back naming its branch, from its
    record (as reconcile's mend does: git calls a worktree with no HEAD "not a git
    repository", and every command that lists the worktrees refuses it). Through the
    admin dir's fd; `head` in the moved entry says what was written ("" when it could
    not be: reconcile then does)."""
    names = ("HEAD", "gitlane-lane")
    heads = [m for m in moved if str(m["file"]).rpartition("/")[2] in names]
    if not heads:
        return
    admins, _ = _active(repo)
    for m in heads:
        where, _, name = str(m["file"]).rpartition("/")
        rec = admins.get(where)
        if rec is None:
            continue
        text = f"ref: refs/heads/{rec.branch}\n" if name == "HEAD" else f"{rec.key}\n"
        try:
            afd, _ = dirfd.walk(os.fspath(repo.common_dir), where)
            try:
                dirfd.replace(afd, name, [text.encode()])
            finally:
                os.close(afd)
            m["head"] = text.rstrip("\n")
        except OSError:
            m["head"] = ""


def restores(repo: Repo, moved: list[dict[str, Any]]) -> list[str]:
    """The commands that put back what moving `moved` took from an active lane: its branch
    (`repair KEY`: back at the commit its worktree last had checked out, from its HEAD
    reflog), its admin dir's `gitdir` or `commondir` (`repair KEY` writes them), a `HEAD`
    that could not be written back (`reconcile` writes it, first: every other command
    refuses admin_unreadable until then); and a landed ref or the baseline
    (`reconcile`, from the land event that vouches for it). Nothing for a reflog or a pseudo-ref: git runs
    without them, and the kept file holds what they said."""
    admins, branches = _active(repo)
    head, keys = False, list[str]()
    for m in moved:
        rel = str(m["file"])
        if rel.startswith("refs/git-lane/"):
            head = True  # a landed ref or the baseline: reconcile writes it back
        where, _, name = rel.rpartition("/")
        key = branches.get(rel)
        if rel == _LANE_ROOTS[0]:  # all of refs/heads/lane/ (_root_odd): every branch
            keys += [
                k
                for r, k in branches.items()
                if r.startswith(rel + "/") and policy.valid_key(k) and k not in keys
            ]
        if key is None and name in ("gitdir", "commondir") and where in admins:
            key = admins[where].key
        if name == "HEAD" and where in admins and not m.get("head"):
            head = True
        if key is not None and policy.valid_key(key) and key not in keys:
            keys.append(key)
    return (["git lane reconcile"] if head else []) + [f"git lane repair {k}" for k in keys]


def shown(d: dict[str, Any]) -> str:
    """One moved (or failed) entry as note() and doctor name it: its name as git shows one
    (a lane chooses it: a newline or a terminal escape in it never reaches the owner's
    terminal raw, red team 16C F3)."""
    f = _n(d["file"])
    if d.get("deep"):
        return f"{f} (a directory deeper than {DEPTH} levels)"
    if d.get("odd"):
        return f"{f} (a {d['odd']}, no file: git would open it or read through it)"
    if d.get("bulk"):
        n = d["entries"]
        return f"{f} ({n} entr{'y' if n == 1 else 'ies'}, {d['size']} bytes)"
    return f"{f} ({d['size']} bytes)"


def _n(rel: object) -> str:
    from guard import git

    return git.shown(str(rel))


def note(m: Moved, fix: list[str]) -> str:
    """One line that says what set_aside() moved, where to, and what puts it back."""
    files = ", ".join(shown(d) for d in m.moved[:5])
    more = f" and {len(m.moved) - 5} more" if len(m.moved) > 5 else ""
    elsewhere = sorted({str(d["kept"])[: -len(str(d["file"])) - 1] for d in m.moved} - {m.kept})
    into = " and ".join([m.kept, *elsewhere])
    bulk = (
        f"; a lane may make as many as it likes, so what is no lane's own branch under the "
        f"lane refs, and in each admin dir's refs/ and logs/, is held to {STRAY_MAX} entries "
        f"and {STRAY_LOG_MAX} bytes there, the largest moved first (git gc reads every "
        "reflog, every git branch every loose ref); one lane's never moves another's"
        if any(d.get("bulk") for d in m.moved)
        else ""
    )
    heads = [_n(d["file"]) for d in m.moved if d.get("head")]
    back = f"; {', '.join(heads)} written back from the lane's record" if heads else ""
    odd = (
        " (a FIFO there blocks every git's open for ever, a link is read through: neither "
        "is a file git or git-lane writes)"
        if any(d.get("odd") for d in m.moved)
        else ""
    )
    then = (
        "; " + " && ".join(fix) + " puts back what a lane needs (a branch at the commit "
        "its worktree last had checked out, from its HEAD reflog)"
        if fix
        else "; nothing else needs putting back"
    )
    return (
        f"moved {files}{more} into {into} (each at its path there){back}: a lane under "
        "exec --sandbox may write them, "
        f"git reads each whole (a ref is at most {REF_MAX} bytes, a reflog {LOG_MAX}), and "
        f"every git would have read it to the end{odd}{bulk}{then}"
    )


def refusal(repo: Repo, m: Moved) -> Refusal:
    """git_file_oversized: what could not be moved (a directory its owner may not list or
    write even with the owner's bits given back through its fd: another user's): nothing
    was done. The `next` is no shell `mv` by path, which a process of the lane can re-point
    (a name on the way swapped for a link to a directory of the owner's between the print
    and the run: the owner's own directory moved into kept/, red team 15A F1b): it is the
    check again (`git lane status`, whose first step moves what it can through directory
    fds), once the user named (by uid) or root removed it or gave it back, then the repair
    of a lane whose branch it was."""
    common = os.fspath(repo.common_dir)
    rels = [str(d["file"]) for d in m.failed]
    fix = restores(repo, m.failed)
    unlisted = [_n(d["file"]) for d in m.failed if d.get("unlisted")]
    odd = [shown(d) for d in m.failed if d.get("odd")]
    what = (
        f"{', '.join(unlisted[:5])} under {common} could not be listed, even with its "
        "owner's read and search bits given back: a file there git reads whole cannot be "
        "ruled out"
        if unlisted
        else f"{', '.join(odd[:5])} under {common} is no file git or git-lane writes there"
        if odd
        else f"{', '.join(map(_n, rels[:5]))} under {common} is larger than any file git writes there "
        f"({REF_MAX} bytes for a ref, {LOG_MAX} for a reflog): git reads it whole"
        if not any(d.get("bulk") for d in m.failed)
        else f"{', '.join(map(_n, rels[:5]))} under {common} is past what a lane may make beside the "
        f"lanes' own branches ({STRAY_MAX} entries and {STRAY_LOG_MAX} bytes under the lane "
        "refs, and as many in each admin dir's refs/ and logs/): git gc reads every reflog"
    )
    others = _strangers(common, rels[:100])
    who = (
        "; "
        + ", ".join(f"{_n(r)} is uid {u}'s" for r, u in list(others.items())[:5])
        + f", not this user's (uid {os.geteuid()}): that user or root must remove it or "
        "give it to this user before the check can move it"
        if others
        else "; nothing on its way is another user's: what stops the rename (an immutable "
        "file, a read-only or full file system) must go before the check can move it"
    )
    return Refusal(
        "git_file_oversized",
        f"{what}, and it could not be moved into kept/ ("
        + str(m.failed[0]["why"])
        + f"); nothing was done{who}",
        next=["git lane status", *fix],
        details={"failed": m.failed[:100], "moved": m.moved[:100], "uids": others},
    )


def _strangers(common: str, rels: list[str]) -> dict[str, int]:
    """The uid of each of `rels` (relative to `common`), or of the directory it lies in,
    that is not this process's: an lstat through directory fds, never a link followed."""
    me, out = os.geteuid(), dict[str, int]()
    for rel in rels:
        try:
            dfd, _ = dirfd.walk(common, os.path.dirname(rel))
        except OSError:
            continue
        try:
            uids = [os.fstat(dfd).st_uid]
            try:
                st = os.stat(os.path.basename(rel), dir_fd=dfd, follow_symlinks=False)
                uids.insert(0, st.st_uid)
            except OSError:
                pass
        finally:
            os.close(dfd)
        other = next((u for u in uids if u != me), None)
        if other is not None:
            out[rel] = other
    return out


def ref_oversized(common: str | os.PathLike[str], branch: str) -> bool:
    """Is the loose ref file of `branch` larger than REF_MAX, or no file nor directory (a
    FIFO, a link: _odd) (one lstat, never a read)? exec's Absorber asks before each look at
    the branch while CMD runs: its git would read it whole, block on it, or read through it."""
    try:
        st = os.lstat(os.path.join(common, "refs", "heads", branch))
    except OSError:
        return False
    if stat.S_ISREG(st.st_mode):
        return st.st_size > REF_MAX
    return not stat.S_ISDIR(st.st_mode)
