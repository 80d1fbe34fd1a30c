"""`git lane log`: the audit log (every action and every refusal), filtered."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime
from typing import Any

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


def run(
    repo: Repo, lane: str | None = None, since: float | None = None, limit: int | None = None
) -> LogResult:
    evs = [
        e
        for e in map(typed, repo.store.events())
        if (lane is None or e["lane"] == lane) and (since is None or e["ts"] >= since)
    ]
    if limit is not None:
        evs = evs[-limit:] if limit > 0 else []
    return {"ok": True, "code": "ok", "events": evs}


def typed(e: dict[str, Any]) -> dict[str, Any]:
    """An event with the fields every reader relies on of their types: `ts` a finite
    float (0.0 when unusable), `kind` and `code` strings, `lane` and `time` a string or
    None. A line someone wrote by hand (or a future version) keeps its other fields, and
    each replaced value is kept under `invalid`, so the log hides nothing."""
    out = dict(e)
    bad: dict[str, Any] = {}
    ts = e.get("ts")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts):
        out["ts"] = float(ts)
    else:
        out["ts"] = 0.0
        if "ts" in e:
            bad["ts"] = repr(ts) if isinstance(ts, float) else ts  # NaN/Infinity are not JSON
    for name, default, optional in (
        ("kind", "invalid", False),
        ("code", "invalid", False),
        ("lane", None, True),
        ("time", None, True),
    ):
        v = e.get(name)
        if isinstance(v, str) or (optional and v is None):
            out[name] = v
        else:
            out[name] = default
            if name in e:
                bad[name] = v
    if bad:
        out["invalid"] = bad
    return out
