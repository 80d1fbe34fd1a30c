"""`git lane ready [KEY] [--unset]`: mark the lane's committed state ready to land (or take
the mark back). A worker may mark its own lane. The mark names the tip: a lane that
moves afterwards is not ready in its new state until marked again (guard/ready.py)."""

from __future__ import annotations

import os
import time

from guard import git, lane, objects, procs, ready
from guard.errors import Refusal
from guard.repo import Repo
from guard.results import ReadyResult
from guard.store import now_iso


@git.in_own_context
def run(repo: Repo, key: str | None, unset: bool = False) -> ReadyResult:
    key = lane.current(repo, key, "ready", " --unset" if unset else "")
    rec = lane.get(repo, key)
    objects.use(repo, rec.path)  # its commits may be in its own store only
    if unset:
        gone = ready.remove(repo.state_dir, key)
        repo.store.event("ready", lane=key, code="ready_unset", removed=gone)
        return {"ok": True, "code": "ready_unset" if gone else "ok", "lane": key, "mark": None}
    if rec.status == "orphaned":
        raise lane.missing_worktree_refusal(key, rec.path, "ready")
    if rec.status != "active":
        raise lane.not_active_refusal(repo, rec, f"is {rec.status}")
    # a lane with another live owner is that owner's to hand over
    lane.owner_conflict(repo, rec, "ready")
    if git.rebase_in_progress(rec.path):
        from guard.commands.sync import worklist

        raise lane.rebase_refusal(
            key, "in the middle of a sync", {"path": rec.path, "worklist": worklist(rec.path)}
        )
    dirty = git.dirty_paths(rec.path)
    if dirty:  # ready means the committed state: uncommitted work would be left behind
        raise lane.dirty_refusal(key, rec.path, dirty, "ready")
    tip = repo.ref_sha(f"refs/heads/{rec.branch}")
    main = repo.main_sha()
    if tip is None or git.is_ancestor(repo.common_dir, tip, main):
        raise Refusal(
            "nothing_to_land",
            f"lane {key} has no commits that main lacks: commit work in {rec.path}, then mark it ready",
            next=[f"git lane release {key}"],
            details={"lane": key, "path": rec.path},
        )
    owner_live = rec.owner_pid is not None and procs.alive(rec.owner_pid, rec.owner_start)
    mark = ready.Mark(
        key=key,
        tip=tip,
        at=now_iso(),
        by="worker" if lane.is_worker() else "owner",
        pid=os.getpid(),
        ts=time.time(),
        # owner_conflict passed: when the lane has a live owner, this process is it or
        # one it started, so the mark hands the lane to the queue for that owner
        owner_pid=rec.owner_pid if owner_live else None,
        owner_start=rec.owner_start if owner_live else None,
    )
    ready.write(repo.state_dir, mark)
    repo.store.event("ready", lane=key, code="ready", tip=tip, by=mark.by)
    return {
        "ok": True,
        "code": "ready",
        "lane": key,
        "mark": ready.view(mark, tip),
        "next": ["git lane queue" + (lane.OWNER_NOTE if lane.is_worker() else "")],
    }
