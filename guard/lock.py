"""The integration lock (G1). Mutual exclusion is a kernel flock on
`locks/integration.flock` (dropped by the kernel when its holder dies); the owner record
`locks/integration.owner` holds pid, start, host, token, lane, main_before, tip, since,
start_ticks as `key=value` lines so the reference-transaction hook can read it from sh.
Only the token holder removes it; a record of this host found by whoever takes the flock
(its owner dead, or a record cut short naming any pid) is taken over, one from another
host never automatically."""

from __future__ import annotations

import errno
import os
import time
from dataclasses import asdict, dataclass, fields, replace
from collections.abc import Callable
from pathlib import Path
from typing import Any

from guard import procs
from guard.errors import Refusal
from guard.repo import Repo
from guard.store import (
    FileLock,
    ensure_dir,
    move_aside,
    not_a_directory,
    now_iso,
    read_regular,
    set_aside,
)


@dataclass(frozen=True)
class OwnerRecord:
    """The lock owner record, field for field as the hooks read it (see FIELDS)."""

    pid: int = 0
    start: float | None = None
    host: str = ""
    token: str = ""
    lane: str = ""
    main_before: str = ""  # empty until G3 ran under the lock: no move is allowed before
    tip: str = ""
    since: str = ""
    start_ticks: str = ""  # /proc start time in ticks: the hook tells a reused pid by it

    def to_text(self) -> str:
        return "".join(f"{k}={'' if v is None else v}\n" for k, v in asdict(self).items())

    @classmethod
    def from_text(cls, text: str) -> OwnerRecord:
        """Lenient on purpose: an unreadable pid reads as 0 (no live owner), which lets the
        next land take the lock over rather than be stuck behind garbage."""
        raw: dict[str, str] = {}
        for line in text.splitlines():
            k, sep, v = line.partition("=")
            if sep and k in FIELDS:
                raw[k] = v
        kw: dict[str, Any] = {k: v for k, v in raw.items() if k not in ("pid", "start")}
        try:
            kw["pid"] = int(raw.get("pid", ""))
            kw["start"] = float(raw.get("start") or 0) or None
        except ValueError:
            kw["pid"], kw["start"] = 0, None
        return cls(**kw)

    def public(self) -> dict[str, Any]:
        """The record without its token (for status and refusals)."""
        d = asdict(self)
        d.pop("token")
        return d


FIELDS = tuple(f.name for f in fields(OwnerRecord))


def owner_path(repo: Repo) -> Path:
    return repo.store.locks_dir / "integration.owner"


def flock_path(repo: Repo) -> Path:
    return repo.store.locks_dir / "integration.flock"


# a record is a few short lines; past this it is garbage, never read whole (a sparse 3 GB
# one was a MemoryError in every command that looks at the lock)
OWNER_MAX = 1 << 20


def read_owner(repo: Repo) -> OwnerRecord | None:
    try:
        raw = read_regular(owner_path(repo), limit=OWNER_MAX)
    except NotADirectoryError:  # locks/ is a file: whether a land runs cannot be told
        raise not_a_directory(owner_path(repo).parent) from None
    except OSError as exc:  # missing, or not a file (a directory is set aside at the next write)
        if exc.errno == errno.EFBIG:
            return OwnerRecord()  # garbage, as an undecodable one below
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # Not written by a land (which writes ASCII): garbage, read as a record of no live
        # owner on this host, so the next land or reconcile takes it over. Decoded
        # leniently instead, its garbled host would pass for another host's live land.
        return OwnerRecord()
    return OwnerRecord.from_text(text)


def owner_alive(rec: OwnerRecord) -> bool:
    if rec.host and rec.host != procs.hostname():
        return True  # cannot tell: never assume another host's land is dead
    return procs.alive(rec.pid, rec.start)


def could_be_landing(rec: OwnerRecord) -> bool:
    """For a caller that holds the flock: may the record's owner still be landing? Only on
    another host (never assumed dead). A land of this host holds the flock for as long
    as its record exists, so a record of this host (or of no host: a record cut short)
    found under the flock is a dead land's or garbage, whatever pid it names."""
    return bool(rec.host) and rec.host != procs.hostname()


def _write_owner(repo: Repo, rec: OwnerRecord) -> None:
    """Temp file + rename, without fsync: the record means something only while its owner
    lives (after a power loss the flock is gone and the recorded pid and start time name
    no live process, so it is taken over), and two fsyncs per land are measurable."""
    path = owner_path(repo)
    ensure_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = rec.to_text().encode()
        while data:  # a disk about full writes part of it: all of it, or no record at all
            data = data[os.write(fd, data) :]
    except OSError as exc:
        os.close(fd)
        os.unlink(tmp)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError:
        if set_aside(path) is None:  # a directory in the record's place is kept aside
            os.unlink(tmp)
            raise
        os.replace(tmp, path)


@dataclass
class Held:
    flock: FileLock
    record: OwnerRecord

    @property
    def token(self) -> str:
        return self.record.token


def _busy(repo: Repo, rec: OwnerRecord | None, lane: str, retry: str | None = None) -> Refusal:
    if rec is None:
        who, since = "another git lane process", "just now"
    else:
        who = f"pid {rec.pid} on {rec.host} landing lane {rec.lane}"
        since = rec.since or "?"
    foreign = rec is not None and rec.host not in ("", procs.hostname())
    nxt = [retry or f"git lane land {lane} --wait"]
    alt = [] if retry is None or "--sync" in retry else [f"{retry} --sync"]
    if foreign:
        from guard.git import q

        alt.append(f"rm {q(owner_path(repo))}  # only if that host's land is gone for good")
    return Refusal(
        "lock_busy",
        f"the integration lock is held by {who} since {since}",
        next=nxt,
        alternatives=alt,
        details={"holder": rec.public() if rec is not None else None, "foreign_host": foreign},
    )


# Told whom a `land --wait` waits for: (the holder's public record or None, seconds waited)
Waiting = Callable[[dict[str, Any] | None, float], None]


def acquire(
    repo: Repo,
    lane: str,
    main_before: str,
    tip: str,
    wait: float | None = None,
    waiting: Waiting | None = None,
    retry: str | None = None,
) -> Held:
    """Take the lock or raise lock_busy; with `wait`, keep trying for that many seconds,
    calling `waiting` when the wait starts and every config.progress_interval() after.
    `retry` is the command lock_busy names (the caller's own, with --wait)."""
    import secrets  # pulls in OpenSSL via hmac: only a land needs it, never `status`

    from guard.config import progress_interval

    began = time.monotonic()
    deadline = None if wait is None else began + wait
    every = progress_interval()
    told: float | None = None
    while True:
        fl = FileLock(flock_path(repo))
        remaining = 0.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if waiting is not None:  # wake up to say whom we wait for: first at once, then each `every`
            remaining = 0.0 if told is None else min(remaining, every)
        if fl.acquire(timeout=remaining):
            old = read_owner(repo)
            if old is None or not could_be_landing(old):
                stop_dead_gate(repo)  # a land killed while its gate ran left it running
                if old is not None:
                    repo.store.event(
                        "lock_takeover", lane=lane, code="lock_taken_over", previous=old.public()
                    )
                rec = _own_record(lane, main_before, tip, secrets.token_hex(8))
                _write_owner(repo, rec)
                # with lock_released, the audit log shows who held the lock when (and
                # that no two holders ever overlapped)
                repo.store.event("lock_acquired", lane=lane, token=rec.token)
                return Held(fl, rec)
            fl.release()  # a live (or foreign) owner record without the flock: respect it
            busy = _busy(repo, old, lane, retry)
        else:
            busy = _busy(repo, read_owner(repo), lane, retry)
        now = time.monotonic()
        if deadline is None or now >= deadline:
            raise busy
        if waiting is not None and (told is None or now - told >= every):
            told = now
            waiting(busy.details.get("holder"), now - began)
        time.sleep(0.05)


def _own_record(lane: str, main_before: str, tip: str, token: str) -> OwnerRecord:
    me = os.getpid()
    return OwnerRecord(
        pid=me,
        start=procs.start_time(me),
        host=procs.hostname(),
        token=token,
        lane=lane,
        main_before=main_before,
        tip=tip,
        since=now_iso(),
        start_ticks=procs.start_ticks(me),
    )


def adopt(flock: FileLock, lane: str) -> Held:
    """For a caller that took the flock itself over a dead owner's record (reconcile): a
    Held whose record is written only once it names a move (name_move), so a recovery
    that changes nothing leaves the dead record as it found it."""
    import secrets

    return Held(flock, _own_record(lane, "", "", secrets.token_hex(8)))


def name_move(repo: Repo, held: Held, *, main_before: str, tip: str) -> None:
    """Write the record as ours, naming this one move (recovery rerunning a dead land's
    steps). The caller holds the flock, so no other process writes the record meanwhile."""
    held.record = replace(held.record, main_before=main_before, tip=tip)
    _write_owner(repo, held.record)


def update(repo: Repo, held: Held, *, tip: str, main_before: str | None = None) -> None:
    """Name the one move of main the hooks may let through (land, after G4)."""
    cur = read_owner(repo)
    if cur is None or cur.token != held.token:
        raise Refusal(
            "lock_lost",
            "the integration lock record changed under this land",
            next=["git lane reconcile", "git lane status"],
            details={"record": cur.public() if cur is not None else None},
        )
    held.record = replace(
        held.record,
        main_before=held.record.main_before if main_before is None else main_before,
        tip=tip,
    )
    _write_owner(repo, held.record)


def release(repo: Repo, held: Held) -> None:
    """Drop the owner record if it is still ours (a token check), then the flock."""
    cur = read_owner(repo)
    if cur is not None and cur.token == held.token:
        try:
            owner_path(repo).unlink()
        except FileNotFoundError:
            pass
    if held.flock.fd is not None:
        repo.store.event("lock_released", lane=held.record.lane, token=held.token)
    held.flock.release()


def clear_dead(repo: Repo) -> list[dict[str, Any]]:
    """Remove an owner record no live land of this host holds (its owner dead, or the
    flock free: a record cut short may name any live pid), and stop the gate a killed
    land left running (reconcile)."""
    rec = read_owner(repo)
    if rec is not None and could_be_landing(rec):
        return []
    if rec is None and not os.path.lexists(gate_path(repo)):
        return []
    fl = FileLock(flock_path(repo))
    if not fl.acquire(timeout=0):
        return []
    try:
        changes = stop_dead_gate(repo)
        cur = read_owner(repo)
        if rec is None or cur is None or could_be_landing(cur) or cur.token != rec.token:
            return changes
        owner_path(repo).unlink()
        repo.store.event(
            "lock_cleared", lane=rec.lane, code="lock_taken_over", previous=rec.public()
        )
        return [*changes, {"action": "lock_cleared", "pid": rec.pid, "lane": rec.lane}]
    finally:
        fl.release()


# -- the gate a land runs ---------------------------------------------------------------------
# A land SIGKILLed while its gate runs cannot stop the gate (its own session: the kernel
# does not end it with the land). It holds no lock (the flock is close-on-exec), but it
# would go on running, up to gate_timeout, in the lane (beside the next land's gate, or
# writing into the worktree being landed). So the land records the gate's session leader
# here while it runs, with the token gate.run put in its environment, and whoever holds
# the flock next finds it: a record there then can only be a dead land's, and its session
# is killed once procs.kill_session proves it the gate's (a planted record, or a pid reused
# by another session, kills nothing).
def gate_path(repo: Repo) -> Path:
    return repo.store.locks_dir / "integration.gate"


GATE_RECORD_MAX = 4096  # bytes: a record of ours is a few lines


def remember_gate(repo: Repo, lane: str, pid: int, token: str) -> None:
    """Record the running gate (key=value lines, as the owner record; temp + rename)."""
    ticks = procs.start_ticks(pid)
    text = f"pid={pid}\nticks={ticks}\nlane={lane}\nland={os.getpid()}\ntoken={token}\n"
    tmp = gate_path(repo).with_name(f".integration.gate.{os.getpid()}.tmp")
    ensure_dir(tmp.parent)
    tmp.write_text(text)
    os.replace(tmp, gate_path(repo))


def forget_gate(repo: Repo) -> None:
    try:
        os.unlink(gate_path(repo))
    except FileNotFoundError:
        pass
    except OSError:
        pass  # a directory in its place: stop_dead_gate sets it aside


def stop_dead_gate(repo: Repo) -> list[dict[str, Any]]:
    """The caller holds the flock: a gate recorded now is a dead land's. Kill its session
    (once proven the gate's) and drop the record; the changes: what was still running,
    and a record that is no record of ours (a FIFO, a symlink, a directory, too large,
    not text), kept aside."""
    path = gate_path(repo)
    try:
        text = read_regular(path, follow=False, limit=GATE_RECORD_MAX).decode()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError):
        # never read (a FIFO would hang this land and every one behind it): kept aside
        try:
            aside = set_aside(path) or move_aside(path, str(os.getpid()))
        except FileNotFoundError:
            return []
        repo.store.event("warning", code="state_corrupt", path=str(path), to=str(aside))
        return [{"action": "gate_record_set_aside", "path": str(path), "to": str(aside)}]
    kv = dict(line.partition("=")[::2] for line in text.splitlines())
    pid = int(kv["pid"]) if kv.get("pid", "").isdigit() else 0
    killed = procs.kill_session(pid, kv.get("ticks", ""), kv.get("token", "")) if pid else []
    forget_gate(repo)
    if not killed:
        return []
    lane = kv.get("lane", "")
    repo.store.event("gate_stopped", lane=lane or None, pid=pid, killed=killed)
    return [{"action": "gate_stopped", "pid": pid, "lane": lane}]
