"""`.worktreeinclude`: the ignored files of the hub (`.env`, `node_modules/`, a venv) that
main's committed `.worktreeinclude` names (gitignore syntax) are copied into a lane.

Only files git ignores in the hub (never a tracked one), matched by the patterns of main's
tree (never a lane's or the hub's working copy of the file). Copy-on-write where the
filesystem allows (FICLONE, as `cp --reflink=auto`), modes and mtimes kept. Symlinks are
copied as symlinks, never followed; a path whose directories in the hub or the lane are
not plain directories (a symlink that leads elsewhere) is skipped. A path the lane has
already is never overwritten."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from guard import dirfd, git
from guard.errors import GitError
from guard.results import Included

FILE = ".worktreeinclude"
FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h
PROGRESS_SECONDS = 2.0

Progress = Callable[[int, int], None]  # files, bytes so far


@dataclass
class _Tally:
    files: int = 0
    bytes: int = 0
    reflinked: int = 0
    kept: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)

    def result(self) -> Included:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "reflinked": self.reflinked,
            "kept": self.kept,
            "skipped": self.skipped[:100],
        }


def empty() -> Included:
    return _Tally().result()


# A `.worktreeinclude` names a few paths; git matches every file it walks in the hub against
# every pattern (a second each per 10k glob lines and 2,000 files, measured), under the
# integration lock for a clean gate: one with more pattern lines than this is not used
MAX_PATTERNS = 1000


def committed(found: bytes | git.TooBig | None) -> tuple[bytes | None, str | None]:
    """Main's committed `.worktreeinclude` as Repo.committed_file found it: its patterns
    (None: there is none), and the warning when it is too big to read or holds more than
    MAX_PATTERNS patterns (then no patterns: nothing is copied)."""
    from guard.config import too_big

    if isinstance(found, git.TooBig):
        return None, too_big(FILE, found.size, "nothing it names was copied")
    if found is not None:
        n = sum(1 for ln in found.split(b"\n") if ln.strip() and not ln.startswith(b"#"))
        if n > MAX_PATTERNS:
            return None, (
                f"{FILE} in main's tree has {n:,} patterns, more than {MAX_PATTERNS:,}: "
                "it was not read, so nothing it names was copied"
            )
    return found, None


def inside(hub: str, paths: Iterable[str]) -> list[str]:
    """Those of `paths` (lanes' and worktrees' paths) that lie inside the hub, strictly,
    relative to it: nothing at or under one is the hub's to copy. Each is taken as written
    and with its links resolved, against the hub's path as written and resolved."""
    hubs = {os.path.abspath(hub), os.path.realpath(hub)}
    out: set[str] = set()
    for p in paths:
        for q in {os.path.abspath(p), os.path.realpath(p)}:
            for h in hubs:
                rel = os.path.relpath(q, h)
                if rel != "." and rel != ".." and not rel.startswith("../"):
                    out.add(rel)
    return sorted(out)


def _under(rel: str, prefixes: Iterable[str]) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in prefixes)


class ListingTimedOut(Exception):
    """git's listing of the hub's ignored files did not end in time (what it reads there,
    a `.gitignore` on its way, blocked it: a FIFO)."""


def matches(
    hub: str, patterns: bytes, lanes: Iterable[str] = (), timeout: float | None = None
) -> list[str]:
    """The hub's files that git ignores and the patterns name, as paths relative to it;
    none at or under `lanes` (paths relative to the hub: git is told not to enter them,
    so nothing a lane put there, a `.gitignore` that blocks, is read). Both git calls
    within `timeout` seconds in all (ListingTimedOut)."""
    skip = sorted(set(lanes))
    spec = ["--", *(f":(exclude,top,literal){p}" for p in skip)] if skip else []
    deadline = None if timeout is None else time.monotonic() + timeout

    def ls(args: list[str]) -> list[str]:
        left = None if deadline is None else max(0.1, deadline - time.monotonic())
        res = git.run(["ls-files", "-z", "-o", "-i", *args, *spec], hub, check=False, timeout=left)
        if res.timed_out:
            raise ListingTimedOut(timeout)
        if not res.ok:
            raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
        return res.z()

    with tempfile.NamedTemporaryFile(prefix="git-lane-include-") as f:
        f.write(patterns)
        f.flush()
        named = ls([f"--exclude-from={f.name}"])
    wanted = {p for p in named if not p.endswith("/") and not _under(p, skip)}
    if not wanted:
        return []
    ignored = ls(["--exclude-standard"])
    return sorted(p for p in ignored if p in wanted)


def copy(
    hub: str,
    lane: str,
    patterns: bytes,
    progress: Progress | None = None,
    lanes: Iterable[str] = (),
) -> Included:
    """Copy what `patterns` names from the hub into the lane; what could not be copied is
    in `skipped`, with why. Nothing at or under `lanes` (every lane's and worktree's path:
    those inside the hub are never entered). The listing is bounded by
    git.lane_read_timeout() (past it nothing is copied, and `skipped` says so). Every
    source is reached from the hub's root through directory fds and opened without ever
    blocking (O_NONBLOCK, fstat-checked against the lstat that chose it); every write in
    the lane goes through directory fds (a CMD may be running there: `git lane setup`
    while an exec runs), as guard/dirfd.py writes."""
    t = _Tally()
    hub_real = os.path.realpath(hub)
    timeout = git.lane_read_timeout()
    try:
        found = matches(hub_real, patterns, inside(hub, lanes), timeout)
    except ListingTimedOut:
        t.skipped.append(
            {
                "path": ".",
                "reason": f"git ls-files in the hub timed out after {timeout:g} s "
                "(a FIFO .gitignore there?): nothing copied",
            }
        )
        return t.result()
    dirs = _Dirs(hub_real, lane)
    last = time.monotonic()
    try:
        for rel in found:
            parts = rel.split("/")
            if any(p in ("", ".", "..", ".git") for p in parts):
                t.skipped.append({"path": rel, "reason": "not a plain relative path"})
                continue
            fds = dirs.enter("/".join(parts[:-1]))
            if fds is None:
                t.skipped.append(
                    {"path": rel, "reason": "a directory on its way is not a plain directory"}
                )
                continue
            try:
                _copy_one(fds[0], fds[1], parts[-1], rel, t)
            except OSError as exc:
                t.skipped.append({"path": rel, "reason": exc.strerror or str(exc)})
            if progress is not None and time.monotonic() - last >= PROGRESS_SECONDS:
                last = time.monotonic()
                progress(t.files, t.bytes)
    finally:
        dirs.close()
    return t.result()


class _Dirs:
    """The directories on the way to the file being copied, in the hub and in the lane,
    each an fd opened from its parent's with O_NOFOLLOW|O_DIRECTORY|O_NONBLOCK (in the
    lane made there, 0700, when missing), from the two roots opened by path (trusted
    roots: guard/dirfd.py). A hub directory that is not a plain one (a link, a FIFO) fails
    its open and its files are skipped; so does a lane directory a running CMD swapped
    for a link (ELOOP); one renamed after the open keeps its fd, so the files come from
    (go to) where the directory went. The paths come sorted, so those under a directory
    come together: it is left once, and a directory this copy made gets the hub's mode
    (| 0700) then, through its fd (a read-only parent after its children); only the fds
    on one path are open at a time."""

    def __init__(self, hub: str, lane: str) -> None:
        top = os.open(hub, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            root = os.open(lane, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except BaseException:
            os.close(top)
            raise
        # (relative path, (hub fd, lane fd) or None when not a plain directory, mode to
        # give the lane's on leaving)
        self.stack: list[tuple[str, tuple[int, int] | None, int | None]] = [("", (top, root), None)]

    def enter(self, rel: str) -> tuple[int, int] | None:
        while len(self.stack) > 1:
            top = self.stack[-1][0]
            if rel == top or rel.startswith(top + "/"):
                break
            self._leave()
        top, fds, _ = self.stack[-1]
        rest = rel[len(top) :].lstrip("/")
        for part in rest.split("/") if rest else []:
            here = f"{top}/{part}" if top else part
            sub, mode = self._open(fds, part) if fds is not None else (None, None)
            self.stack.append((here, sub, mode))
            top, fds = here, sub
        return fds

    @staticmethod
    def _open(parents: tuple[int, int], name: str) -> tuple[tuple[int, int] | None, int | None]:
        hub, lane = parents
        try:
            src = os.open(name, dirfd.DIR | os.O_NONBLOCK, dir_fd=hub)
        except OSError:
            return None, None
        try:
            mode = None
            try:
                dst = os.open(name, dirfd.DIR | os.O_NONBLOCK, dir_fd=lane)
            except FileNotFoundError:
                os.mkdir(name, 0o700, dir_fd=lane)
                mode = stat.S_IMODE(os.fstat(src).st_mode) | 0o700
                dst = os.open(name, dirfd.DIR | os.O_NONBLOCK, dir_fd=lane)
            return (src, dst), mode
        except OSError:
            os.close(src)
            return None, None

    def _leave(self) -> None:
        _, fds, mode = self.stack.pop()
        if fds is None:
            return
        try:
            if mode is not None:
                os.fchmod(fds[1], mode)
        except OSError:
            pass
        finally:
            os.close(fds[0])
            os.close(fds[1])

    def close(self) -> None:
        while self.stack:
            self._leave()


def _copy_one(hfd: int, lfd: int, name: str, rel: str, t: _Tally) -> None:
    """Copy `name` of the hub directory `hfd` to `name` in the lane directory `lfd`
    (never over anything). The source is opened O_NOFOLLOW|O_NONBLOCK and must be the
    regular file its lstat saw (dirfd.open_as): a FIFO swapped in meanwhile is never
    waited on, a link never followed."""
    st = os.stat(name, dir_fd=hfd, follow_symlinks=False)
    try:
        os.stat(name, dir_fd=lfd, follow_symlinks=False)
        t.kept += 1
        return
    except FileNotFoundError:
        pass
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=hfd), name, dir_fd=lfd)  # the link, never its target
        t.files += 1
        return
    if not stat.S_ISREG(st.st_mode):
        t.skipped.append({"path": rel, "reason": "not a regular file or symlink"})
        return
    try:
        sfd = dirfd.open_as(hfd, name, st)
    except OSError as exc:
        if exc.errno not in (errno.ESTALE, errno.ELOOP, errno.ENXIO):
            raise
        t.skipped.append({"path": rel, "reason": "changed while copied"})
        return
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        ffd = os.open(name, flags, 0o600, dir_fd=lfd)
        try:
            reflinked = _clone_or_copy(sfd, ffd)
            os.fchmod(ffd, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(ffd, ns=(st.st_atime_ns, st.st_mtime_ns))
        except BaseException:
            os.close(ffd)
            os.unlink(name, dir_fd=lfd)  # never leave half a file that a later copy would keep
            raise
        os.close(ffd)
    finally:
        os.close(sfd)
    t.files += 1
    t.bytes += st.st_size
    t.reflinked += reflinked


def _clone_or_copy(sfd: int, dfd: int) -> bool:
    """FICLONE (shares the blocks, copy-on-write), else a plain copy: cp --reflink=auto."""
    import fcntl

    try:
        fcntl.ioctl(dfd, FICLONE, sfd)
        return True
    except OSError as exc:
        if exc.errno not in (
            errno.EOPNOTSUPP,
            errno.ENOTTY,
            errno.EXDEV,
            errno.EINVAL,
            errno.ENOSYS,
            errno.EPERM,
        ):
            raise
    while True:
        try:
            n = os.copy_file_range(sfd, dfd, 1 << 24)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            break
        if n == 0:
            return False
    # copy_file_range could not start: read and write from where it left off
    while chunk := os.read(sfd, 1 << 20):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dfd, view) :]
    return False


UNCHANGED_MAX_FILES = 100_000  # past this, a directory is not compared: it counts as work


# deeper than this a directory counts as different: two fds and a few frames a level
UNCHANGED_MAX_DEPTH = 100


def _same_bytes(fa: int, fb: int, size: int) -> bool:
    at = 0
    while at < size:
        n = min(1 << 20, size - at)
        a, b = os.pread(fa, n, at), os.pread(fb, n, at)
        if a != b or not a:
            return False
        at += len(a)
    return os.pread(fa, 1, at) == os.pread(fb, 1, at) == b""  # neither grew meanwhile


def unchanged_copy(hub: str, lane: str, rel: str) -> bool:
    """Is the lane's ignored path `rel` (a directory when it ends with /) the same as the
    hub's, entry for entry, byte for byte, symlinks as links? Then removing it loses
    nothing: it is what `.worktreeinclude` copied (or an identical build). Never follows a
    symlink; anything it cannot compare counts as different, so release asks.
    Every name is reached through directory fds from the two roots (O_NOFOLLOW, a
    directory swapped for a link fails), every file and directory is read through an fd
    opened O_NOFOLLOW|O_NONBLOCK and fstat-checked against its lstat (the same inode, of
    the same type: a FIFO or a link the lane swaps in after the lstat is never waited on
    nor followed), files compared in chunks."""
    seen = 0

    def same(pa: int, pb: int, name: str, depth: int) -> bool:
        nonlocal seen
        seen += 1
        if seen > UNCHANGED_MAX_FILES or depth > UNCHANGED_MAX_DEPTH:
            return False
        try:
            sa = os.stat(name, dir_fd=pa, follow_symlinks=False)
            sb = os.stat(name, dir_fd=pb, follow_symlinks=False)
        except OSError:
            return False
        if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
            return False
        if stat.S_ISLNK(sa.st_mode):
            try:
                return os.readlink(name, dir_fd=pa) == os.readlink(name, dir_fd=pb)
            except OSError:
                return False
        if stat.S_ISREG(sa.st_mode):
            if sa.st_size != sb.st_size:
                return False
            return _both(pa, pb, name, sa, sb, lambda fa, fb: _same_bytes(fa, fb, sa.st_size))
        if stat.S_ISDIR(sa.st_mode):

            def entries(fa: int, fb: int) -> bool:
                names = os.listdir(fa)
                return all(same(fa, fb, n, depth + 1) for n in names)

            return _both(pa, pb, name, sa, sb, entries, dirfd.DIR | os.O_NONBLOCK)
        return False

    clean = rel.rstrip("/")
    if not clean or clean.startswith("/") or ".." in clean.split("/"):
        return False
    parent, _, name = clean.rpartition("/")
    try:
        la, _ = dirfd.walk(lane, parent or ".")
    except OSError:
        return False
    try:
        try:
            hb, _ = dirfd.walk(hub, parent or ".")
        except OSError:
            return False
        try:
            return same(la, hb, name, 0)
        finally:
            os.close(hb)
    finally:
        os.close(la)


def _both(
    pa: int,
    pb: int,
    name: str,
    sa: os.stat_result,
    sb: os.stat_result,
    compare: Callable[[int, int], bool],
    flags: int = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
) -> bool:
    """`compare` over fds on `name` in `pa` and in `pb`, each opened with `flags` and the
    inode its lstat (`sa`, `sb`) named, of the same type; False when either is not (or
    cannot be opened, or read)."""
    fds: list[int] = []
    try:
        for p, st in ((pa, sa), (pb, sb)):
            fd = os.open(name, flags, dir_fd=p)
            fds.append(fd)
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino, stat.S_IFMT(now.st_mode)) != (
                st.st_dev,
                st.st_ino,
                stat.S_IFMT(st.st_mode),
            ):
                return False
        return compare(fds[0], fds[1])
    except OSError:
        return False
    finally:
        for fd in fds:
            os.close(fd)


# -- what setup left: the ignored files of a lane just after its setup ------------------------
# file type (S_IFMT), size, mtime_ns, ctime_ns, inode: mtime can be set back (cp -p,
# touch -r) after a same-size edit, ctime and the inode cannot be by a user's tools
Stamp = tuple[int, int, int, int, int]
Manifest = dict[str, Stamp]


def ignored_files(path: str) -> list[str]:
    """Every ignored file of the worktree at `path`, each once, relative to it. git names
    a directory it does not enter (a nested repository) once, with its trailing slash;
    nothing under a directory so named is listed again."""
    listed = git.run(
        ["ls-files", "--others", "--ignored", "--exclude-standard", "-z"],
        path,
        env={"GIT_OPTIONAL_LOCKS": "0"},
    ).z()
    out: list[str] = []
    dirs: list[str] = []
    for rel in sorted(set(listed)):  # a directory sorts before what is under it
        if any(rel.startswith(d) for d in dirs):
            continue
        if rel.endswith("/"):
            dirs.append(rel)
        out.append(rel)
    return out


def stamps(path: str, rels: list[str]) -> Manifest:
    """Type, size, mtime, ctime and inode of each regular file or symlink among `rels`
    (never followed); a directory or what is gone has no stamp. Any write to a file, or
    its replacement, changes its ctime or inode, whatever its mtime says."""
    out: Manifest = {}
    for rel in rels:
        if rel.endswith("/"):
            continue
        try:
            st = os.lstat(os.path.join(path, rel))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            out[rel] = (
                stat.S_IFMT(st.st_mode),
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_ino,
            )
    return out


def setup_left(before: Manifest, after: Manifest, old: Manifest | None) -> Manifest:
    """What a setup left, for the lane's manifest: the files it made or changed (their
    stamp moved between `before` and `after`), and those an earlier setup left (`old`)
    that nobody touched since. A file that was there before the setup, untouched by it
    and not an earlier setup's, is someone's work and stays out."""
    return {
        rel: st
        for rel, st in after.items()
        if before.get(rel) != st or (old is not None and old.get(rel) == st)
    }


def work(path: str, rels: list[str], manifest: Manifest) -> list[str]:
    """The ignored paths among `rels` that are not as the lane's setup left them (new
    since, or changed): only these are someone's work."""
    now = stamps(path, [r for r in rels if r in manifest])
    return [r for r in rels if r not in manifest or now.get(r) != manifest[r]]
