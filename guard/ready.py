"""Ready marks: `git lane ready KEY` records that the lane's committed state at one tip is
ready to land; `git lane queue` lands marked lanes in mark order.

A mark names the tip it was given for. "Ready" means "this state is ready": a lane that
moved after it was marked (a commit, a rebase, a reset) has not been said to be ready in
its new state, so its mark is stale and the queue skips the lane (`ready_stale`) until
it is marked again. Who marked it is recorded too: the lane's live owner (or a process
it started) marking it hands the lane to the queue; a mark made while the lane had no
live owner does not speak for an owner that started later (`lane_owner_conflict`).

Marks live in `<common-dir>/git-lane/ready/KEY.json`; a missing or corrupt file reads
as no mark."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from guard.policy import KEY_RE
from guard.store import atomic_write_json, read_regular

SCHEMA = 1
SHA_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


@dataclass(frozen=True)
class Mark:
    key: str
    tip: str
    at: str
    by: str  # "worker" (a process bound to the lane) or "owner"
    pid: int
    ts: float = 0.0  # time.time() of the mark: the queue's order
    owner_pid: int | None = None  # the lane's live owner when it was marked, if the marker was it
    owner_start: float | None = None
    schema: int = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Mark:
        """Raises ValueError on a missing field or a wrong type."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        if not isinstance(kw.get("key"), str) or not KEY_RE.fullmatch(kw["key"]):
            raise ValueError("ready mark: key is not a lane key")
        if not isinstance(kw.get("tip"), str) or not SHA_RE.fullmatch(kw["tip"]):
            raise ValueError("ready mark: tip is not a commit id")
        for name in ("at", "by"):
            if not isinstance(kw.get(name), str):
                raise ValueError(f"ready mark: {name} missing")
        if not isinstance(kw.get("pid"), int) or isinstance(kw.get("pid"), bool):
            raise ValueError("ready mark: pid missing")
        if not isinstance(kw.get("ts", 0.0), (int, float)):
            raise ValueError("ready mark: ts is not a number")
        op = kw.get("owner_pid")
        if op is not None and (not isinstance(op, int) or isinstance(op, bool)):
            raise ValueError("ready mark: owner_pid is not a pid")
        os_ = kw.get("owner_start")
        if os_ is not None and not isinstance(os_, (int, float)):
            raise ValueError("ready mark: owner_start is not a number")
        return cls(**kw)


def ready_dir(state_dir: Path) -> Path:
    return state_dir / "ready"


def mark_path(state_dir: Path, key: str) -> Path:
    return ready_dir(state_dir) / f"{key}.json"


def read(state_dir: Path, key: str) -> Mark | None:
    try:
        d = json.loads(read_regular(mark_path(state_dir, key)))
        return Mark.from_dict(d) if isinstance(d, dict) else None
    except (OSError, ValueError, RecursionError):
        return None


def write(state_dir: Path, mark: Mark) -> None:
    atomic_write_json(mark_path(state_dir, mark.key), mark.to_dict())


def remove(state_dir: Path, key: str) -> bool:
    try:
        os.unlink(mark_path(state_dir, key))
    except FileNotFoundError:
        return False
    return True


def all_marks(state_dir: Path) -> list[Mark]:
    """Every readable mark, oldest first (the queue's order)."""
    try:
        names = sorted(os.listdir(ready_dir(state_dir)))
    except OSError:
        return []
    out = []
    for n in names:
        if n.endswith(".json") and not n.startswith("."):
            m = read(state_dir, n[:-5])
            if m is not None:
                out.append(m)
    return sorted(out, key=lambda m: (m.ts, m.at, m.key))


def view(mark: Mark | None, tip: str | None) -> dict[str, Any] | None:
    """The `ready` field of a status lane: None when unmarked; `current` is false when
    the lane moved since it was marked (the mark is stale)."""
    if mark is None:
        return None
    return {"tip": mark.tip, "at": mark.at, "by": mark.by, "current": mark.tip == tip}
