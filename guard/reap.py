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
- `end_tree(spare=...)`, first, once CMD has ended (the land socket takes no new request):
  every process below exec but exec's own workers (`Workers`: the socket land's process
  and what it starts, the Absorber's git) is ended the same way, while the hooks are still
  watched, so a land or an absorb that hangs (git blocked on a FIFO CMD planted in its
  store) cannot keep what CMD left running alive; only then does exec wait for them.
- `end_tree()`, once the land socket is closed and the Absorber stopped: every process below
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
from collections.abc import Callable, Sequence
from contextlib import ExitStack

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


def reap_orphans(cmd: int, *spawning: threading.Lock) -> bool:
    """While CMD (pid `cmd`) runs: wait for the orphans re-parented here that ended. Only
    while every lock in `spawning` is free (each held while a thread of exec may have
    children of its own, whose status is theirs to collect: a status taken from them reads
    as exit 0 to Python's subprocess); False when one was not: call again later."""
    held: list[threading.Lock] = []
    try:
        for lk in spawning:
            if not lk.acquire(blocking=False):
                return False
            held.append(lk)
        _reap(cmd)
    finally:
        for lk in held:
            lk.release()
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


class Workers:
    """pids of the children a thread of exec starts for itself (not CMD's): each is added
    under `lock` as it is spawned and dropped once waited for, so `end_tree(spare=...)`,
    which lists the processes below exec under the same lock, never takes a worker (or a
    process it started) for something CMD left running."""

    def __init__(self) -> None:
        self.pids: set[int] = set()
        self.lock = threading.Lock()


def kill_now(cmd: int, start: str, spare: Sequence[Workers] = (), below_me: bool = False) -> None:
    """A fatal condition while CMD runs (guard/hookwatch.py: a hook's mode that cannot be
    kept): SIGKILL, at once and from any thread, to CMD (pid `cmd`, started at `start`
    ticks) and what it started: with `below_me` (exec is the subreaper) every process
    below exec that no worker in `spare` started, orphans included; else CMD and its
    descendants while CMD is still that process. end_tree then waits for them as usual."""
    try:
        if below_me:
            tree = _targets(os.getpid(), spare)
        elif start and procs.start_ticks(cmd) == start:
            tree = procs.descendants(cmd)
        else:
            tree = {}  # CMD ended (its pid may be another process's now)
    except OSError:
        tree = {}  # /proc unreadable: CMD itself still gets it; end_tree looks again
    tree.setdefault(cmd, (b"R", start))
    for pid, (state, start) in tree.items():
        if state != b"Z" and start:
            _send(pid, start, signal.SIGKILL)


def _say(line: str) -> None:
    try:
        os.write(2, f"git-lane: warning: {line}\n".encode("utf-8", "surrogateescape"))
    except OSError:
        pass


def end_tree(
    grace: float = GRACE, say: Callable[[str], None] = _say, spare: Sequence[Workers] = ()
) -> list[int]:
    """CMD has ended: end every process still below this one and wait for each; returns
    the pids it signalled (empty in the common case, at the cost of one waitid). With
    `spare`, every process but those workers and what they started (see Workers)."""
    watched = {*HURRY, signal.SIGCHLD}
    # blocked, a signal to exec waits for sigtimedwait below, which says "hurry", instead
    # of ending exec (SIGTERM's default) with the hooks unwatched; SIGCHLD wakes it early
    old = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        if spare:
            return _end_spared(grace, watched, say, spare)
        return _end(grace, watched, say)
    finally:
        while watched & signal.sigpending():
            signal.sigtimedwait(watched, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _Rounds:
    """What both passes of end_tree do on each look at the tree: SIGTERM (with SIGCONT, which
    a stopped process needs to act on it) once to each process, SIGKILL from `grace` seconds
    on, or at once after a SIGINT, SIGTERM, SIGHUP or SIGQUIT to exec; one line saying what
    it waits for once that takes WARN_AFTER seconds."""

    def __init__(
        self, grace: float, watched: set[signal.Signals], say: Callable[[str], None]
    ) -> None:
        self.grace, self.watched, self.say = grace, watched, say
        self.begun = time.monotonic()
        self.termed: set[tuple[int, str]] = set()
        self.signalled: dict[int, None] = {}
        self.hurry, self.told = False, False

    def hit(self, tree: dict[int, tuple[bytes, str]], wait_ended: bool) -> None:
        """Signal every live process in `tree`. An ended one is skipped, or with
        `wait_ended` waited for by pid (ours; another's, a process being ended: later ours)."""
        now = time.monotonic()
        kill = self.hurry or now - self.begun >= self.grace
        for pid, (state, start) in tree.items():
            if state == b"Z":
                if wait_ended:
                    try:
                        os.waitpid(pid, os.WNOHANG | _WALL)
                    except ChildProcessError:
                        pass
                continue
            if kill:
                _send(pid, start, signal.SIGKILL)
            elif (pid, start) not in self.termed:
                self.termed.add((pid, start))
                _send(pid, start, signal.SIGTERM)
                _send(pid, start, signal.SIGCONT)
            self.signalled[pid] = None
        if not self.told and now - self.begun >= WARN_AFTER:
            self.told = True
            live = sorted(p for p, (s, _) in tree.items() if s != b"Z")
            self.say(
                f"waiting for {len(live)} process(es) CMD left running to end, after "
                f"SIGKILL: {' '.join(map(str, live)) or '(none listed yet)'}"
            )

    def pause(self) -> None:
        """Until a child ends, a signal to exec comes, or 50 ms pass."""
        got = signal.sigtimedwait(self.watched, 0.05)
        if got is not None and got.si_signo in HURRY:
            self.hurry = True


def _end(grace: float, watched: set[signal.Signals], say: Callable[[str], None]) -> list[int]:
    rounds = _Rounds(grace, watched, say)
    while _reap():
        try:
            tree = procs.descendants(os.getpid())
        except OSError:
            tree = {}  # /proc unreadable for a moment: nobody to signal; wait, look again
        # an ended process is left: its parent (exec, once that parent is gone) waits for it
        rounds.hit(tree, wait_ended=False)
        rounds.pause()
    return list(rounds.signalled)


def _targets(me: int, spare: Sequence[Workers]) -> dict[int, tuple[bytes, str]]:
    """The processes below `me` that no worker in `spare` started (directly or not). The
    listing is taken while every worker's lock is held: a worker spawned before it is in
    its set, one spawned after it is not in the listing."""
    with ExitStack() as stack:
        for w in spare:
            stack.enter_context(w.lock)
        tree = procs.descendants(me)
        kept: set[int] = set()
        for w in spare:
            for pid in w.pids:
                if pid in tree:
                    kept.add(pid)
                    kept.update(procs.descendants(pid))
    return {p: v for p, v in tree.items() if p not in kept}


def _end_spared(
    grace: float, watched: set[signal.Signals], say: Callable[[str], None], spare: Sequence[Workers]
) -> list[int]:
    """end_tree's first pass: until no process but the workers' is left below exec. Only
    the ended processes that are not a worker's are waited for (by pid: a worker's status
    is its thread's to collect); /proc says when none is left (the workers keep exec from
    ever having no child, so the ECHILD proof is end_tree's second pass)."""
    rounds = _Rounds(grace, watched, say)
    while True:
        try:
            tree = _targets(os.getpid(), spare)
        except OSError:
            tree = None  # /proc unreadable for a moment: look again
        if tree is not None and not tree:
            return list(rounds.signalled)
        rounds.hit(tree or {}, wait_ended=True)
        rounds.pause()
