"""The integration lock (G1). Mutual exclusion is a kernel flock on
`locks/integration.flock` (dropped by the kernel when its holder dies); the owner record
`locks/integration.owner` holds pid, start, host, token, lane, main_before, tip, since as
`key=value` lines so the reference-transaction hook can read it from sh. Only the token
holder removes it; a record whose owner died on this host is taken over, one from another
host never automatically."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard import procs
from guard.errors import Refusal
from guard.repo import Repo
from guard.store import FileLock, now_iso

FIELDS = ("pid", "start", "host", "token", "lane", "main_before", "tip", "since", "start_ticks")


def _start_ticks(pid: int) -> str:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot), exactly as the
    reference-transaction hook reads it: with the pid, it names this very process, so a
    record left by a land that died does not open the door to a later process that
    happens to get the same pid. Empty where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
        return raw[raw.rfind(b")") + 2 :].split()[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


def owner_path(repo: Repo) -> Path:
    return repo.store.locks_dir / "integration.owner"


def flock_path(repo: Repo) -> Path:
    return repo.store.locks_dir / "integration.flock"


def read_owner(repo: Repo) -> dict[str, Any] | None:
    try:
        text = owner_path(repo).read_text()
    except (FileNotFoundError, OSError):
        return None
    rec: dict[str, Any] = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and k in FIELDS:
            rec[k] = v
    try:
        rec["pid"] = int(rec["pid"])
        rec["start"] = float(rec.get("start") or 0) or None
    except (KeyError, ValueError):
        rec["pid"] = 0
    return rec


def owner_alive(rec: dict[str, Any]) -> bool:
    if rec.get("host") and rec["host"] != procs.hostname():
        return True  # cannot tell: never assume another host's land is dead
    return procs.alive(rec.get("pid"), rec.get("start"))


def _write_owner(repo: Repo, rec: dict[str, Any]) -> None:
    """Temp file + rename, without fsync: the record means something only while its owner
    lives (after a power loss the flock is gone and the recorded pid and start time name
    no live process, so it is taken over), and two fsyncs per land are measurable."""
    body = "".join(f"{k}={'' if rec.get(k) is None else rec[k]}\n" for k in FIELDS)
    path = owner_path(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


@dataclass
class Held:
    flock: FileLock
    record: dict[str, Any]

    @property
    def token(self) -> str:
        return str(self.record["token"])


def _busy(repo: Repo, rec: dict[str, Any] | None, lane: str) -> Refusal:
    if rec is None:
        who, since = "another git lane process", "just now"
    else:
        who = f"pid {rec.get('pid')} on {rec.get('host')} landing lane {rec.get('lane')}"
        since = rec.get("since") or "?"
    foreign = rec is not None and rec.get("host") not in (None, "", procs.hostname())
    nxt = [f"git lane land {lane} --wait", "git lane status"]
    if foreign:
        nxt.append(f"(if that host's land is gone for good) rm '{owner_path(repo)}'")
    return Refusal(
        "lock_busy",
        f"the integration lock is held by {who} since {since}",
        next=nxt,
        details={"holder": {k: v for k, v in (rec or {}).items() if k != "token"} or None, "foreign_host": foreign},
    )


def acquire(repo: Repo, lane: str, main_before: str, tip: str, wait: float | None = None) -> Held:
    """Take the lock or raise lock_busy; with `wait`, keep trying for that many seconds."""
    import secrets  # pulls in OpenSSL via hmac: only a land needs it, never `status`

    deadline = None if wait is None else time.monotonic() + wait
    while True:
        fl = FileLock(flock_path(repo))
        remaining = 0.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if fl.acquire(timeout=remaining):
            old = read_owner(repo)
            if old is None or not owner_alive(old):
                if old is not None:
                    repo.store.event("lock_takeover", lane=lane, code="lock_taken_over", previous=old)
                rec = {
                    "pid": os.getpid(),
                    "start": procs.start_time(os.getpid()),
                    "host": procs.hostname(),
                    "token": secrets.token_hex(8),
                    "lane": lane,
                    "main_before": main_before,
                    "tip": tip,
                    "since": now_iso(),
                    "start_ticks": _start_ticks(os.getpid()),
                }
                _write_owner(repo, rec)
                # with lock_released, the audit log shows who held the lock when (and
                # that no two holders ever overlapped)
                repo.store.event("lock_acquired", lane=lane, token=rec["token"])
                return Held(fl, rec)
            fl.release()  # a live (or foreign) owner record without the flock: respect it
            busy = _busy(repo, old, lane)
        else:
            busy = _busy(repo, read_owner(repo), lane)
        if deadline is None or time.monotonic() >= deadline:
            raise busy
        time.sleep(0.05)


def update(repo: Repo, held: Held, **fields: str) -> None:
    cur = read_owner(repo)
    if cur is None or cur.get("token") != held.token:
        raise Refusal(
            "lock_lost",
            "the integration lock record changed under this land",
            next=["git lane reconcile", "git lane status"],
            details={"record": cur},
        )
    held.record.update(fields)
    _write_owner(repo, held.record)


def release(repo: Repo, held: Held) -> None:
    """Drop the owner record if it is still ours (a token check), then the flock."""
    cur = read_owner(repo)
    if cur is not None and cur.get("token") == held.token:
        try:
            owner_path(repo).unlink()
        except FileNotFoundError:
            pass
    if held.flock.fd is not None:
        repo.store.event("lock_released", lane=held.record.get("lane"), token=held.token)
    held.flock.release()


def clear_dead(repo: Repo) -> list[dict[str, Any]]:
    """Remove an owner record left by a dead process of this host (reconcile)."""
    rec = read_owner(repo)
    if rec is None or owner_alive(rec):
        return []
    fl = FileLock(flock_path(repo))
    if not fl.acquire(timeout=0):
        return []
    try:
        cur = read_owner(repo)
        if cur is None or owner_alive(cur) or cur.get("token") != rec.get("token"):
            return []
        owner_path(repo).unlink()
        repo.store.event("lock_cleared", lane=rec.get("lane"), code="lock_taken_over", previous=rec)
        return [{"action": "lock_cleared", "pid": rec.get("pid"), "lane": rec.get("lane")}]
    finally:
        fl.release()
