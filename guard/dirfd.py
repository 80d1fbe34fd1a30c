"""Writes, renames, unlinks and reads in directories a sandboxed lane can write (its worktree,
its admin dir `<common>/worktrees/<id>/` and everything below, its private object store),
through directory file descriptors: never through a name the lane could re-point.

A trusted root is a directory whose own path no lane can change (the lane's worktree root,
its admin dir: their parents are not granted); it is opened by path. Every component below
it is opened with O_NOFOLLOW|O_DIRECTORY from its parent's descriptor, so a directory the
lane swapped for a symlink fails the walk (ELOOP, ENOTDIR) instead of leading out of the
lane. The last name is acted on through `dir_fd=`: unlink(2) and rename(2) never follow it;
a new file is made O_CREAT|O_EXCL|O_NOFOLLOW under a random name, then renamed over the
target (a link planted at the target is replaced, never written through; one planted at
the temp name fails the create); a read is O_NOFOLLOW|O_NONBLOCK of a regular file only
(a FIFO never blocks it). Standard library only (guard.files, which the shims load, uses it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator

DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def walk(root: str, rel: str = ".", create: bool = False) -> tuple[int, list[str]]:
    """An fd on `root/rel` (`rel` relative, no `..`), reached from the trusted `root` one
    component at a time, never through a symlink (OSError: ELOOP or ENOTDIR); missing
    directories made (0777 minus the umask) when `create`, returned in the list."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise OSError(errno.EINVAL, "a path with '..' is not walked", rel)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    made: list[str] = []
    here = root
    try:
        for part in parts:
            here = os.path.join(here, part)
            try:
                nfd = os.open(part, DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o777, dir_fd=fd)
                made.append(here)
                nfd = os.open(part, DIR, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd, made


def scan(
    root: str,
    rel: str = ".",
    depth: int = 16,
    skip: frozenset[str] = frozenset(),
    refused: list[str] | None = None,
    restore: bool = False,
) -> Iterator[tuple[str, int, list[tuple[str, int]]]]:
    """Every directory at and under `root/rel`, top-down, each as (its path relative to
    `root`, an fd on it, open while the caller acts on it through `dir_fd=`, its entries
    as (name, kind): stat.S_IFDIR, S_IFREG or S_IFLNK as the entry itself is (never
    followed), 0 for anything else (a FIFO, socket, device)). Reached as `walk` reaches
    them (a name swapped for a link or a FIFO since it was listed is not entered, and an
    open never blocks); nothing deeper than `depth` levels below `rel`. The fd is the
    directory that was listed, so an unlink through it removes what was seen there,
    wherever the lane moved a name since. The directories of `rel` named in `skip` are
    listed but not entered, and so are those the caller removes from a yielded entries
    list before it asks for the next (as os.walk's dirnames). A directory the caller may
    not open (its mode: a lane may chmod its own directories 0100, and git opens a file
    in it by name all the same) is added to `refused`, when given; with `restore`, it
    first gets its owner's read and search bits back through an O_PATH fd (open_dir),
    and `rel` itself too (a PermissionError when it still cannot be opened)."""
    if restore and os.path.normpath(rel) != ".":
        pfd, _ = walk(root, os.path.dirname(os.path.normpath(rel)))
        try:
            fd = open_dir(pfd, os.path.basename(os.path.normpath(rel)), 0o500)
        finally:
            os.close(pfd)
    else:
        fd, _ = walk(root, rel)
    yield from _scan(os.path.normpath(rel), fd, depth, skip, refused, restore)


def _kind(e: os.DirEntry[str]) -> int:
    if e.is_file(follow_symlinks=False):  # the common case first: one call
        return stat.S_IFREG
    if e.is_dir(follow_symlinks=False):
        return stat.S_IFDIR
    return stat.S_IFLNK if e.is_symlink() else 0


def listing(dfd: int) -> list[tuple[str, int]]:
    """The entries of the directory `dfd` as (name, kind), as `scan` gives them: the
    kernel's d_type, no stat per entry, never followed."""
    entries = []
    with os.scandir(dfd) as it:
        for e in it:
            try:
                entries.append((e.name, _kind(e)))
            except OSError:
                continue  # gone since it was listed
    return entries


def _scan(
    here: str,
    dfd: int,
    depth: int,
    skip: frozenset[str] = frozenset(),
    refused: list[str] | None = None,
    restore: bool = False,
) -> Iterator[tuple[str, int, list[tuple[str, int]]]]:
    try:
        entries = listing(dfd)
        yield here, dfd, entries
        if depth <= 0:
            return
        for name, kind in entries:
            if kind == stat.S_IFDIR and name not in skip:
                try:
                    if restore:
                        sub = open_dir(dfd, name, 0o500)
                    else:
                        sub = os.open(name, DIR | os.O_NONBLOCK, dir_fd=dfd)
                except PermissionError:
                    if refused is not None:
                        refused.append(os.path.join(here, name))
                    continue
                except OSError:
                    continue  # gone, or no directory any more: never followed
                yield from _scan(
                    os.path.join(here, name), sub, depth - 1, frozenset(), refused, restore
                )
    finally:
        os.close(dfd)


def replace(
    dfd: int, name: str, chunks: Iterable[bytes], mode: int | None = None, tmp: str | None = None
) -> int:
    """Atomically put the bytes of `chunks` at `name` in the directory `dfd`: a new file
    under a random name (or `tmp`, made O_EXCL: git's `NAME.lock`), fsync, rename over
    `name`, fsync of the directory; the byte count. `mode` None: 0666 minus the umask
    (the kernel applies it to the O_CREAT)."""
    tmp = tmp or f".gitlane-{os.getpid()}-{os.urandom(8).hex()}.tmp"
    fd = os.open(tmp, _NEW, 0o666, dir_fd=dfd)
    size = 0
    try:
        try:
            for data in chunks:
                size += len(data)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    try:
        os.fsync(dfd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename is done
    return size


def read(dfd: int, name: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file `name` in `dfd` (a symlink: ELOOP; a FIFO, socket,
    device or directory: EINVAL/EISDIR, never opened for long); more than `limit`: EFBIG."""
    fd = os.open(name, _READ, dir_fd=dfd)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
            raise OSError(code, "not a regular file", name)
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                raise OSError(errno.EFBIG, "too large", name)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_as(dfd: int, name: str, st: os.stat_result) -> int:
    """A read descriptor of the regular file `name` in `dfd` that is the one `st` (its
    lstat) describes: opened O_NOFOLLOW|O_NONBLOCK (a link: ELOOP; a FIFO never blocks),
    then fstat-checked: a regular file of the same device and inode, else OSError (ESTALE:
    something was swapped in between the lstat and the open)."""
    fd = os.open(name, _READ, dir_fd=dfd)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise OSError(errno.ESTALE, "replaced since its lstat", name)
    except BaseException:
        os.close(fd)
        raise
    return fd


def copy_over(dfd: int, name: str, tmp: str, limit: int | None = None) -> int:
    """Give `name` in `dfd` a file of its own with the same bytes: its content copied in
    chunks (copy_data: holes kept, never held whole) from a descriptor open_as checked,
    into `tmp` (0666 minus the umask), made O_EXCL (git's `NAME.lock`: held while it is
    written), fsync, renamed over `name`, fsync of the directory. The old inode is left to
    its other names, never written. More than `limit` bytes: OSError EFBIG, nothing made.
    The byte count."""
    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        code = errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL
        raise OSError(code, "not a regular file", name)
    fd = open_as(dfd, name, st)
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            raise OSError(errno.EFBIG, "too large", name)
        out = os.open(tmp, _NEW, 0o666, dir_fd=dfd)
        try:
            try:
                copy_data(fd, out, size)
                os.fsync(out)
            finally:
                os.close(out)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.fsync(dfd)
    return size


_ZEROS = 1 << 16  # the run of zeros copy_data leaves a hole for instead of writing it


def copy_data(fd: int, out: int, size: int) -> None:
    """Copy the first `size` bytes of the file `fd` to the empty file `out`, which ends
    `size` bytes long. Holes stay holes: only the runs the filesystem says hold data
    (SEEK_DATA/SEEK_HOLE) are read, and a chunk of them that is all zeros is not written
    either (a filesystem that cannot tell holes reports the whole file as data). A lane
    makes a file of a terabyte that takes no disk with `truncate -s 1T` (its index, an
    index.lock, a file of its worktree): a copy byte by byte would write it out as zeros
    until the owner's disk (or a tmpfs, RAM) is full. A file that shrank meanwhile is
    copied as far as it goes. OSError as the reads and writes raise it (EFBIG past a
    file-size limit, ENOSPC)."""
    for start, end in data_runs(fd, size):
        pos = start
        while pos < end:
            chunk = os.pread(fd, min(1 << 20, end - pos), pos)
            if not chunk:
                break  # the file shrank since its size was taken
            for at in range(0, len(chunk), _ZEROS):
                view = memoryview(chunk)[at : at + _ZEROS]
                if chunk.count(0, at, at + _ZEROS) == len(view):
                    continue  # left a hole: it reads back as the same zeros
                where = pos + at
                while view:
                    n = os.pwrite(out, view, where)
                    view, where = view[n:], where + n
            pos += len(chunk)
    os.ftruncate(out, size)  # the holes after the last data, or the zeros not written


def data_runs(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The (start, end) runs of `fd` that hold data, up to `size`; the whole file where
    the filesystem cannot say (EINVAL: no SEEK_DATA there)."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos: holes to the end
                return
            if exc.errno != errno.EINVAL:
                raise
            start, end = pos, size
        if start >= size:
            return
        yield start, end
        pos = end


def write_file(
    root: str, rel: str, data: bytes, mode: int | None = None, create: bool = False
) -> None:
    """Atomically replace `root/rel` (its directories reached without a symlink, made
    when missing and `create`) with `data`: `replace` in the directory `walk` opens."""
    dfd, _ = walk(root, os.path.dirname(rel), create)
    try:
        replace(dfd, os.path.basename(rel), [data], mode)
    finally:
        os.close(dfd)


def read_file(root: str, rel: str, limit: int | None = None) -> bytes:
    dfd, _ = walk(root, os.path.dirname(rel))
    try:
        return read(dfd, os.path.basename(rel), limit)
    finally:
        os.close(dfd)


def unlink(root: str, rel: str) -> None:
    """Remove the non-directory `root/rel` (a symlink itself, never what it names),
    reached without a symlink on the way."""
    dfd, _ = walk(root, os.path.dirname(rel))
    try:
        os.unlink(os.path.basename(rel), dir_fd=dfd)
    finally:
        os.close(dfd)


_RENAME_NOREPLACE = 1


def rename_noreplace(sfd: int, sname: str, dfd: int, dname: str) -> None:
    """rename(2) of `sname` in `sfd` to `dname` in `dfd` that never replaces what is at
    `dname` (renameat2 RENAME_NOREPLACE: FileExistsError). Neither name is followed. Where
    the kernel or libc lacks renameat2, a look first (lstat), then rename(2): what a
    process races in at `dname` between the two is then replaced (a directory only when
    empty)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        if fn(sfd, os.fsencode(sname), dfd, os.fsencode(dname), _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err), dname)
    try:
        os.stat(dname, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
        return
    raise FileExistsError(errno.EEXIST, "name taken", dname)


def move_aside(dfd: int, name: str, base: str) -> str:
    """Rename `name` in `dfd` (itself, never what a link there names) to the first free
    one of `base`, `base.1`, `base.2`, ... in the same directory (nothing there is ever
    replaced); the name it got."""
    n = 0
    while True:
        cand = base if n == 0 else f"{base}.{n}"
        try:
            rename_noreplace(dfd, name, dfd, cand)
            return cand
        except FileExistsError:
            n += 1


# how deep remove_tree goes: one open descriptor per level, and a tree deeper than this
# is no git tree (git refuses paths past 4096 bytes); what lies below is left, and said
TREE_DEPTH = 200


def remove_tree(path: str, depth: int = TREE_DEPTH) -> bool:
    """Remove `path` and everything below it through directory fds: no link followed
    (a link is unlinked itself), no file opened, nothing acted on by a path a process
    still running there could re-point (shutil.rmtree's error handler retried by path: a
    directory swapped for a link led outside). A directory its owner may not write or
    list or enter (a lane can chmod what it made) gets the owner's u+rwx back through its
    fd before anything in it is looked at. `path`'s parent is the caller's, trusted. True
    when nothing is left at `path`; False when something could not be removed (swapped
    mid-way, deeper than `depth`, another owner's): never an exception, never a
    recursion past `depth`."""
    parent, name = os.path.split(os.path.abspath(path))
    try:
        pfd = os.open(parent, DIR)
    except OSError:
        return not os.path.lexists(path)
    try:
        return _remove_at(pfd, name, depth)
    finally:
        os.close(pfd)


def _remove_at(pfd: int, name: str, depth: int) -> bool:
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if stat.S_ISDIR(st.st_mode):
        if depth <= 0:
            return False
        dfd = _open_dir(pfd, name)
        if dfd is None:
            return False
        try:
            try:
                # u+rwx through the fd before anything in it is looked at: a directory
                # a lane made `chmod 0400` opens and lists (r), but no name in it can be
                # looked at or removed without x and w (red team 15A F2)
                mode = stat.S_IMODE(os.fstat(dfd).st_mode)
                if mode & 0o700 != 0o700:
                    with contextlib.suppress(OSError):  # another owner's: as it is
                        os.fchmod(dfd, mode | 0o700)
                names = os.listdir(dfd)
            except OSError:
                return False
            done = True
            for child in names:
                done = _remove_at(dfd, child, depth - 1) and done
        finally:
            os.close(dfd)
        if not done:
            return False
        return owner_may(pfd, lambda: os.rmdir(name, dir_fd=pfd))
    return owner_may(pfd, lambda: os.unlink(name, dir_fd=pfd))


def _open_dir(pfd: int, name: str, bits: int = 0o700) -> int | None:
    """open_dir, None when it cannot be opened."""
    try:
        return open_dir(pfd, name, bits)
    except OSError:
        return None


def open_dir(pfd: int, name: str, bits: int = 0o700) -> int:
    """An fd on directory `name` in `pfd` (never through a link, never blocking); one its
    owner may not read or enter gets the owner's `bits` back through an O_PATH fd first,
    and `pfd` itself u+rwx through its own fd when it lacks the search bit any open in it
    needs (a lane's `chmod 0400` of a directory: listed, never entered, red team 15A F1).
    OSError when it cannot be opened (PermissionError: the bits could not be given back,
    another owner's)."""
    try:
        return os.open(name, DIR | os.O_NONBLOCK, dir_fd=pfd)
    except PermissionError as exc:
        denied = exc
    path = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        qfd = os.open(name, path, dir_fd=pfd)
    except PermissionError:
        try:  # no search bit on `pfd`: even an O_PATH open in it is refused
            mode = stat.S_IMODE(os.fstat(pfd).st_mode)
            if mode & 0o700 == 0o700:
                raise denied from None  # not the mode: another owner's, or no such right
            os.fchmod(pfd, mode | 0o700)
        except OSError:
            raise denied from None
        try:
            return os.open(name, DIR | os.O_NONBLOCK, dir_fd=pfd)
        except PermissionError:
            qfd = os.open(name, path, dir_fd=pfd)
    try:
        try:
            os.chmod(f"/proc/self/fd/{qfd}", stat.S_IMODE(os.fstat(qfd).st_mode) | bits)
        except OSError:
            raise denied from None
        return os.open(name, DIR | os.O_NONBLOCK, dir_fd=pfd)
    finally:
        os.close(qfd)


def give_owner(pfd: int, name: str, bits: int) -> bool:
    """Give the directory `name` in `pfd` (never through a link) its owner's `bits` back
    through an O_PATH fd; True when it has them (a directory moved to another parent needs
    its own write bit: its `..` changes)."""
    try:
        qfd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
    except OSError:
        return False
    try:
        mode = stat.S_IMODE(os.fstat(qfd).st_mode)
        if mode & bits != bits:
            os.chmod(f"/proc/self/fd/{qfd}", mode | bits)
        return True
    except OSError:
        return False
    finally:
        os.close(qfd)


def owner_bits(root: str, rel: str, depth: int = TREE_DEPTH) -> None:
    """`chmod -R u+rwX` of `root/rel` through directory fds: each directory its owner may
    not read or enter gets u+rwx (`_open_dir`), each regular file u+r, never through a
    link (one on the way or in the tree is left as it is: GNU chmod follows one named on
    its command line, which a lane can plant between a printed next and its run, red
    team 14I F4). Nothing deeper than `depth`; what fails (another owner's, gone) is left
    to the caller's own check. `root` is trusted (its path no lane can change)."""
    try:
        pfd, _ = walk(root, os.path.dirname(rel))
    except OSError:
        return
    try:
        _owner_bits_at(pfd, os.path.basename(rel), depth)
    finally:
        os.close(pfd)


def _owner_bits_at(pfd: int, name: str, depth: int) -> None:
    dfd = _open_dir(pfd, name)
    if dfd is None:
        return
    try:
        os.fchmod(dfd, stat.S_IMODE(os.fstat(dfd).st_mode) | 0o700)
        for child, kind in listing(dfd):
            if kind == stat.S_IFDIR and depth > 0:
                _owner_bits_at(dfd, child, depth - 1)
            elif kind == stat.S_IFREG:
                try:
                    st = os.stat(child, dir_fd=dfd, follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o400:
                        qfd = os.open(child, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
                        try:
                            if stat.S_ISREG(os.fstat(qfd).st_mode):
                                os.chmod(f"/proc/self/fd/{qfd}", stat.S_IMODE(st.st_mode) | 0o600)
                        finally:
                            os.close(qfd)
                except OSError:
                    continue
    except OSError:
        pass
    finally:
        os.close(dfd)


def owner_may(dfd: int, change: Callable[[], object]) -> bool:
    """`change` in the directory of `dfd`; once more after giving that directory its
    owner's write bit back when it lacked it. False when it still fails (gone: True)."""
    for attempt in (0, 1):
        try:
            change()
            return True
        except FileNotFoundError:
            return True
        except PermissionError:
            if attempt:
                return False
            try:
                mode = stat.S_IMODE(os.fstat(dfd).st_mode)
                if mode & 0o700 == 0o700:
                    return False
                os.fchmod(dfd, mode | 0o700)
            except OSError:
                return False
        except OSError:
            return False
    return False
