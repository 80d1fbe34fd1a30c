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
from collections.abc import Callable
from dataclasses import dataclass, field

from guard import git
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


def matches(hub: str, patterns: bytes) -> list[str]:
    """The hub's files that git ignores and the patterns name, as paths relative to it."""
    with tempfile.NamedTemporaryFile(prefix="git-lane-include-") as f:
        f.write(patterns)
        f.flush()
        named = git.run(["ls-files", "-z", "-o", "-i", f"--exclude-from={f.name}"], hub)
    wanted = {p for p in named.z() if not p.endswith("/")}
    if not wanted:
        return []
    ignored = git.run(["ls-files", "-z", "-o", "-i", "--exclude-standard"], hub).z()
    return sorted(p for p in ignored if p in wanted)


def copy(hub: str, lane: str, patterns: bytes, progress: Progress | None = None) -> Included:
    """Copy what `patterns` names from the hub into the lane; what could not be copied is
    in `skipped`, with why."""
    t = _Tally()
    hub_real = os.path.realpath(hub)
    made: dict[str, int] = {}  # lane directories this copy made -> the hub's mode for them
    checked: dict[str, bool] = {}  # relative directory -> plain in both hub and lane
    last = time.monotonic()
    for rel in matches(hub, patterns):
        parts = rel.split("/")
        if any(p in ("", ".", "..", ".git") for p in parts):
            t.skipped.append({"path": rel, "reason": "not a plain relative path"})
            continue
        parent = "/".join(parts[:-1])
        if not _dirs_ok(hub_real, lane, parent, checked, made):
            t.skipped.append(
                {"path": rel, "reason": "a directory on its way is not a plain directory"}
            )
            continue
        try:
            _copy_one(os.path.join(hub_real, rel), os.path.join(lane, rel), rel, t)
        except OSError as exc:
            t.skipped.append({"path": rel, "reason": exc.strerror or str(exc)})
        if progress is not None and time.monotonic() - last >= PROGRESS_SECONDS:
            last = time.monotonic()
            progress(t.files, t.bytes)
    for d in sorted(made, key=len, reverse=True):  # deepest first: a read-only parent last
        try:
            os.chmod(os.path.join(lane, d), made[d])
        except OSError:
            pass
    return t.result()


def _dirs_ok(hub: str, lane: str, rel: str, checked: dict[str, bool], made: dict[str, int]) -> bool:
    """Every directory of `rel` is a real directory in the hub and in the lane (made there
    when missing): nothing on the way is a symlink that leads out of either."""
    if rel == "":
        return True
    if rel in checked:
        return checked[rel]
    head, _, _ = rel.rpartition("/")
    ok = _dirs_ok(hub, lane, head, checked, made)
    if ok:
        try:
            src = os.lstat(os.path.join(hub, rel))
            ok = stat.S_ISDIR(src.st_mode)
            dst_path = os.path.join(lane, rel)
            try:
                ok = ok and stat.S_ISDIR(os.lstat(dst_path).st_mode)
            except FileNotFoundError:
                if ok:
                    os.mkdir(dst_path, 0o700)
                    made[rel] = stat.S_IMODE(src.st_mode) | 0o700
        except OSError:
            ok = False
    checked[rel] = ok
    return ok


def _copy_one(src: str, dst: str, rel: str, t: _Tally) -> None:
    st = os.lstat(src)
    if os.path.lexists(dst):
        t.kept += 1
        return
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)  # the link itself, never what it points at
        t.files += 1
        return
    if not stat.S_ISREG(st.st_mode):
        t.skipped.append({"path": rel, "reason": "not a regular file or symlink"})
        return
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(sfd).st_mode):  # swapped since the lstat
            t.skipped.append({"path": rel, "reason": "changed while copied"})
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        dfd = os.open(dst, flags, 0o600)
        try:
            reflinked = _clone_or_copy(sfd, dfd)
            os.fchmod(dfd, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(dfd, ns=(st.st_atime_ns, st.st_mtime_ns))
        except BaseException:
            os.close(dfd)
            os.unlink(dst)  # never leave half a file that a later copy would keep
            raise
        os.close(dfd)
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


def unchanged_copy(hub: str, lane: str, rel: str) -> bool:
    """Is the lane's ignored path `rel` (a directory when it ends with /) the same as the
    hub's, entry for entry, byte for byte, symlinks as links? Then removing it loses
    nothing: it is what `.worktreeinclude` copied (or an identical build). Never follows a
    symlink; anything it cannot compare counts as different, so release asks."""
    import filecmp

    seen = 0

    def same(a: str, b: str) -> bool:
        nonlocal seen
        seen += 1
        if seen > UNCHANGED_MAX_FILES:
            return False
        try:
            sa, sb = os.lstat(a), os.lstat(b)
        except OSError:
            return False
        if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
            return False
        if stat.S_ISLNK(sa.st_mode):
            return os.readlink(a) == os.readlink(b)
        if stat.S_ISREG(sa.st_mode):
            return sa.st_size == sb.st_size and filecmp.cmp(a, b, shallow=False)
        if stat.S_ISDIR(sa.st_mode):
            try:
                names = os.listdir(a)
            except OSError:
                return False
            return all(same(os.path.join(a, n), os.path.join(b, n)) for n in names)
        return False

    clean = rel.rstrip("/")
    if not clean or clean.startswith("/") or ".." in clean.split("/"):
        return False
    return same(os.path.join(lane, clean), os.path.join(hub, clean))


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
