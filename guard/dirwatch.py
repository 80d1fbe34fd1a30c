"""Tell whether a directory of a lane was moved, removed or unmounted while its gate ran.

The in-lane gate's lstat of every tracked file (git.stat_view) cannot see a directory
renamed away and back: `mv src .src; mkdir src; <evil src/b.txt>; <gate reads it>; rm -r
src; mv .src src` leaves each tracked file its inode, mtime and ctime, and a directory's
own ctime also changes with honest build output. So before the "before" view is taken,
an inotify watch is set on the lane's root and on every directory that holds a tracked
file (and each one between it and the root), each for the directory's own identity only:
IN_MOVE_SELF, IN_DELETE_SELF, IN_UNMOUNT. Files made, written or removed inside a watched
directory raise nothing, so honest build output never fills the queue. After the gate
and the "after" view the queue is read: any such event, an overflow, or an IN_IGNORED
(the kernel dropped a watch: its directory is gone) means the lane's tree was not the
same tree the whole time.

Each directory is added parents first, with IN_ONLYDIR | IN_DONT_FOLLOW: a link is never
watched through (ENOTDIR), and every directory on the way to one being added is already
watched, so a parent swapped for a link meanwhile raises its own event. A watch that
cannot be set (max_user_watches, max_user_instances, a directory gone or no directory,
no inotify at all) raises WatchFailed: the caller refuses, never lands unwatched.
Standard library only (ctypes over libc)."""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from collections.abc import Iterable

IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
MASK = IN_MOVE_SELF | IN_DELETE_SELF | IN_UNMOUNT | IN_ONLYDIR | IN_DONT_FOLLOW
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class WatchFailed(Exception):
    """A watch could not be set: `rel` (the directory, from the lane's root; "" for
    inotify itself) and the errno."""

    def __init__(self, rel: str, err: int) -> None:
        super().__init__(f"{rel or 'inotify'}: {os.strerror(err)}")
        self.rel = rel
        self.errno = err


def directories(names: Iterable[str]) -> list[str]:
    """Every directory that holds one of `names` (paths from the root, `/`-separated),
    and each one between it and the root, parents first; "." is the root."""
    dirs: set[str] = set()
    for d in {n.rpartition("/")[0] for n in names}:  # one pass over the names, then per dir
        while d and d not in dirs:
            dirs.add(d)
            d = d.rpartition("/")[0]
    return [".", *sorted(dirs, key=lambda d: (d.count("/"), d))]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def add_watch(libc: ctypes.CDLL, fd: int, path: bytes) -> int:
    """inotify_add_watch for one directory; the watch descriptor, or -errno. (One place,
    so a test can make it fail as a full max_user_watches does.)"""
    wd = int(libc.inotify_add_watch(fd, path, MASK))
    return wd if wd >= 0 else -ctypes.get_errno()


class DirWatch:
    """Watches on `root` and the directories `dirs` (from the root), set at once."""

    def __init__(self, root: str, dirs: list[str]) -> None:
        self.fd = -1
        self.names: dict[int, list[str]] = {}
        try:
            libc = _libc()
            fd = int(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
        except (OSError, AttributeError):  # no libc to load, or no inotify in it
            raise WatchFailed("", errno.ENOSYS) from None
        if fd < 0:
            raise WatchFailed("", ctypes.get_errno() or errno.EMFILE)
        self.fd = fd
        base = os.fsencode(os.path.join(root, ""))
        try:
            for d in dirs:
                wd = add_watch(libc, fd, base + os.fsencode(d))
                if wd < 0:
                    raise WatchFailed(d, -wd)
                self.names.setdefault(wd, []).append(d)
        except BaseException:
            self.close()
            raise

    def moved(self) -> list[str]:
        """The watched directories moved, removed or unmounted since the watches were set
        ("." the root), or every one when the queue overflowed. Reads what is queued now."""
        out: set[str] = set()
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not buf:
                break
            at = 0
            while at + _EVENT.size <= len(buf):
                wd, mask, _cookie, n = _EVENT.unpack_from(buf, at)
                at += _EVENT.size + n
                if mask & IN_Q_OVERFLOW:  # events were lost: any of them may have been one
                    return sorted({d for ds in self.names.values() for d in ds})
                if mask & (IN_MOVE_SELF | IN_DELETE_SELF | IN_UNMOUNT | IN_IGNORED):
                    out.update(self.names.get(wd, [f"(watch {wd})"]))
        return sorted(out)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> DirWatch:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
