"""Hard links planted in the git dirs a sandboxed lane may write, split before CMD starts.

`exec --sandbox` (and Codex's own sandbox, guard/commands/agent_setup.py) grants write on
git's own directories of the lane (sandbox.git_dirs: its admin dir `worktrees/<id>/` with
its private object store and any submodule's git dir in `modules/`, and the lane refs
`refs/heads/lane/`, `logs/refs/heads/lane/`). Landlock checks the NAME a file is opened
by, never the inode: a hard link made there beforehand, by any process outside the
sandbox (an earlier unconfined run of the lane's agent, a plain exec), to an owner file
outside (the common `config`, a hook, git-lane's `config.toml`, another worktree's index)
lets CMD write that file through the granted name (`ln .git/config
.git/refs/heads/lane/x`, then `echo '[core] hooksPath=...' >> .git/refs/heads/lane/x`).
git makes such links itself too: a local clone (a submodule's, `git clone PATH`)
hard-links the objects of the repository it clones.

`find()` walks those directories (an lstat per regular file, through directory fds as
guard/dirfd.py does, never following a symlink; a directory the lane took the owner's
bits from gets them back first) and counts, per (st_dev, st_ino), the names it found:
a file with fewer than its st_nlink has a name outside the walked dirs, unless the
lane's worktree (walked then, only for such files) holds the rest: a name there is the
lane's own too, granted by the same sandbox (red team 17 F2). `split()` gives
each such name an inode of its own, as git writes a file: its bytes copied into
`NAME.lock` (made O_EXCL: never beside a git writing NAME; in CMD's own cache dir a name
of git-lane's own, so a NAME.lock CMD left there stops nothing) in the same directory, same
mode; the copies of one directory made durable together (one syncfs), then each renamed
over NAME through the directory's fd while NAME is still the file copied. The file
outside keeps its inode and its bytes, untouched. About 15-40 ms for a lane store of
10,000 loose objects beside 50 lanes' refs (bench/links.py). A file whose names all lie in the walked dirs is left as it is (CMD
may write each of them anyway).

Bounded: a file held to a size by guard/oversize.py (which runs first: every command's
first step) is never copied past that size, and every copy stops at the size fstat gave
when it was opened (holes stay holes: dirfd.copy_data). What cannot be established (a
directory that cannot be listed, or deeper than DEPTH; a copy that fails; a file that
changed while it was copied; a name replaced meanwhile) raises LinkError: the caller
refuses `git_dir_link_failed` and CMD is never started with a link left. A link planted
after the walk (while CMD runs) is not seen: CMD itself cannot make one (EXDEV), a
process outside the sandbox can write the owner's files anyway. Standard library and
the engine's own modules only."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from guard import dirfd, git, oversize
from guard.errors import Refusal

if TYPE_CHECKING:
    from guard.repo import Repo

# how deep the walk looks (an admin dir's submodule git dirs nest: modules/a/modules/b/
# objects/xx); a directory deeper is not taken for "no link there": LinkError
DEPTH = 64
# the paths a git_dir_links_split event names (the rest counted in `more`)
EVENT_MAX = 100
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LinkError(Exception):
    """What the walk or a split could not establish: `rel` (relative to the common dir)
    and why; `status` True when `git lane status` (oversize's move) is the fix; `lock` the
    name of a lock that was in the way."""

    def __init__(self, rel: str, why: str, status: bool = False, lock: str = "") -> None:
        super().__init__(f"{rel}: {why}")
        self.rel = rel
        self.why = why
        self.status = status
        self.lock = lock  # the NAME.lock beside `rel` that stopped its split, if that was it


@dataclass(frozen=True)
class Linked:
    """A regular file of the walked dirs with a name outside them: `rel` (relative to the
    common dir), its link count, and how many of its names the walk found."""

    rel: str
    nlink: int
    found: int


def roots(common: str, dirs: Sequence[str]) -> list[str]:
    """`dirs` relative to the common dir, none inside another (the admin dir holds its
    store), in their order. LinkError for one that is not under the common dir. Never
    resolved: a link on the way fails the walk (O_NOFOLLOW), as it fails the grant."""
    out: list[str] = []
    for d in dirs:
        rel = os.path.relpath(os.path.normpath(d), os.path.normpath(common))
        if rel == ".":
            raise LinkError(d, "is the repository's git dir itself")
        if rel.startswith("../") or rel == "..":
            if not os.path.isabs(d) or os.path.normpath(d) == "/":
                raise LinkError(d, "is neither below the repository's git dir nor absolute")
            rel = os.path.normpath(d)  # outside it (CMD's own cache dir): walked from /
        out.append(rel)
    return [r for r in out if not any(o != r and r.startswith(o + "/") for o in out)]


class _Moved(Exception):
    """A directory the walk had walked came up again under another name: moved (a
    RENAME_EXCHANGE of two directories, which a sandboxed lane may make in the lane refs)
    while the walk ran, so its names may be counted twice or not at all."""


def _enter(dfd: int, here: str, walked: set[tuple[int, int]]) -> None:
    """Record the directory `dfd` (`here`) as walked, by its fstat; _Moved if it was."""
    st = os.fstat(dfd)
    ident = (st.st_dev, st.st_ino)
    if ident in walked:
        raise _Moved(here)
    walked.add(ident)


def _walk(
    dfd: int,
    here: str,
    depth: int,
    seen: dict[tuple[int, int], list[int | str]],
    walked: set[tuple[int, int]],
) -> None:
    """Each regular file with more than one name in the directory `dfd` (`here`) and
    below it into `seen`, by inode: [its link count, then each name found]; never through
    a link, nothing deeper than `depth`. Every directory walked goes into `walked` (by
    its fd's fstat, never the name): one met twice is _Moved."""
    _enter(dfd, here, walked)
    try:
        with os.scandir(dfd) as it:
            entries = list(it)
    except OSError as exc:
        raise LinkError(here, f"cannot be listed ({exc.strerror or exc})") from None
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                if depth <= 0:
                    raise LinkError(f"{here}/{e.name}", f"is more than {DEPTH} levels down")
                try:
                    sub = dirfd.open_dir(dfd, e.name, 0o500)
                except FileNotFoundError:
                    continue  # gone since it was listed
                except OSError as exc:
                    why = f"cannot be listed ({exc.strerror or exc})"
                    raise LinkError(f"{here}/{e.name}", why) from None
                try:
                    _walk(sub, f"{here}/{e.name}", depth - 1, seen, walked)
                finally:
                    os.close(sub)
            elif e.is_file(follow_symlinks=False):
                st = e.stat(follow_symlinks=False)  # fstatat in `dfd`: never followed
                if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
                    names = seen.setdefault((st.st_dev, st.st_ino), [st.st_nlink])
                    names[0] = max(names[0], st.st_nlink)
                    names.append(f"{here}/{e.name}")
        except FileNotFoundError:
            continue  # gone since it was listed: no name of it there
        except OSError as exc:
            why = f"cannot be looked at ({exc.strerror or exc})"
            raise LinkError(f"{here}/{e.name}", why) from None


# how often find() walks again when a directory moved while it walked (a rename racing)
TRIES = 3


def find(common: str, dirs: Sequence[str], own: Sequence[str] = ()) -> list[Linked]:
    """Every regular file under `dirs` (below `common`, or absolute: CMD's own cache dir)
    with a name outside them and outside `own` (absolute: the lane's worktree, which the
    same sandbox grants, so a name there is CMD's own as well: red team 17 F2): one Linked
    per name found in `dirs`. A dir that does not exist holds none (a lane with no loose
    ref). Raises LinkError when one of `dirs` cannot be walked, or when a directory moved
    during each of TRIES walks (the names counted cannot be trusted)."""
    for _ in range(TRIES):
        try:
            return _find(common, dirs, own)
        except _Moved as exc:
            moved = str(exc)
    raise LinkError(moved, f"it was moved while it was walked, {TRIES} times over")


def _count_own(
    own: Sequence[str],
    seen: dict[tuple[int, int], list[int | str]],
    walked: set[tuple[int, int]],
) -> dict[tuple[int, int], int]:
    """How many names each inode of `seen` has in the `own` dirs: walked (only when a file
    of `seen` lacks names, so an exec with no link pays nothing) through directory fds,
    never through a link, at most DEPTH down. Looser than _walk, never less safe: a
    directory that cannot be listed, lies deeper or was walked for `dirs` already is
    skipped (its names are not counted: the file is split, as before); one met twice in
    this walk (moved meanwhile) makes it count nothing."""
    counts: dict[tuple[int, int], int] = {}
    mine: set[tuple[int, int]] = set()

    def walk(dfd: int, depth: int) -> None:
        st = os.fstat(dfd)
        ident = (st.st_dev, st.st_ino)
        if ident in mine:
            raise _Moved("")
        mine.add(ident)
        try:
            with os.scandir(dfd) as it:
                entries = list(it)
        except OSError:
            return
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if depth <= 0:
                        continue
                    try:
                        sub = os.open(e.name, dirfd.DIR | os.O_NONBLOCK, dir_fd=dfd)
                    except OSError:
                        continue
                    try:
                        sst = os.fstat(sub)
                        if (sst.st_dev, sst.st_ino) not in walked:
                            walk(sub, depth - 1)
                    finally:
                        os.close(sub)
                elif e.is_file(follow_symlinks=False):
                    fst = e.stat(follow_symlinks=False)
                    key = (fst.st_dev, fst.st_ino)
                    if fst.st_nlink > 1 and key in seen:
                        counts[key] = counts.get(key, 0) + 1
            except OSError:
                continue

    try:
        for d in own:
            try:
                fd, _ = dirfd.walk("/", d.lstrip("/"))
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) not in walked:
                    walk(fd, DEPTH)
            finally:
                os.close(fd)
    except _Moved:
        return {}
    return counts


def _find(common: str, dirs: Sequence[str], own: Sequence[str] = ()) -> list[Linked]:
    seen: dict[tuple[int, int], list[int | str]] = {}
    walked: set[tuple[int, int]] = set()
    for rel in roots(common, dirs):
        try:
            pfd, _ = dirfd.walk(*_base(common, os.path.dirname(rel)))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise LinkError(rel, f"cannot be reached ({exc.strerror or exc})") from None
        try:
            fd = dirfd.open_dir(pfd, os.path.basename(rel), 0o500)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise LinkError(rel, f"cannot be listed ({exc.strerror or exc})") from None
        finally:
            os.close(pfd)
        try:
            _walk(fd, rel, DEPTH, seen, walked)
        finally:
            os.close(fd)
    short = {k: v for k, v in seen.items() if int(v[0]) > len(v) - 1}
    counts = _count_own(own, short, walked) if short and own else {}
    out: list[Linked] = []
    for key, (nlink, *names) in short.items():
        found = len(names) + counts.get(key, 0)
        if int(nlink) > found:
            out += [Linked(str(n), int(nlink), found) for n in names]
    return sorted(out, key=lambda x: x.rel)


def _base(common: str, where: str) -> tuple[str, str]:
    """dirfd.walk's (root, rel) for `where`: relative to the common dir, or absolute (CMD's
    cache dir, reached from / one component at a time, as the grant names it)."""
    return ("/", where.lstrip("/")) if os.path.isabs(where) else (common, where)


def _own_files(common: str, where: str, names: Sequence[str]) -> list[str]:
    """Give each of `names` in the directory `where` an inode of its own (see the module's
    docstring); those that were (one whose other names went meanwhile has one already).
    One walk to the directory; every copy made first, then made durable at once (_sync:
    a local clone's objects are split by the thousand, and an fsync each took seconds a
    hundred), then each renamed over its name if that is still the file copied. Raises
    LinkError; no NAME.lock of ours is left behind."""
    try:
        dfd, _ = dirfd.walk(*_base(common, where))
    except OSError as exc:
        why = f"its directory cannot be reached ({exc.strerror or exc})"
        raise LinkError(os.path.join(where, names[0]), why) from None
    copies: list[tuple[str, str, os.stat_result]] = []  # (name, its lock, what was copied)
    done: list[str] = []
    try:
        for name in names:
            rel = os.path.join(where, name)
            # in git's dirs the copy is NAME.lock, as git locks NAME (never beside a git
            # writing it); in CMD's own cache dir (absolute: no git of the owner's writes
            # there) a name of git-lane's own, so a NAME.lock CMD left there is CMD's
            # business, not a refusal (red team 17 F2)
            lock = f".git-lane-split-{secrets.token_hex(8)}" if os.path.isabs(where) else None
            try:
                st = _copy_at(dfd, rel, name, lock)
            except OSError as exc:
                raise LinkError(rel, f"it could not be copied ({exc.strerror or exc})") from None
            if st is not None:
                copies.append((name, lock or f"{name}.lock", st))
        if not copies:
            return []
        try:
            _sync(dfd, [lock for _, lock, _ in copies])
        except OSError as exc:
            rel = os.path.join(where, copies[0][0])
            raise LinkError(rel, f"its copy could not be synced ({exc.strerror or exc})") from None
        while copies:
            name, lock, st = copies[0]
            rel = os.path.join(where, name)
            try:
                now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError as exc:
                raise LinkError(rel, f"it cannot be looked at ({exc.strerror or exc})") from None
            # (its ctime moves when another name of it is split: not compared here)
            if _same(now) != _same(st):
                raise LinkError(rel, "it changed, or its name was replaced, while it was copied")
            try:
                os.rename(lock, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError as exc:
                raise LinkError(
                    rel, f"its copy could not be renamed ({exc.strerror or exc})"
                ) from None
            copies.pop(0)
            done.append(rel)
        try:
            os.fsync(dfd)
        except OSError:
            pass  # some filesystems cannot fsync a directory; the renames are done
    finally:
        for _, lock, _ in copies:  # not renamed: ours, removed
            try:
                os.unlink(lock, dir_fd=dfd)
            except OSError:
                pass
        os.close(dfd)
    return done


def _encloses(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def _same(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, stat.S_IFMT(st.st_mode)


def _sync(dfd: int, locks: Sequence[str]) -> None:
    """Make the copies `locks` in `dfd` durable before any is renamed over its name: one
    syncfs(2) of their filesystem; where there is none, an fsync of each."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = getattr(libc, "syncfs", None)
        if fn is not None and fn(dfd) == 0:
            return
    except OSError:
        pass
    for lock in locks:
        fd = os.open(lock, _READ, dir_fd=dfd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _copy_at(dfd: int, rel: str, name: str, lock: str | None = None) -> os.stat_result | None:
    """Copy `name` in `dfd` into `lock` (default `name.lock`; made O_EXCL, as git locks
    it; its mode; not yet synced); the source's stat when it was, None when it needs no
    copy (gone, or its other names went). Raises LinkError (no lock left), OSError."""
    try:
        fd = os.open(name, _READ, dir_fd=dfd)
    except FileNotFoundError:
        return None  # gone: no name of it is left here
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LinkError(rel, "it is no regular file any more (replaced meanwhile)")
        if st.st_nlink < 2:
            return None
        limit = oversize.bound(rel)
        if limit is not None and st.st_size > limit:
            why = f"it is larger ({st.st_size} bytes) than git writes it ({limit})"
            raise LinkError(rel, why, status=True)
        lock = lock or f"{name}.lock"
        try:
            out = os.open(lock, _NEW, 0o600, dir_fd=dfd)
        except FileExistsError:
            raise LinkError(rel, f"{lock} exists (a git is writing it)", lock=lock) from None
        except PermissionError:  # a lane may take its own directory's write bit
            mode = stat.S_IMODE(os.fstat(dfd).st_mode)
            if mode & 0o300 == 0o300:
                raise
            os.fchmod(dfd, mode | 0o300)
            out = os.open(lock, _NEW, 0o600, dir_fd=dfd)
        try:
            try:
                dirfd.copy_data(fd, out, st.st_size)
                # its mode, but never a setuid/setgid bit on a copy made by the owner
                os.fchmod(out, stat.S_IMODE(st.st_mode) & 0o777)
            finally:
                os.close(out)
            after = os.fstat(fd)
            if (after.st_size, after.st_mtime_ns, after.st_ctime_ns) != (
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
            ):
                raise LinkError(rel, "it changed while it was copied")
        except BaseException:
            try:
                os.unlink(lock, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)
    return st


def split(common: str, dirs: Sequence[str], own: Sequence[str] = ()) -> list[Linked]:
    """Give every file find() finds under `dirs` an inode of its own at each name found
    there, until a walk finds none (a directory moved between the walk and the split
    leaves a name unsplit: the next walk finds it); what was split. Raises LinkError
    (what was split before it stays split), also when a walk after TRIES splits still
    finds one (linked again as soon as split, by a process outside racing: never a loop)."""
    done: list[Linked] = []
    for _ in range(TRIES):
        found = find(common, dirs, own)
        if not found:
            return done
        by_dir: dict[str, list[Linked]] = {}
        for x in found:
            by_dir.setdefault(os.path.dirname(x.rel), []).append(x)
        for where, these in by_dir.items():
            made = set(_own_files(common, where, [os.path.basename(x.rel) for x in these]))
            done += [x for x in these if x.rel in made]
    left = find(common, dirs, own)
    if left:
        raise LinkError(left[0].rel, "it was linked again as soon as it was split")
    return done


def refusal(
    exc: LinkError, common: str, retry: str, what: str, dirs: Sequence[str] = ()
) -> Refusal:
    """git_dir_link_failed for `exc`; `what`: what was not done ("nothing was run"). Its
    next changes what refused before the command runs again (never that command alone,
    which would refuse again, red team 17 F2): `git lane status` moves a file grown past
    git's bounds; a NAME.lock in git's dirs (a git that died, or a process outside) is
    removed; what is in CMD's own cache dir (absolute in `dirs`: a cache, CMD's alone) is
    moved aside whole, kept. Only a race (a file changed, a directory moved, a link made
    again while it was split) is the command again alone: the next run walks afresh."""
    import time

    path = git.shown(os.path.join(common, exc.rel))
    cache = next(
        (d for d in dirs if os.path.isabs(exc.rel) and os.path.isabs(d) and _encloses(d, exc.rel)),
        "",
    )
    if exc.status:
        nxt = ["git lane status", retry]
    elif cache:
        aside = f"{cache}.git-lane-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
        nxt = [f"mv -- {git.q(cache)} {git.q(aside)}", retry]
    elif exc.lock:
        lock = os.path.join(common, os.path.dirname(exc.rel), exc.lock)
        nxt = [f"rm -f -- {git.q(lock)}", retry]
    else:
        nxt = [retry]
    return Refusal(
        "git_dir_link_failed",
        f"{path}, in a git dir the sandbox lets the lane write, could not be checked for a "
        f"hard link to a file outside (or given a file of its own): {exc.why}; through such "
        "a link a sandboxed process writes the file outside (the repository's config, a "
        f"hook), so {what}"
        + (
            " (git lane status moves a file larger than git writes into kept/)"
            if exc.status
            else ""
        ),
        next=nxt,
        details={"file": path, "why": exc.why},
    )


def split_for(
    repo: Repo,
    dirs: Sequence[str],
    lane: str,
    retry: str,
    what: str,
    own: Sequence[str] = (),
) -> list[str]:
    """split() for lane `lane` before `what` starts (`own`: the lane's worktree, whose
    names count as the lane's own): logs git_dir_links_split naming what was split (at
    most EVENT_MAX paths); the paths. Refused git_dir_link_failed."""
    common = os.path.realpath(repo.common_dir)  # (as sandbox.git_dirs names them)
    try:
        done = split(common, dirs, own)
    except LinkError as exc:
        repo.store.event("git_dir_links_split", lane=lane, code="failed", file=exc.rel, why=exc.why)
        raise refusal(exc, common, retry, what, dirs) from None
    files = [x.rel for x in done]
    if files:
        said = {"files": files[:EVENT_MAX], "more": max(0, len(files) - EVENT_MAX)}
        repo.store.event("git_dir_links_split", lane=lane, code="split", **said)
    return files


def note(files: Sequence[str]) -> str:
    """One line that says what split_for() did."""
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return (
        f"gave {shown} (in the git dirs the sandbox lets the lane write) a file of its own: "
        "each had a hard link outside those dirs, through which a sandboxed process would "
        "have written the file outside; that file is as it was"
    )
