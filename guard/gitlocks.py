"""git's lock files in a lane (`index.lock`, `HEAD.lock`, ... in its admin dir) that a
process killed with its git left behind: every later git write in the lane fails on them.

A lock is stale only when provably so: it was a checkpoint's (its record under
`locks/checkpoint.KEY` names the lock's inode and a process that is gone), or it is a
few seconds old and no live git process works in the lane (none has its cwd in the
worktree or the admin dir, none names them in GIT_DIR, GIT_WORK_TREE or GIT_INDEX_FILE).
Where /proc cannot tell, a lock is held. reconcile removes stale locks; abort, continue
and checkpoint refuse lane_busy with it as next."""

from __future__ import annotations

import os
import time
from pathlib import Path

from guard import procs
from guard.errors import Refusal
from guard.store import atomic_write

MIN_AGE = 2.0  # seconds a lock no checkpoint recorded must be old before it can be stale
_ENV = (b"GIT_DIR=", b"GIT_WORK_TREE=", b"GIT_INDEX_FILE=", b"GIT_COMMON_DIR=")


def present(admin: Path | None) -> list[Path]:
    """The `*.lock` files directly in the lane's admin dir, by name."""
    if admin is None:
        return []
    try:
        names = sorted(os.listdir(admin))
    except OSError:
        return []
    return [admin / n for n in names if n.endswith(".lock") and (admin / n).is_file()]


def _inside(p: str, roots: list[str]) -> bool:
    return any(p == r or p.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def git_at_work(path: str, admin: Path) -> bool:
    """Does a live git process (other than this one) work in the lane at `path`? True
    when /proc cannot tell."""
    roots = [os.path.realpath(path), os.path.realpath(admin)]
    me = os.getpid()
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return True
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                comm = f.read().strip()
        except OSError:
            continue  # gone meanwhile
        if not comm.startswith(b"git"):
            continue
        try:
            if _inside(os.path.realpath(os.readlink(f"/proc/{pid}/cwd")), roots):
                return True
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except FileNotFoundError:
            continue
        except OSError:
            return True  # a git we may not look into: it may be working there
        for kv in env:
            if kv.startswith(_ENV):
                where = os.fsdecode(kv.partition(b"=")[2])
                if where and _inside(os.path.realpath(where), roots):
                    return True
    return False


# -- a checkpoint's own index.lock ------------------------------------------------------
def _record(state_dir: Path, key: str) -> Path:
    return state_dir / "locks" / f"checkpoint.{key}"


def hold(state_dir: Path, key: str, lock: str, ino: int) -> None:
    """A checkpoint holds `lock` (inode `ino`): recorded with its pid and start ticks."""
    me = os.getpid()
    text = f"pid={me}\nticks={procs.start_ticks(me)}\nlock={lock}\nino={ino}\n"
    atomic_write(_record(state_dir, key), text.encode())


def release(state_dir: Path, key: str) -> None:
    try:
        os.unlink(_record(state_dir, key))
    except OSError:
        pass


def _checkpoint(state_dir: Path, key: str) -> tuple[str, str, int, float]:
    """("alive" | "dead" | "none", lock, inode, when recorded) of the checkpoint recorded
    for `key`: "none" when there is no record or it cannot be read (it tells nothing)."""
    rec = _record(state_dir, key)
    try:
        if not rec.is_file() or rec.is_symlink():
            return "none", "", 0, 0.0
        written = rec.stat().st_mtime
        kv = dict(ln.partition("=")[::2] for ln in rec.read_text().splitlines())
    except (OSError, UnicodeDecodeError):
        return "none", "", 0, 0.0
    pid, ticks, ino = kv.get("pid", ""), kv.get("ticks", ""), kv.get("ino", "")
    if not (pid.isdigit() and ino.isdigit() and kv.get("lock")):
        return "none", "", 0, 0.0
    now = procs.start_ticks(int(pid))
    # no start time recorded: a live process of that pid may be it
    alive = now == ticks if ticks else bool(now)
    return ("alive" if alive else "dead"), kv["lock"], int(ino), written


def stale(state_dir: Path, key: str, path: str, admin: Path | None) -> list[Path]:
    """The lane's lock files that provably belong to no live process."""
    locks = present(admin)
    if not locks or admin is None:
        return []
    state, own, ino, written = _checkpoint(state_dir, key)
    if state == "alive":
        return []  # a checkpoint at work: its git may be between two commands
    out = []
    busy: bool | None = None
    for lk in locks:
        if state == "dead" and os.path.realpath(lk) == os.path.realpath(own):
            try:
                st = os.lstat(lk)
            except OSError:
                continue
            # the dead checkpoint's own (its inode), at once: whoever else is at work when
            # it was not written since the record; written since, a lock a later git made
            # may have reused the freed inode number, so only while no git works there
            if st.st_ino == ino:
                if st.st_mtime > written and busy is None:
                    busy = git_at_work(path, admin)
                if st.st_mtime <= written or not busy:
                    out.append(lk)
                continue
        try:
            young = time.time() - os.lstat(lk).st_mtime < MIN_AGE
        except OSError:
            continue
        if young:
            continue  # just taken: whoever took it may be no git (libgit2, an IDE) at work
        if busy is None:
            busy = git_at_work(path, admin)
        if not busy:
            out.append(lk)
    return out


def clear(state_dir: Path, key: str, path: str, admin: Path | None) -> list[str]:
    """reconcile: remove the lane's stale lock files (and a dead checkpoint's record)."""
    gone = []
    for lk in stale(state_dir, key, path, admin):
        try:
            os.unlink(lk)
            gone.append(str(lk))
        except OSError:
            pass
    if _checkpoint(state_dir, key)[0] != "alive":
        release(state_dir, key)
    return gone


def stale_refusal(key: str, locks: list[str], action: str) -> Refusal:
    return Refusal(
        "lane_busy",
        f"lane {key} has git lock file(s) left by a process that is gone "
        f"({', '.join(map(os.path.basename, locks))}): every git write there would fail; "
        "nothing was done",
        next=["git lane reconcile", f"git lane {action} {key}"],
        details={"lane": key, "locks": locks, "stale": True},
    )


def check(state_dir: Path, key: str, path: str, admin: Path | None, action: str) -> None:
    """abort and continue: refuse (lane_busy) before git runs into a lock of the lane:
    reconcile, then the command again, when the lock is stale; else the command again."""
    locks = present(admin)
    if not locks:
        return
    dead = stale(state_dir, key, path, admin)
    if dead:
        raise stale_refusal(key, [str(p) for p in dead], action)
    raise Refusal(
        "lane_busy",
        f"a git command is writing in lane {key} (its {', '.join(p.name for p in locks)} "
        "exists); nothing was done",
        next=[f"git lane {action} {key}"],
        alternatives=["git lane status"],
        details={"lane": key, "locks": [str(p) for p in locks], "stale": False},
    )
