"""Nothing a sandboxed CMD starts outlives `git lane exec --sandbox`.

CMD can leave a process behind: `setsid sh -c '...' &`, a double fork, a daemon. Under
the sandbox it keeps its confinement, but once exec returns nobody watches the hooks any
more (guard/hookwatch.py) and Landlock has no right over file modes: it could `chmod -x`
a hook with nobody to put the mode back. So, before CMD starts, the supervisor makes
itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER): whatever CMD's tree orphans is
re-parented to exec instead of init, and so stays below exec, where /proc finds it.

- `hold()` makes exec the subreaper; when it cannot, CMD is not run (the caller refuses).
- `reap_orphans()`, while CMD runs: an orphan re-parented here that ended is waited for,
  so a long session does not pile up zombies (they count against the user's process
  limit). Only the children exec did not start itself: the land socket's children are
  its own to wait for, so the socket holds a lock while it may have any
  (guard/landsock.py `Server.spawning`).
- `end_tree()`, once CMD has ended (and the land socket is closed): every process below
  exec gets SIGTERM (and SIGCONT, for a stopped one), then, GRACE seconds on, SIGKILL,
  pass after pass until exec has no child left: a process that forks while it is being
  ended is found by the next pass, and exec waits for each (no zombie). exec stops
  watching the hooks only after it. A SIGINT, SIGTERM, SIGHUP or SIGQUIT to exec meanwhile
  skips the rest of the grace.

With exec a subreaper, a process below it that exec has no child left above is impossible:
"no child" (waitid's ECHILD) is the proof that nothing is left, /proc only says whom to
signal. Signals go through a pidfd, to the process /proc listed (same start time), never
to a pid some unrelated process has taken since. Linux only; standard library only."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from guard import procs

PR_SET_CHILD_SUBREAPER = 36
GRACE = 2.0  # seconds from SIGTERM to SIGKILL
WARN_AFTER = 5.0  # seconds of waiting before exec says what it waits for
_WALL = 0x40000000  # __WALL: children whatever their exit signal (clone(2) children too)
HURRY = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # "end it now"


def hold() -> str:
    """Make this process a child subreaper for what it starts from now on; '' when done,
    else why it could not (then nothing CMD started could be found: CMD must not run)."""
    if not sys.platform.startswith("linux"):
        return "a child subreaper (prctl) exists only on Linux"
    try:
        if procs.stat_fields(os.getpid()) is None:
            raise OSError("no /proc entry for this process")
    except OSError as exc:
        return f"/proc cannot be read ({exc}), so what CMD leaves running could not be found"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        return (
            f"exec cannot become a child subreaper (prctl: {os.strerror(err)}), so a "
            "process CMD leaves running would outlive it"
        )
    return ""


def _reap(keep: int = 0) -> bool:
    """Wait for every ended child but `keep`; False when no child is left at all."""
    while True:
        try:
            got = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT | _WALL)
        except ChildProcessError:
            return False
        if got is None or got.si_pid == keep:
            return True  # none ended, or CMD (its Popen waits for it): the rest later
        try:
            os.waitpid(got.si_pid, os.WNOHANG | _WALL)
        except ChildProcessError:
            pass


def reap_orphans(cmd: int, spawning: threading.Lock | None = None) -> bool:
    """While CMD (pid `cmd`) runs: wait for the orphans re-parented here that ended. Only
    while `spawning` is free (held while the land socket may have children of its own,
    whose status is theirs to collect); False when it was not: call again later."""
    if spawning is not None and not spawning.acquire(blocking=False):
        return False
    try:
        _reap(cmd)
    finally:
        if spawning is not None:
            spawning.release()
    return True


def _send(pid: int, start: str, sig: int) -> None:
    """Signal `pid` only while it is still the process listed (the same start time)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd here (Linux < 5.3): by pid, checked first
        fd = -1
    try:
        if procs.start_ticks(pid) != start:
            return  # gone, and the pid taken by another process
        if fd >= 0:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # gone; or not ours to signal: still below exec, so waited for (and named)
    finally:
        if fd >= 0:
            os.close(fd)


def _say(line: str) -> None:
    try:
        os.write(2, f"git-lane: warning: {line}\n".encode("utf-8", "surrogateescape"))
    except OSError:
        pass


def end_tree(grace: float = GRACE, say: Callable[[str], None] = _say) -> list[int]:
    """CMD has ended: end every process still below this one and wait for each; returns
    the pids it signalled (empty in the common case, at the cost of one waitid)."""
    watched = {*HURRY, signal.SIGCHLD}
    # blocked, a signal to exec waits for sigtimedwait below, which says "hurry", instead
    # of ending exec (SIGTERM's default) with the hooks unwatched; SIGCHLD wakes it early
    old = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        return _end(grace, watched, say)
    finally:
        while watched & signal.sigpending():
            signal.sigtimedwait(watched, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _end(grace: float, watched: set[signal.Signals], say: Callable[[str], None]) -> list[int]:
    me = os.getpid()
    begun = time.monotonic()
    termed: set[tuple[int, str]] = set()
    signalled: dict[int, None] = {}
    hurry, told = False, False
    while _reap():
        try:
            tree = procs.descendants(me)
        except OSError:
            tree = {}  # /proc unreadable for a moment: nobody to signal; wait, look again
        now = time.monotonic()
        kill = hurry or now - begun >= grace
        for pid, (state, start) in tree.items():
            if state == b"Z":
                continue  # ended: its parent (exec, once that parent is gone) waits for it
            if kill:
                _send(pid, start, signal.SIGKILL)
            elif (pid, start) not in termed:
                termed.add((pid, start))
                _send(pid, start, signal.SIGTERM)
                _send(pid, start, signal.SIGCONT)  # a stopped process acts on it only then
            signalled[pid] = None
        if not told and now - begun >= WARN_AFTER:
            told = True
            live = sorted(p for p, (s, _) in tree.items() if s != b"Z")
            say(
                f"waiting for {len(live)} process(es) CMD left running to end, after "
                f"SIGKILL: {' '.join(map(str, live)) or '(none listed yet)'}"
            )
        got = signal.sigtimedwait(watched, 0.05)
        if got is not None and got.si_signo in HURRY:
            hurry = True
    return list(signalled)
