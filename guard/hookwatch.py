"""Keep the hooks executable while `git lane exec` supervises CMD.

Landlock has no right over file modes: a confined CMD cannot write a hook, but it can
`chmod -x` one (or the hooks directory), and git then skips that hook, silently, for
every git process in the repository, the owner's in the hub included. So while CMD runs
the supervisor (outside the sandbox) watches the hooks directory with inotify and puts
each mode back the moment it changes, and looks once more when CMD ends. Each repair is
an event (`hook_mode_restored`) and a warning line.

What remains is the window between CMD's chmod and the repair (the watcher's thread
wakes on the kernel's notice, well under a millisecond of work): a git process that
starts inside it skips the hook. docs/trust-boundary.md says so."""

from __future__ import annotations

import ctypes
import os
import select
import stat
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

IN_ATTRIB = 0x00000004
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000


def _modes(paths: Iterable[Path]) -> dict[Path, int]:
    out: dict[Path, int] = {}
    for p in paths:
        try:
            out[p] = stat.S_IMODE(os.stat(p).st_mode)
        except OSError:
            continue  # not there: nothing to keep (doctor reports a missing hook)
    return out


class HookWatch:
    """Watch `hooks_dir` and the hook files in it; restore any mode that changes."""

    def __init__(
        self,
        hooks_dir: Path,
        names: Iterable[str],
        report: Callable[[str, int, int], None],
        who: str = "a process",
    ) -> None:
        self.who = who
        self.dir = hooks_dir
        self.files = [hooks_dir / n for n in names]
        self.report = report
        self.want = _modes([hooks_dir, *self.files])
        self.restored: list[str] = []
        self._fd = -1
        self._stop_r, self._stop_w = -1, -1
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start watching; False where inotify is missing (the final check still runs)."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return False
        if fd < 0:
            return False
        watched = 0
        for p in [self.dir, *self.files]:
            if p in self.want and libc.inotify_add_watch(fd, os.fsencode(p), IN_ATTRIB) >= 0:
                watched += 1
        if not watched:
            os.close(fd)
            return False
        self._fd = fd
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._loop, name="git-lane-hookwatch", daemon=True)
        self._thread.start()
        self.check()  # a change made before the watches were in place raised no event
        return True

    def _loop(self) -> None:
        poll = select.poll()
        poll.register(self._fd, select.POLLIN)
        poll.register(self._stop_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poll.poll()}
            if self._stop_r in ready:
                return
            try:
                while os.read(self._fd, 65536):
                    pass
            except BlockingIOError:
                pass
            except OSError:
                return
            self.check()

    def check(self) -> list[str]:
        """Put back every mode that changed; the paths repaired."""
        done = []
        for p, mode in self.want.items():
            try:
                now = stat.S_IMODE(os.stat(p).st_mode)
                if now != mode:
                    os.chmod(p, mode)
                    done.append(str(p))
                    self.report(str(p), now, mode)
                    self._warn(p, now, mode)
            except OSError:
                continue
        self.restored += done
        return done

    def _warn(self, p: Path, was: int, now: int) -> None:
        """One line on stderr, straight to fd 2 (the watcher's thread, beside CMD's output)."""
        from guard.git import shown

        line = f"git-lane: warning: {self.who} changed the mode of {shown(p)} ({oct(was)}); "
        try:
            os.write(2, (line + f"put back to {oct(now)}\n").encode("utf-8", "surrogateescape"))
        except OSError:
            pass  # no stderr: the event is logged all the same

    def stop(self) -> list[str]:
        """Stop watching, look one last time; every path repaired while watching."""
        if self._thread is not None:
            os.write(self._stop_w, b"x")
            self._thread.join(timeout=5)
            for fd in (self._fd, self._stop_r, self._stop_w):
                os.close(fd)
            self._thread = None
        self.check()
        return sorted(set(self.restored))
