"""`git lane log`: the audit log (every action and every refusal), filtered."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from guard.repo import Repo
from guard.results import LogResult


def parse_since(text: str) -> float | None:
    """A duration (30m, 2h, 1d, 1w) before now, or an ISO time; None when it is neither."""
    m = re.fullmatch(r"(\d+)\s*([smhdw])", text.strip())
    if m:
        mult = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        return time.time() - int(m.group(1)) * mult
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def run(repo: Repo, lane: str | None = None, since: float | None = None, limit: int | None = None) -> LogResult:
    evs = [
        e
        for e in repo.store.events()
        if (lane is None or e.get("lane") == lane) and (since is None or _ts(e) >= since)
    ]
    if limit is not None:
        evs = evs[-limit:] if limit > 0 else []
    return {"ok": True, "code": "ok", "events": evs}


def _ts(e: dict[str, object]) -> float:
    ts = e.get("ts")
    return float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else 0.0
