"""`git lane status [KEY]`: main, the hub, the lock and every lane, each with the next
command to run. Read-only: looks without taking any lane's index lock."""

from __future__ import annotations

from typing import Any

from guard import git, lane, lock
from guard.repo import Repo
from guard.results import LaneView, LockView, StatusResult


def lock_view(repo: Repo) -> LockView | None:
    rec = lock.read_owner(repo)
    if rec is None:
        return None
    return {"pid": rec.pid, "lane": rec.lane, "since": rec.since, "host": rec.host, "alive": lock.owner_alive(rec)}


def run(repo: Repo, key: str | None = None) -> StatusResult:
    if lane.bound_lane() is not None or key is not None:
        key = lane.resolve_key(key, "status")  # status is read-only: an unbound worker sees all
    main_sha = repo.main_sha()
    wts = repo.worktrees()
    hub = repo.hub(wts)
    records = repo.store.lanes()
    if key is not None:
        lane.check_key(key)
        records = [r for r in records if r.key == key]
        if not records:
            lane.get(repo, key)  # raises unknown_lane
    idx = git.by_path(wts)
    tips = lane.tips(repo)
    # the hub first: with a worktree as big as any lane's, it should not be the straggler
    jobs: list[Any] = [("hub", hub.path)] if hub is not None else []
    jobs.extend(("lane", r) for r in records)

    def one(job: Any) -> Any:
        kind, arg = job
        if kind == "hub":
            return git.dirty_paths(arg)
        return lane.view(repo, arg, main_sha, idx, tips)

    results = git.parallel(one, jobs)
    lanes: list[LaneView] = [r for j, r in zip(jobs, results, strict=True) if j[0] == "lane"]
    hub_dirty: list[str] = results[0] if hub is not None else []
    return {
        "ok": True,
        "code": "ok",
        "epoch": repo.store.read_epoch().epoch,
        "main": {"branch": repo.main_branch, "sha": main_sha},
        "hub": {"path": hub.path if hub else None, "dirty_paths": hub_dirty},
        "lock": lock_view(repo),
        "landing": repo.store.landing_path.exists(),
        "lanes": lanes,
        "warnings": repo.config.warnings,
    }
