"""`git lane path [KEY]`: the lane's worktree path, alone on stdout, so that
`cd "$(git lane path KEY)"` works."""

from __future__ import annotations

import os

from guard import lane
from guard.repo import Repo
from guard.results import PathResult


def run(repo: Repo, key: str | None) -> PathResult:
    key = lane.current(repo, key, "path")
    rec = lane.get(repo, key)
    if rec.status == "released":
        raise lane.not_active_refusal(repo, rec, "is released: it has no worktree")
    if not os.path.isdir(rec.path):
        # `cd` to a directory that is gone fails; repair checks the branch out there again
        raise lane.missing_worktree_refusal(key, rec.path, "path")
    return {"ok": True, "code": "ok", "key": key, "path": rec.path}
