"""Running the owner's gate command (G4): `sh -c` in the lane worktree, in a session of
its own, its output handed to a callback as it comes, the whole process group killed at
the timeout, when the gate's shell exits (nothing it started outlives it), and when this
process is interrupted. The reference-transaction hook tells land from its gate by that
session: nothing the gate starts can share land's session, so nothing it runs can move
main.

With `gate_worktree = "clean"` the gate runs instead in a fresh detached worktree of the
tip, made under $TMPDIR for the one run and removed after it whatever happened (a land
killed outright leaves it to the next land, which sweeps such leftovers under the lock)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from guard import git
from guard.results import GateSummary

TAIL_LINES = 40
CLEAN_PREFIX = "git-lane-gate-"  # the basename of every clean gate worktree

Output = Callable[[bytes], None]
Tick = Callable[[float, str], None]  # (seconds so far, the gate command)

# Run the gate under the lane's sandbox (guard/sandbox.py). Only the land socket's land
# child (guard/landsock.py) sets it, from its argv, when the `git lane exec` supervisor
# that serves the socket confines CMD: never an environment variable or a request field,
# so neither a worker nor anything it sets can switch it on or off.
CONFINE = False
# This land runs for a live `git lane exec` (the land socket's land child sets it, from
# its boot, as CONFINE): CMD and whatever it started may write the lane while the gate
# runs, so the gate runs in a clean worktree of the tip (guard/commands/land.py
# why_clean_gate). Set by the supervisor's own code, never by anything CMD sends.
FOR_EXEC = False


class NotConfined(Exception):
    """The gate's process could not confine itself (it was not run)."""


@dataclass(frozen=True)
class GateRun:
    command: str
    status: str  # passed | failed | timeout
    exit: int
    seconds: float
    tail: list[str]

    def summary(self) -> GateSummary:
        return {"command": self.command, "status": self.status, "seconds": self.seconds}

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "exit": self.exit, "tail": self.tail}


def run(
    command: str,
    cwd: str,
    timeout: int,
    lane: str,
    output: Output | None = None,
    tick: Tick | None = None,
    extra_env: Mapping[str, str] | None = None,
    confine: Callable[[], None] | None = None,
    started: Callable[[int, str], None] | None = None,
) -> GateRun:
    """Run the gate; `output` gets its bytes as they come; `tick` the seconds so far and
    the command, each time the gate has been silent for config.progress_interval()
    seconds (10 s), so that a reader of stderr, a pipe included, knows it still runs.
    Interrupted (KeyboardInterrupt, or SIGTERM turned into one), the gate's
    whole group is killed before the exception goes on, and further SIGINT/SIGTERM are
    ignored until this process exits. `extra_env` replaces the gate's
    GITLANE_GATE_LANE (setup_command runs through here with its own variables).
    `confine` runs in the gate's process before it execs (guard/sandbox.py Prepared);
    when it fails the gate is not run: NotConfined. `started` gets the pid of the gate's
    session leader once it runs, and the token put in its environment as
    GITLANE_GATE_TOKEN (land records both: a land killed outright cannot stop its gate,
    the next holder of the lock does, guard/lock.py stop_dead_gate, once the token proves
    the session the gate's)."""
    import selectors

    from guard.config import progress_interval

    every = progress_interval()
    env = dict(os.environ)
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(k, None)
    # the gate may want to know which lane it checks
    env.update(extra_env if extra_env is not None else {"GITLANE_GATE_LANE": lane})
    token = os.urandom(16).hex()  # proves a session the gate's to whoever must stop it
    env["GITLANE_GATE_TOKEN"] = token
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    start = time.monotonic()
    # a SIGTERM from here until the gate is known (its pid recorded) is noted and acted on
    # after: one that ended this process then left the gate running, unknown (the gate
    # may start, and be seen, before Popen returns here)
    deferred: list[int] = []
    old_term = _defer_term(deferred)
    try:
        proc = subprocess.Popen(
            ["sh", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=confine,
        )
    except subprocess.SubprocessError as exc:  # only `confine` raises this: nothing ran
        _undefer_term(old_term, deferred)
        raise NotConfined(str(exc)) from None
    except OSError as exc:  # E2BIG (a huge environment), ENOENT (no sh), EACCES...: failed
        _undefer_term(old_term, deferred)
        why = f"git-lane: the gate could not be started: {exc.strerror or exc}"
        if output is not None:
            output((why + "\n").encode())
        return GateRun(command, "failed", 126, round(time.monotonic() - start, 3), [why])
    if started is not None:
        # at once: a land killed between the fork and this record leaves a gate no one
        # knows of (a window of a few system calls)
        try:
            started(proc.pid, token)
        except BaseException:
            _kill_group(proc)
            _restore_term(old_term)
            raise
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    timed_out = False
    buf = b""
    last_tick = start
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    reading = True
    _term_as_interrupt()  # (what it replaces is the deferral: old_term is kept above)
    interrupted = False

    def emit(chunk: bytes) -> None:
        nonlocal buf, last_tick
        last_tick = time.monotonic()  # the gate spoke: no progress line needed for a while
        if output is not None:
            output(chunk)
        buf += chunk
        *done, buf = buf.split(b"\n")
        tail.extend(d.decode("utf-8", "replace") for d in done)

    try:
        if deferred:
            raise Terminated
        while True:
            if time.monotonic() - start > timeout:
                timed_out = True
                _kill_group(proc)
                break
            for _ in sel.select(timeout=0.2) if reading else ():
                chunk = proc.stdout.read(65536)
                if chunk:
                    emit(chunk)
                elif chunk == b"":  # EOF: the gate closed its output but may still run
                    sel.unregister(proc.stdout)
                    reading = False
            if not reading:
                try:
                    proc.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is not None:
                rest = proc.stdout.read() or b""
                if rest:
                    emit(rest)
                break
            if tick is not None and time.monotonic() - last_tick >= every:
                last_tick = time.monotonic()
                tick(last_tick - start, command)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        _restore_term(old_term)
        if interrupted:
            _ignore_signals()
        sel.close()
        if proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM, a bug): stop the gate too
            _kill_group(proc)
        else:
            _killpg(proc.pid, signal.SIGKILL)  # whatever the gate left running in its group
    if buf:
        tail.extend(buf.decode("utf-8", "replace").splitlines())
    rc = proc.wait()
    return GateRun(
        command=command,
        status="timeout" if timed_out else ("passed" if rc == 0 else "failed"),
        exit=rc,
        seconds=round(time.monotonic() - start, 3),
        tail=list(tail),
    )


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwinding like Ctrl-C while a gate runs; `signum` says which it was."""

    signum = signal.SIGTERM


def _term_as_interrupt() -> Any:
    """While the gate runs, SIGTERM unwinds like Ctrl-C (so the gate is killed and the
    lock released) instead of ending this process on the spot."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise Terminated

    return signal.signal(signal.SIGTERM, handler)


def _defer_term(deferred: list[int]) -> Any:
    """SIGTERM noted in `deferred`, not acted on (the main thread only); returns what it
    replaced, for _undefer_term or _restore_term."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def note(signum: int, frame: Any) -> None:
        deferred.append(signum)

    return signal.signal(signal.SIGTERM, note)


def _undefer_term(old: Any, deferred: list[int]) -> None:
    """Put SIGTERM's handler back; one that came meanwhile unwinds as it would while the
    gate runs (Terminated: the caller releases what it holds)."""
    _restore_term(old)
    if deferred:
        raise Terminated


def _ignore_signals() -> None:
    """Once interrupted, what is left is cleanup (the gate's group killed, the lock
    released, one line said) and the exit: a second Ctrl-C or SIGTERM must not cut it
    short and leave the gate running or the lock held."""
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _restore_term(old: Any) -> None:
    if old is not None:
        signal.signal(signal.SIGTERM, old)


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        if not _killpg(proc.pid, sig):
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    _killpg(proc.pid, signal.SIGKILL)  # the leader is gone; its children may linger in the group
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass


# -- gate_worktree = "clean" ----------------------------------------------------------------
@contextmanager
def clean_worktree(common_dir: str | os.PathLike[str], tip: str) -> Iterator[str]:
    """A fresh detached worktree of `tip` for one gate run, removed on the way out (gate
    passed, failed, timed out, or this process interrupted). It holds the whole tip, even
    when the hub (whose settings `worktree add` copies) is a sparse checkout. It is
    recorded in git-lane's state (`record`) before git makes it, the record dropped once
    it is gone: a land killed outright leaves it to the next sweep by that record."""
    where = _fresh_dir(common_dir)
    name = os.path.basename(where)
    try:
        # recorded before git makes anything: a land killed from here on leaves nothing
        # the sweep does not know as its own (it sweeps only what is recorded)
        record(common_dir, name, where)
    except BaseException:
        os.rmdir(where)
        raise
    admin = None
    try:
        git.run(
            ["-c", "core.sparseCheckout=false", "worktree", "add", "--detach", where, tip],
            common_dir,
        )
        # git copies a sparse hub's config.worktree into the new worktree: the checkout
        # above was full anyway (the -c), and this keeps the gate's own git from thinking
        # otherwise
        admin = git.worktree_git_dir(where)  # read before the gate runs: git just wrote it
        if admin is not None and (admin / "config.worktree").exists():
            git.run(
                [
                    "config",
                    "--file",
                    str(admin / "config.worktree"),
                    "core.sparseCheckout",
                    "false",
                ],
                where,
            )
        yield where
    finally:
        gone = remove_worktree(common_dir, where, admin)
        adm = os.path.basename(os.fspath(admin)) if admin is not None else name
        if gone and not os.path.lexists(os.path.join(common_dir, "worktrees", adm)):
            forget(common_dir, name)  # else the next sweep removes (or names) what is left


def _fresh_dir(common_dir: str | os.PathLike[str]) -> str:
    """mkdtemp(prefix=CLEAN_PREFIX) whose name no entry of `<common>/worktrees/` has: git
    names the new admin dir after it exactly (a number added on a clash), so the record
    made before `worktree add` names the admin dir git makes, never another one."""
    import tempfile  # here: land imports this module, and only "clean" needs it

    for _ in range(100):
        where = tempfile.mkdtemp(prefix=CLEAN_PREFIX)
        if not os.path.lexists(os.path.join(common_dir, "worktrees", os.path.basename(where))):
            return where
        os.rmdir(where)
    raise OSError(f"no gate worktree name free in {common_dir}/worktrees")


# -- the record of each clean gate worktree: `<common>/git-lane/gates/<name>.json` ------------
# Written by land (the owner's process, under the integration lock) before `worktree add`,
# dropped once the worktree and its admin dir are gone. The state dir is no sandbox's to
# write (exec --sandbox and a confined gate are granted neither it nor `<common>`), so a
# record is the owner's: the sweep acts only on what one names, never on a `gitdir`.
def _gates_dir(common_dir: str | os.PathLike[str]) -> str:
    return os.path.join(common_dir, "git-lane", "gates")


def record(common_dir: str | os.PathLike[str], name: str, where: str) -> None:
    """Record the gate worktree `where` (its admin dir is to be `worktrees/<name>`)."""
    from pathlib import Path

    from guard.store import atomic_write_json

    atomic_write_json(
        Path(_gates_dir(common_dir)) / f"{name}.json",
        {"schema": 1, "admin": name, "path": where, "pid": os.getpid()},
    )


def forget(common_dir: str | os.PathLike[str], name: str) -> None:
    try:
        os.unlink(os.path.join(_gates_dir(common_dir), f"{name}.json"))
    except FileNotFoundError:
        pass


def recorded(common_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The recorded gate worktrees: admin dir name -> worktree path. A record that cannot
    be read, or names no `git-lane-gate-*` admin dir or an absolute `git-lane-gate-*`
    path, is no record: what it would name is left alone."""
    import json

    from guard.store import STATE_MAX_BYTES, read_regular

    d = _gates_dir(common_dir)
    try:
        files = sorted(os.listdir(d))
    except OSError:
        return {}
    out: dict[str, str] = {}
    for f in files:
        name = f.removesuffix(".json")
        if f.startswith(".") or name == f or "/" in name or not is_gate_admin(name):
            continue
        try:
            obj = json.loads(read_regular(os.path.join(d, f), limit=STATE_MAX_BYTES))
        except (OSError, ValueError, RecursionError):
            continue
        path = obj.get("path") if isinstance(obj, dict) else None
        if (
            isinstance(path, str)
            and obj.get("admin") == name
            and os.path.isabs(path)
            and os.path.basename(path) == name
        ):
            out[name] = path
    return out


def remove_worktree(
    common_dir: str | os.PathLike[str], where: str, admin: os.PathLike[str] | None = None
) -> bool:
    """Remove a gate worktree and git's record of it. With its admin dir known from
    before the gate ran (`admin`, in `<common>/worktrees/`), both go through directory fds
    (dirfd.remove_tree: no link followed, no file opened, nothing retried by path) and no
    git runs: a sandboxed gate writes its worktree (and, with no link, FIFO or socket, its
    admin dir), and git opens files there (`.git`, `gitdir`, `HEAD`) to list the
    worktrees: a FIFO blocked it for ever, the integration lock held (red team 13U). An
    admin dir that cannot be removed (a tree deeper than dirfd.TREE_DEPTH the gate made)
    is moved aside (set_aside): left in `worktrees/`, git listed it at whatever path its
    `gitdir` says, which a process the gate left running rewrote (red team 14C). What
    remove_tree leaves of the worktree stays: `git worktree remove WHERE` removed it by
    path, and a process the gate left running exchanged a directory git was emptying for
    a link: the land deleted files outside (red team 14A). With no admin dir known
    (`worktree add` failed), the one git named after the worktree goes through fds when
    its `gitdir` names this worktree; never a repository-wide `worktree prune`, which
    would also drop the records of lanes whose directories are only missing for now.
    True when nothing of the worktree is left."""
    from guard import dirfd

    if admin is not None:
        base = os.path.realpath(os.path.join(common_dir, "worktrees"))
        name = os.path.basename(os.fspath(admin))
        if os.path.realpath(os.path.dirname(os.fspath(admin))) == base:
            # a process the gate left running may still change its worktree: only fds.
            # What stays of the worktree (under $TMPDIR) is no worktree to git once its
            # admin dir is gone
            gone = dirfd.remove_tree(where)
            _remove_admin(common_dir, name)
            return gone
    if not dirfd.remove_tree(where):  # fds only, never git by path; its record stays
        return False
    # git named the admin dir after the worktree (mkdtemp's name: unique); it is this
    # worktree's record only when its `gitdir` names it, read without a link
    base = os.path.join(common_dir, "worktrees")
    name = os.path.basename(where)
    try:
        named = os.fsdecode(dirfd.read_file(base, name + "/gitdir")).strip()
    except OSError:
        return True
    if named in (os.path.join(p, ".git") for p in (where, os.path.realpath(where))):
        _remove_admin(common_dir, name)
    return True


def is_gate_admin(name: str) -> bool:
    """Is `name` (in `<common>/worktrees/`) a clean gate worktree's admin dir? git names
    an admin dir after its worktree's basename (a number added on a clash), and every gate
    worktree's is mkdtemp(prefix=CLEAN_PREFIX): the prefix is git-lane's. No lane can make
    a directory in `worktrees/` (exec --sandbox grants only the lane's own admin dir in it,
    without REFER), so a name there is the owner's or git-lane's; but a gate admin dir's
    files are a confined gate's to write, running or left: never trusted."""
    return name.startswith(CLEAN_PREFIX)


def admin_names(common_dir: str | os.PathLike[str]) -> list[str]:
    """The names of the clean gate admin dirs in `<common>/worktrees/` (running or left)."""
    try:
        names = os.listdir(os.path.join(common_dir, "worktrees"))
    except OSError:
        return []
    return sorted(n for n in names if is_gate_admin(n))


def _remove_admin(common_dir: str | os.PathLike[str], name: str) -> tuple[str, bool]:
    """Remove the gate admin dir `name` through fds, else move it aside: (where it was
    moved, or ""; whether it is out of `worktrees/`)."""
    from guard import dirfd

    if dirfd.remove_tree(os.path.join(common_dir, "worktrees", name)):
        return "", True
    kept = set_aside(common_dir, name)
    return kept or "", kept is not None


def set_aside(common_dir: str | os.PathLike[str], name: str) -> str | None:
    """Move the gate admin dir `name` out of `<common>/worktrees/` into git-lane's kept/
    (`<common>/git-lane/kept/<name>.<UTC time>.<random>`), one rename through directory
    fds: git lists no worktree for it from then on, and whatever still writes in it (its
    Landlock rule follows the inode) writes where nothing is read. None when it could not
    be moved (kept/ not writable, another filesystem): the caller names it."""
    import secrets

    from guard import dirfd

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = f"{name}.{stamp}.{secrets.token_hex(4)}"
    kept = os.path.join(common_dir, "git-lane", "kept")
    try:
        os.makedirs(kept, exist_ok=True)
        sfd = os.open(os.path.join(common_dir, "worktrees"), dirfd.DIR)
        try:
            kfd = os.open(kept, dirfd.DIR)
            try:
                os.rename(name, dest, src_dir_fd=sfd, dst_dir_fd=kfd)
            finally:
                os.close(kfd)
        finally:
            os.close(sfd)
    except OSError:
        return None
    return os.path.join(kept, dest)


def _tree_of(common_dir: str | os.PathLike[str], name: str) -> tuple[str, bool, bool]:
    """The worktree the gate admin dir `name` says is its own: (its path, or ""; whether
    that worktree's `.git` names this admin dir back; whether the path is where land makes
    gate worktrees, a directory of this process's temp dir). Read, never trusted: the
    admin dir's `gitdir` is a confined gate's to write."""
    import tempfile

    adm = os.path.join(common_dir, "worktrees", name)
    try:
        gitdir = git.read_admin(os.path.join(adm, "gitdir"), limit=1 << 16).rstrip("\n")
        path = gitdir.removesuffix("/.git")
        back = git.read_admin(os.path.join(path, ".git"), limit=1 << 16).rstrip("\n")
    except OSError:
        return "", False, False
    if not os.path.isabs(path):
        return "", False, False
    names_back = back in (f"gitdir: {adm}", f"gitdir: {os.path.realpath(adm)}")
    in_tmp = os.path.dirname(path) == os.path.realpath(tempfile.gettempdir())
    return path, names_back, in_tmp


def leftovers(common_dir: str | os.PathLike[str]) -> list[str]:
    """The recorded gate worktrees a land (or reconcile) under the lock would sweep: the
    admin dir names of those of which something is left (the admin dir, or the
    worktree). Never an unrecorded `git-lane-gate-*` admin dir: an owner's own worktree
    of a gate-like name (`git worktree add $TMPDIR/git-lane-gate-notes`, red teams 14D and
    14E), or one an older git-lane left (`unrecorded`)."""
    base = os.path.join(common_dir, "worktrees")
    return [
        name
        for name, path in recorded(common_dir).items()
        if os.path.lexists(os.path.join(base, name)) or os.path.lexists(path)
    ]


def unrecorded(common_dir: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The `git-lane-gate-*` admin dirs no record names that may be a gate worktree an
    older git-lane (one that kept no records) left: (admin dir name, the path git lists it
    at). Never swept: doctor names them, with `git worktree remove --force PATH` to run if
    they are not the owner's. Left out, as surely the owner's: one on a branch (a gate
    worktree is detached), `locked`, out of the temp dir and named back by its worktree's
    `.git` (red team 14D), or whose HEAD only it holds (a commit no ref contains). All of
    it read from an admin dir a gate may have written: it only decides what is named."""
    import re

    rec = recorded(common_dir)
    out: list[tuple[str, str]] = []
    for name in admin_names(common_dir):
        if name in rec:
            continue
        adm = os.path.join(common_dir, "worktrees", name)
        path, names_back, in_tmp = _tree_of(common_dir, name)
        if not path:
            try:
                path = git.read_admin(os.path.join(adm, "gitdir"), limit=1 << 16).strip()
                path = path.removesuffix("/.git")
            except OSError:
                continue
        if not os.path.isabs(path) or "\n" in path or os.path.lexists(os.path.join(adm, "locked")):
            continue
        if os.path.lexists(path) and names_back and not in_tmp:
            continue
        try:
            head = git.read_admin(os.path.join(adm, "HEAD"), limit=1 << 10).strip()
        except OSError:
            continue
        if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head):
            continue  # on a branch (`ref: ...`), or nothing a gate worktree holds
        held = git.run(
            ["for-each-ref", "--count=1", "--contains", head, "--format=%(refname)"],
            common_dir,
            check=False,
        )
        if held.ok and held.stdout.strip():
            out.append((name, path))
    return out


def sweep(common_dir: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Remove the recorded clean gate worktrees a killed land left behind. Only under the
    lock: then no gate of this repository is running, so every record is a leftover's.
    Each admin dir goes through fds (moved aside when it cannot: `kept`), and its worktree
    at the path the record names (made by mkdtemp in the temp dir: never the path the
    admin dir's `gitdir` says, a confined gate's to write). An unrecorded `git-lane-gate-*`
    admin dir is never touched (`unrecorded`). One dict per record of which something was
    left: `admin`, `path` (its worktree removed, or ""), `kept` (where the admin dir was
    moved, or ""), `left` ("yes" when it is still in `worktrees/`: neither removed nor
    moved), `tree_left` (the worktree, when remove_tree left something of it: a process
    the gate started may still run there). The record goes once both are gone."""
    from guard import dirfd

    out: list[dict[str, str]] = []
    for name, path in recorded(common_dir).items():
        adm = os.path.join(common_dir, "worktrees", name)
        had_admin, had_tree = os.path.lexists(adm), os.path.lexists(path)
        where = tree_left = ""
        if had_tree:
            where = path
            if not dirfd.remove_tree(path):  # fds only: what stays is named, never by path
                tree_left = path
        kept, out_of_git = _remove_admin(common_dir, name) if had_admin else ("", True)
        if out_of_git and not tree_left:
            forget(common_dir, name)
        if had_admin or had_tree:
            out.append(
                {"admin": adm, "path": where, "kept": kept, "left": "" if out_of_git else "yes",
                 "tree_left": tree_left}
            )  # fmt: skip
    return out
