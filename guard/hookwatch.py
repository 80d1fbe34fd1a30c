"""Keep the hooks executable while `git lane exec` supervises CMD.

Landlock has no right over file modes: a confined CMD cannot write a hook, but it can
`chmod -x` one (or the hooks directory, or a directory on the way to it: the common
dir), and git then skips that hook, silently, for every git process in the repository,
the owner's in the hub included. So before CMD starts the supervisor (outside the
sandbox) opens an fd on each hook, on the hooks directory and on each directory on the
way to it (from the common dir; for a hooks dir elsewhere, each ancestor this user owns)
and adds an inotify watch on each; while CMD runs it reads each mode through its fd
(fstat) and puts back the one that changed through the same fd (fchmod), on each
notice and every POLL seconds besides (a notice the kernel dropped, a file renamed over
a hook), and once more when CMD ends. A mode read through the fd needs no search of
any directory, so no directory's mode can blind the watcher (red team 17 F2). A
repair is reported (exec's event `hook_mode_restored`) and warned of on stderr: the first
of each path at once, later ones of the same path counted and reported at most once a
second as one `Repair` with their count, and what was left unsaid once more at the end,
so a CMD that chmods in a loop cannot flood the audit log (red team 17 final F2).

A mode that cannot be read or put back is never carried on with: `fatal` is called
(exec stops CMD and refuses, `hook_mode_lost`). Nor are repairs faster than a person
ever chmods (FLOOD_RATE in a second, FLOOD_TOTAL in all): the lane's processes are
fighting the hooks, and every git that starts between a chmod and its repair skips one.

What remains is the window between CMD's chmod and the repair (the watcher's thread
wakes on the kernel's notice, well under a millisecond of work): a git process that
starts inside it skips the hook. docs/trust-boundary.md says so."""

from __future__ import annotations

import ctypes
import os
import select
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

IN_ATTRIB = 0x00000004
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
POLL = 0.5  # seconds between two looks when no notice comes
QUIET = 1.0  # seconds between two reports (and warnings) of one path's repairs
FLOOD_RATE = 20  # repairs in one second past which CMD is stopped (no person chmods so)
FLOOD_TOTAL = 200  # repairs in one exec past which CMD is stopped

_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO in a hook's place never blocks
_PATH = getattr(os, "O_PATH", 0) | os.O_CLOEXEC


@dataclass(frozen=True)
class Repair:
    """What is reported of a path's repairs: `count` of them since the last report (the
    first is reported alone, at once), `total` in this watch, the last mode seen (`was`)
    and the one put back (`mode`); `final` for the summary when the watch stops."""

    path: str
    was: int
    mode: int
    count: int
    total: int
    final: bool = False


@dataclass
class _Tally:
    """One path's repairs: the mode kept, how many in all, how many not yet reported,
    the last mode seen, and when it was last reported (monotonic seconds)."""

    mode: int
    total: int = 0
    unsaid: int = 0
    was: int = 0
    said: float = 0.0


@dataclass
class _Flood:
    """The repairs of every path: their times in the last second, and how many in all."""

    recent: deque[float] = field(default_factory=deque)
    total: int = 0


@dataclass
class _Kept:
    """One path whose mode is kept: the fd it was opened as, its inode, the mode to keep,
    and whether the fd is O_PATH (its mode then changed through /proc/self/fd)."""

    path: Path
    fd: int
    ino: tuple[int, int]
    mode: int
    pathfd: bool


def _open(path: Path, follow: bool) -> tuple[int, bool] | None:
    """An fd on `path` that fchmod takes (O_RDONLY); O_PATH when it cannot be read (a
    directory or file without the read bit); None when it is not there."""
    flags = 0 if follow else os.O_NOFOLLOW
    try:
        return os.open(path, _OPEN | flags), False
    except OSError:
        pass
    if not _PATH & ~os.O_CLOEXEC:
        return None
    try:
        return os.open(path, _PATH | flags), True
    except OSError:
        return None


def _chmod(k: _Kept, mode: int) -> None:
    if k.pathfd:
        os.chmod(f"/proc/self/fd/{k.fd}", mode)
    else:
        os.fchmod(k.fd, mode)


def _between(common: Path | None, hooks_dir: Path) -> list[Path]:
    """The directories on the way to `hooks_dir` whose mode decides whether git finds a
    hook: from the common dir (itself included) when the hooks dir is inside it, else
    each ancestor this user owns (the ones a CMD of this user could chmod)."""
    hooks = Path(os.path.abspath(hooks_dir))
    if common is not None:
        top = Path(os.path.abspath(common))
        if hooks == top or top in hooks.parents:
            return [top, *reversed([p for p in hooks.parents if top in p.parents])]
    out = []
    for p in reversed(hooks.parents):
        try:
            if os.lstat(p).st_uid == os.geteuid():
                out.append(p)
        except OSError:
            continue
    return out


class HookWatch:
    """Watch `hooks_dir`, the hook files in it and the directories on the way; restore
    any mode that changes. The fds are opened here, before CMD starts."""

    def __init__(
        self,
        hooks_dir: Path,
        names: Iterable[str],
        report: Callable[[Repair], None],
        who: str = "a process",
        common: Path | None = None,
        fatal: Callable[[str, str], None] | None = None,
    ) -> None:
        self.who = who
        self.dir = hooks_dir
        self.files = [hooks_dir / n for n in names]
        self.report = report
        self.fatal = fatal
        self.kept: list[_Kept] = []
        self.lost: tuple[str, str] | None = None  # (path, why) of a mode not kept
        self.restored: list[str] = []
        self._tally: dict[str, _Tally] = {}
        self._flood = _Flood()
        self._lock = threading.Lock()  # check() runs in the thread and in stop()
        self._libc: ctypes.CDLL | None = None
        self._fd = -1
        self._stop_r, self._stop_w = -1, -1
        self._thread: threading.Thread | None = None
        if not os.path.isdir(hooks_dir):
            return  # no hooks dir: nothing to keep (doctor reports missing hooks)
        for p in dict.fromkeys([*_between(common, hooks_dir), hooks_dir]):
            self._keep(p, follow=False)
        for p in self.files:
            self._keep(p, follow=True)  # git runs a link's target: its mode is what counts
        self._fd = self._inotify()

    def _keep(self, path: Path, follow: bool) -> None:
        got = _open(path, follow)
        if got is None:
            return  # not there: nothing to keep (doctor reports a missing hook)
        fd, pathfd = got
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return
        self.kept.append(_Kept(path, fd, (st.st_dev, st.st_ino), stat.S_IMODE(st.st_mode), pathfd))

    def _inotify(self) -> int:
        """An inotify fd with IN_ATTRIB on each kept inode (through its fd: no path is
        looked up again); -1 where inotify is missing (the timer still looks)."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = int(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
        except (OSError, AttributeError):
            return -1
        if fd < 0:
            return -1
        self._libc = libc
        for k in self.kept:
            self._watch(fd, k)
        return fd

    def _watch(self, fd: int, k: _Kept) -> None:
        if self._libc is None:
            return
        at = os.fsencode(f"/proc/self/fd/{k.fd}")
        if self._libc.inotify_add_watch(fd, at, IN_ATTRIB) < 0:
            self._libc.inotify_add_watch(fd, os.fsencode(k.path), IN_ATTRIB)

    def start(self) -> bool:
        """Start watching (a thread); False when there is nothing to keep. The thread
        looks on each notice and every POLL seconds (also where inotify is missing)."""
        if not self.kept:
            return False
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._loop, name="git-lane-hookwatch", daemon=True)
        self._thread.start()
        return True

    def _loop(self) -> None:
        poll = select.poll()
        if self._fd >= 0:
            poll.register(self._fd, select.POLLIN)
        poll.register(self._stop_r, select.POLLIN)
        try:
            while True:
                self.check()  # first: a change made before the thread ran raised no wake-up
                if self.lost is not None:
                    return  # CMD is being stopped: nothing more to keep
                ready = {fd for fd, _ in poll.poll(int(POLL * 1000))}
                if self._stop_r in ready:
                    return
                if self._fd in ready:
                    try:
                        while os.read(self._fd, 65536):
                            pass
                    except BlockingIOError:
                        pass
        except Exception as exc:  # never carry on blind: CMD is stopped
            self._lose(str(self.dir), f"the watcher failed: {exc!r}")

    def check(self) -> list[str]:
        """Put back every mode that changed; the paths repaired."""
        with self._lock:
            done = []
            for k in list(self.kept):
                self._renamed(k)
                try:
                    now = stat.S_IMODE(os.fstat(k.fd).st_mode)
                except OSError as exc:
                    self._lose(str(k.path), f"its mode cannot be read ({exc.strerror or exc})")
                    continue
                if now == k.mode:
                    continue
                try:
                    _chmod(k, k.mode)
                except OSError as exc:
                    why = f"its mode {oct(now)} cannot be put back to {oct(k.mode)}"
                    self._lose(str(k.path), f"{why} ({exc.strerror or exc})")
                    continue
                done.append(str(k.path))
                self._repaired(k, now)
            self._say(final=False)
            self.restored += done
            return done

    def _repaired(self, k: _Kept, was: int) -> None:
        """Count one repair of `k`; report it now if it is the path's first; stop CMD
        (`fatal`) once the repairs come faster than a person makes them."""
        t = self._tally.setdefault(str(k.path), _Tally(k.mode))
        t.total += 1
        t.unsaid += 1
        t.was = was
        if t.total == 1:
            self._tell(str(k.path), t, final=False)
        at = time.monotonic()
        f = self._flood
        f.total += 1
        f.recent.append(at)
        while f.recent and f.recent[0] <= at - 1.0:
            f.recent.popleft()
        if len(f.recent) > FLOOD_RATE or f.total > FLOOD_TOTAL:
            self._lose(
                str(k.path),
                f"was put back {f.total} times in this exec, {len(f.recent)} in the last "
                "second: the lane's processes are fighting the hooks (no person changes "
                "them so often)",
            )

    def _say(self, final: bool) -> None:
        """Report the repairs not yet reported of each path last reported a QUIET ago
        (every one when `final`: the summary)."""
        at = time.monotonic()
        for path, t in self._tally.items():
            if t.unsaid and (final or at - t.said >= QUIET):
                self._tell(path, t, final)

    def _tell(self, path: str, t: _Tally, final: bool) -> None:
        rep = Repair(path, t.was, t.mode, t.unsaid, t.total, final)
        t.unsaid, t.said = 0, time.monotonic()
        try:
            self.report(rep)
        except Exception:
            pass  # the state dir unwritable now: the warning says it, the mode is back
        self._warn(rep)

    def _renamed(self, k: _Kept) -> None:
        """A file renamed over a kept path (a new inode: the fd names the old one): the fd
        is moved to what the path names now, whose mode is then kept as the old one was.
        A path that cannot be looked up (a directory on the way without search, which
        this check puts back) or is gone keeps its fd."""
        follow = k.path in self.files
        try:
            st = os.stat(k.path, follow_symlinks=follow)
        except OSError:
            return
        if (st.st_dev, st.st_ino) == k.ino:
            return
        got = _open(k.path, follow)
        if got is None:
            return
        try:
            st = os.fstat(got[0])
        except OSError:
            os.close(got[0])
            return
        os.close(k.fd)
        k.fd, k.pathfd, k.ino = got[0], got[1], (st.st_dev, st.st_ino)
        if self._fd >= 0:
            self._watch(self._fd, k)

    def _lose(self, path: str, why: str) -> None:
        if self.lost is None:
            self.lost = (path, why)
            if self.fatal is not None:
                self.fatal(path, why)

    def _warn(self, r: Repair) -> None:
        """One line on stderr, straight to fd 2 (the watcher's thread, beside CMD's output)."""
        from guard.git import shown

        line = f"git-lane: warning: {self.who} changed the mode of {shown(r.path)} ({oct(r.was)}); "
        line += f"put back to {oct(r.mode)}"
        if r.total > 1:
            line += f" ({r.count} more time(s), {r.total} in all)"
        try:
            os.write(2, (line + "\n").encode("utf-8", "surrogateescape"))
        except OSError:
            pass  # no stderr: the event is logged all the same

    def stop(self) -> list[str]:
        """Stop watching, look one last time, close every fd; every path repaired while
        watching. `lost` says whether a mode could not be kept."""
        if self._thread is not None:
            os.write(self._stop_w, b"x")
            self._thread.join(timeout=5)
            self._thread = None
        for fd in (self._stop_r, self._stop_w):
            if fd >= 0:
                os.close(fd)
        self._stop_r = self._stop_w = -1
        self.check()
        with self._lock:
            self._say(final=True)
        self.close()
        return sorted(set(self.restored))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for k in self.kept:
            try:
                os.close(k.fd)
            except OSError:
                pass
        self.kept = []
