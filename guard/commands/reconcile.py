"""`git lane reconcile`: bring the registry, the lock and a half-done land in line with git.
Finishes or rolls back a land that died, clears a dead owner's lock record, marks lanes
whose worktree vanished orphaned (and back), adopts lane worktrees nobody registered,
sets aside corrupt records, rebuilds a corrupt epoch and gives the last land its landed
ref when it has none."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from guard import git, landed, landing, lane, lock, policy, procs
from guard.repo import Repo
from guard.results import ReconcileResult
from guard.store import LaneRecord, now_iso


def run(repo: Repo) -> ReconcileResult:
    lane.forbid_worker("reconcile")
    changes: list[dict[str, Any]] = repo.store.repair_layout()  # directories where files belong
    changes.extend(landing.recover(repo))
    changes.extend(lock.clear_dead(repo))
    with lane.registry_lock(repo):
        wts = repo.worktrees()
        idx = git.by_path(wts)
        known: dict[str, LaneRecord] = {}
        for k in repo.store.lane_keys():
            rec = repo.store.read_lane(k)
            if rec is None:
                bad = repo.store.lane_path(k)
                aside = bad.with_name(f"{bad.name}.corrupt-{os.getpid()}")
                os.replace(bad, aside)
                changes.append({"action": "corrupt_record_moved", "lane": k, "to": str(aside)})
                continue
            known[k] = rec
        for rec in known.values():
            changes.extend(_reconcile_lane(repo, rec, idx))
        registered = {os.path.realpath(r.path) for r in known.values() if r.status != "released"}
        for wt in wts:
            if not wt.branch or not wt.branch.startswith("refs/heads/lane/") or not wt.exists:
                continue
            k = wt.branch[len("refs/heads/lane/") :]
            if os.path.realpath(wt.path) in registered or not policy.valid_key(k):
                continue
            if k in known and known[k].status != "released":
                continue
            repo.store.write_lane(
                LaneRecord(key=k, branch=lane.branch_of(k), path=wt.path, created_at=now_iso())
            )
            lane.write_marker(repo, wt.path, k)
            changes.append({"action": "adopted", "lane": k, "path": wt.path})
    if not repo.store.epoch_is_valid():
        landing.repair_epoch(repo)
        changes.append({"action": "epoch_repaired"})
    changes.extend(landing.keep_last(repo))
    for ref in landed.clear_forgeries(repo, None):
        changes.append({"action": "forged_symbolic_ref_removed", "ref": ref})
    if changes:
        repo.store.event("reconcile", changes=changes)
    return {"ok": True, "code": "reconciled" if changes else "ok", "changes": changes}


def _reconcile_lane(
    repo: Repo, rec: LaneRecord, idx: dict[str, git.Worktree]
) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    wt = idx.get(os.path.realpath(rec.path))
    # the worktree is there (whatever it has checked out: status and land name a wrong
    # branch themselves); only a vanished worktree orphans a lane
    present = wt is not None and wt.exists
    new = rec
    if rec.status == "active" and not present:
        new = replace(new, status="orphaned")
    elif rec.status == "orphaned" and present:
        new = replace(new, status="active")
    if new.status == "active" and present and lane.read_marker(rec.path) != rec.key:
        lane.write_marker(repo, rec.path, rec.key)  # the hooks tell a lane by it
        changes.append({"action": "marker_written", "lane": rec.key})
    if new.owner_pid and not procs.alive(new.owner_pid, new.owner_start):
        new = replace(new, owner_pid=None, owner_start=None)
        changes.append({"action": "owner_cleared", "lane": rec.key, "pid": rec.owner_pid})
    if new.status != rec.status:
        changes.append({"action": new.status, "lane": rec.key, "from": rec.status})
    if new != rec:
        repo.store.write_lane(new)
    return changes
