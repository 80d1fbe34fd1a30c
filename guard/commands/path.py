"""`git lane path [KEY]`: the lane's worktree path, alone on stdout, so that
`cd "$(git lane path KEY)"` works."""

from __future__ import annotations

from guard import lane
from guard.repo import Repo
from guard.results import PathResult


def run(repo: Repo, key: str | None) -> PathResult:
    key = lane.current(repo, key, "path")
    rec = lane.get(repo, key)
    if rec.status == "released":
        raise lane.not_active_refusal(repo, rec, "is released: it has no worktree")
    return {"ok": True, "code": "ok", "key": key, "path": rec.path}
