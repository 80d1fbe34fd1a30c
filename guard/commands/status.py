"""`git lane status [KEY]`: main, the hub, the lock and every lane, each with the next
command to run. Read-only: looks without taking any lane's index lock."""

from __future__ import annotations

from typing import Any

from guard import git, lane, lock
from guard.commands.land import hub_next
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

    # Out of step: the last land moved main but git could not carry the hub along, so the
    # hub's index still holds main_before's entries at the paths that land changed (G6 had
    # made sure the hub had no edits of its own there). Only asked while main is where
    # that land left it, and a hub is there.
    ep = repo.store.read_epoch()
    step = hub is not None and ep.main_after == main_sha and bool(ep.main_before) and bool(ep.paths)
    if step:
        jobs.insert(1, ("step", hub))

    def one(job: Any) -> Any:
        kind, arg = job
        if kind == "hub":
            return git.dirty_paths(arg)
        if kind == "step":
            return git.index_matches(arg.path, str(ep.main_before), ep.paths)
        return lane.view(repo, arg, main_sha, idx, tips)

    results = git.parallel(one, jobs)
    lanes: list[LaneView] = [r for j, r in zip(jobs, results, strict=True) if j[0] == "lane"]
    hub_dirty: list[str] = results[0] if hub is not None else []
    out_of_step = bool(results[1]) if step else False
    warnings = list(repo.config.warnings)
    if out_of_step and hub is not None:
        warnings.append(
            f"the hub {hub.path} is out of step with main: the land of {ep.lane} moved main but git could not "
            f"update the hub; run: {hub_next(hub.path, str(ep.main_before), main_sha)}"
        )
    return {
        "ok": True,
        "code": "ok",
        "epoch": ep.epoch,
        "main": {"branch": repo.main_branch, "sha": main_sha},
        "hub": {"path": hub.path if hub else None, "dirty_paths": hub_dirty, "out_of_step": out_of_step},
        "lock": lock_view(repo),
        "landing": repo.store.landing_path.exists(),
        "lanes": lanes,
        "warnings": warnings,
    }
