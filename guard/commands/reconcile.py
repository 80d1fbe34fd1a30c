"""`git lane reconcile`: bring the registry, the lock and a half-done land in line with git.
Finishes or rolls back a land that died (and a release), clears a dead owner's lock record, marks lanes
whose worktree vanished orphaned (and back), adopts lane worktrees nobody registered,
sets aside corrupt records (kept as *.corrupt-<time>) and rebuilds them from git,
rebuilds a corrupt epoch and gives the last land its landed
ref when it has none."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from guard import git, gitlocks, landed, landing, lane, lock, objects, policy, procs, recovery
from guard.commands import release, repair
from guard.errors import Refusal
from guard.repo import Repo
from guard.results import ReconcileResult
from guard.store import LaneRecord, now_iso


def run(repo: Repo) -> ReconcileResult:
    lane.forbid_worker("reconcile")
    changes: list[dict[str, Any]] = repo.store.repair_layout()  # directories where files belong
    # what admin_unreadable names (a FIFO, a link, a bad HEAD in an admin dir), by fds,
    # before anything lists the worktrees (git cannot while they are there)
    mended = recovery.mend_admin(repo)
    changes.extend(mended)
    _stuck(repo, mended)
    changes.extend(landing.recover(repo))
    changes.extend(lock.clear_dead(repo))
    changes.extend(_sweep_gate_worktrees(repo))
    objects.forget(repo)  # alternates entries of lane stores a worktree prune took
    with lane.registry_lock(repo):
        wts = repo.worktrees()
        idx = git.by_path(wts)
        changes.extend(release.recover(repo, idx))  # a release that died part way
        if any(c["action"] == "release_finished" for c in changes):
            wts = repo.worktrees()
            idx = git.by_path(wts)
        known: dict[str, LaneRecord] = {}
        for k in repo.store.lane_keys():
            rec = repo.store.read_lane(k)
            if rec is None:  # kept aside as *.corrupt-<time>, rebuilt from git when it can be
                rec, done = recovery.rebuild_record(repo, k, wts, repair.default_path(repo, k))
                changes.extend(done)
                if rec is None:
                    continue
            known[k] = rec
        for rec in known.values():
            changes.extend(_reconcile_lane(repo, rec, idx))
        changes.extend(_packed_refs_lock(repo))
        registered = {os.path.realpath(r.path) for r in known.values() if r.status != "released"}
        for wt in wts:
            if not wt.branch or not wt.branch.startswith("refs/heads/lane/") or not wt.exists:
                continue
            k = wt.branch[len("refs/heads/lane/") :]
            if os.path.realpath(wt.path) in registered or not policy.valid_key(k):
                continue
            if k in known and known[k].status != "released":
                continue
            admin = recovery.own_admin(repo, wt.path, known.values())
            if admin is None:
                continue  # a path only a (lane-writable) gitdir file names: never a lane
            repo.store.write_lane(
                LaneRecord(
                    key=k,
                    branch=lane.branch_of(k),
                    path=wt.path,
                    created_at=now_iso(),
                    admin=admin.name,
                )
            )
            lane.write_marker(repo, wt.path, k)
            changes.append({"action": "adopted", "lane": k, "path": wt.path})
    changes.extend(_sanitize_lane_stores(repo))
    newest = landed.newest_ref(repo)
    behind = newest is not None and repo.store.read_epoch().epoch < newest.epoch
    if not repo.store.epoch_is_valid() or (
        behind
        and (proved := landed.newest_vouched(repo)) is not None
        and repo.store.read_epoch().epoch < proved.epoch
    ):  # unreadable, or set back behind a land the audit log proves (by hand); never
        # raised to a landed ref alone, which anything running git with the hooks off writes
        landing.repair_epoch(repo)
        changes.append({"action": "epoch_repaired"})
    changes.extend(landing.keep_last(repo))
    # one set aside (a FIFO there: oversize); epoch.json's land, when keep_last could not
    # prove it, is not reported twice
    changes.extend(c for c in landing.keep_vouched(repo) if c not in changes)
    changes.extend(landed.ensure_baseline(repo, new=False))  # deleted past the hooks
    for ref in landed.clear_forgeries(repo, None):
        changes.append({"action": "forged_symbolic_ref_removed", "ref": ref})
    if changes:
        repo.store.event("reconcile", changes=changes)
    out: ReconcileResult = {
        "ok": True,
        # a land left to its live owner is noted, not reconciled
        "code": "reconciled" if any(c["action"] not in LEFT for c in changes) else "ok",
        "changes": changes,
    }
    nxt, warnings = _needs_repair(repo)
    warnings.extend(
        f"{r.ref} ({r.sha[:12]}) is vouched by no land (no land event, no landing under way, "
        "not epoch.json's land): written past the hooks, it is not taken as landed; "
        "`git lane doctor` names the command that removes it"
        for r in landed.unvouched(repo)
    )
    warnings.extend(
        f"the state files name land {c['epoch']} at {c['sha'][:12]}, which no landed ref "
        f"records, and {c['reason']}: no landed ref was written (epoch.json, the audit log "
        "and landing.json are plain files; `git lane doctor` says more)"
        for c in changes
        if c["action"] == "landed_ref_unproven"
    )
    if warnings:
        out["next"] = nxt
        out["warnings"] = warnings
    return out


# noted, not reconciled
LEFT = ("landing_left", "git_lock_left", "landed_ref_unproven", "baseline_ref_unproven")


def _git_locks(repo: Repo, rec: LaneRecord, present: bool) -> list[dict[str, Any]]:
    """The lane's stale git locks lifted (guard/gitlocks.py), only while its pointers are
    intact: a record naming another admin dir (a planted `admin`, a symlink under
    worktrees/) would have another lane's, or the hub's, locks judged as this lane's. A
    worktree gone by hand (not `present`) has no `.git` to measure: its admin dir's own
    pointers (`commondir`, and `gitdir` naming the lane) must still hold, and its locks
    are lifted too, as release (which reads that admin dir) refuses lane_busy on them
    with reconcile as next."""
    faults = recovery.pointer_faults(repo, rec, checkout=present)
    admin = repo.store.admin_dir(rec)
    if faults or not gitlocks.admin_ok(repo, admin):
        left = [str(p) for p in gitlocks.present(admin)] if gitlocks.admin_ok(repo, admin) else []
        why = faults or [f"its admin dir {admin} is not git's"]
        if not left:
            return []  # doctor names the faults, with `git lane repair KEY`
        return [{"action": "git_lock_left", "lane": rec.key, "files": left, "why": why}]
    out: list[dict[str, Any]] = []
    gone = gitlocks.clear(repo, rec.key, rec.path, admin)
    if gone:
        out.append(
            {
                "action": "git_lock_removed",
                "lane": rec.key,
                "files": [g["file"] for g in gone],
                "lifted": gone,
            }
        )
    removed, left_ref = gitlocks.clear_ref(repo, rec.branch, rec.path)
    if removed:
        out.append({"action": "git_lock_removed", "lane": rec.key, "files": [removed]})
    if left_ref:
        out.append(
            {
                "action": "git_lock_left",
                "lane": rec.key,
                "files": [left_ref],
                "why": ["a git process works in the repository (it may be writing the branch)"],
            }
        )
    return out


def _sanitize_lane_stores(repo: Repo) -> list[dict[str, Any]]:
    """What is no object in the own store of a lane no live exec owns (a FIFO a sandboxed
    CMD planted blocks every git read of it) is removed (guard/objects.py sanitize); a
    lane whose exec still runs is left to it (exec sanitizes its store when CMD ends)."""
    out: list[dict[str, Any]] = []
    for rec in repo.store.lanes():
        if rec.status == "released" or procs.alive(rec.owner_pid, rec.owner_start):
            continue
        store = objects.lane_store(repo.common_dir, rec.path)
        removed = objects.sanitize(repo, store, rec.key) if store else []
        if removed:
            out.append({"action": "lane_store_sanitized", "lane": rec.key, "removed": removed})
    return out


def _stuck(repo: Repo, mended: list[dict[str, Any]]) -> None:
    """A mend that could not remove what blocks git (a directory no chmod opens to the
    owner: immutable or append-only, root's doing) ends here, named with the reason:
    reconcile again would only say the same."""
    stuck = [
        (os.path.join(c["admin"], f["path"]), f["why"]) for c in mended for f in c.get("failed", ())
    ]
    if not stuck or not git.admin_blocks(repo.common_dir):
        return
    dirs = sorted({os.path.dirname(p) for p, _ in stuck})
    raise Refusal(
        "admin_unreadable",
        "reconcile could not mend a lane's admin dir: "
        + ", ".join(f"{git.shown(p)} ({why})" for p, why in stuck[:5])
        + (" ..." if len(stuck) > 5 else "")
        + "; the directory refuses its owner (immutable or append-only: only root sets or "
        "clears that), so nothing else was done",
        next=[
            f"{'sudo ' if os.geteuid() else ''}chattr -i -a -- {' '.join(git.q(d) for d in dirs[:10])}",
            "git lane reconcile",
        ],
        details={"failed": [{"path": p, "why": why} for p, why in stuck[:100]]},
    )


def _sweep_gate_worktrees(repo: Repo) -> list[dict[str, Any]]:
    """Clean gate worktrees a killed land left (the next land sweeps them too), found by
    the records land makes of them in git-lane's state (gate.recorded: never by a
    `git-lane-gate-*` admin dir's name alone, which the owner's own worktree may have, nor
    by a path a lane's or a gate's `gitdir` says): removed under the integration lock,
    when no land runs (so none of them is a live gate's); an admin dir that cannot be
    removed is moved into kept/. Unrecorded ones are left (doctor names them)."""
    from guard import gate
    from guard.store import FileLock

    if not gate.recorded(repo.common_dir):
        return []
    fl = FileLock(lock.flock_path(repo))
    if not fl.acquire(timeout=0):
        return []
    try:
        gone = gate.sweep(repo.common_dir)
    finally:
        fl.release()
    out: list[dict[str, Any]] = []
    for g in gone:
        if g["left"]:
            out.append({"action": "gate_admin_left", "admin": g["admin"]})
            continue
        if g["tree_left"]:  # no worktree to git any more; its files are named, not removed
            out.append(
                {
                    "action": "gate_worktree_left",
                    "path": g["tree_left"],
                    "admin": g["admin"],
                    "why": "something in it could not be removed through directory fds",
                    "next": [f"rm -rf -- {git.q(g['tree_left'])}"],
                }
            )
            continue
        change: dict[str, Any] = {"action": "gate_worktree_removed", "path": g["path"]}
        change["admin"] = g["admin"]
        if g["kept"]:
            change["kept"] = g["kept"]
        out.append(change)
    return out


def _needs_repair(repo: Repo) -> tuple[list[str], list[str]]:
    """Lanes reconcile leaves to `git lane repair` (the commands, and why): a worktree
    that is missing may only have been moved (so nothing is checked out in its place
    unasked), and a branch deleted or moved by hand is put back only when asked."""
    nxt: list[str] = []
    why: list[str] = []
    for rec in repo.store.lanes():
        if rec.status == "released":
            continue
        facts = recovery.branch_facts(
            repo, rec.path, rec.branch, repo.ref_sha(f"refs/heads/{rec.branch}")
        )
        if facts.state == "missing" and facts.recorded is None:
            why.append(
                f"lane {rec.key}: its branch {rec.branch} is gone and nothing in git records its "
                f"last commit; `git lane release {rec.key} --confirm yes-discard-lane` drops the lane"
            )
            continue
        if facts.state == "missing":
            what = f"its branch {rec.branch} was deleted"
        elif facts.state == "moved":
            what = f"its branch {rec.branch} was moved outside the lane"
        elif rec.status == "orphaned":
            what = f"its worktree {rec.path} is missing"
        else:
            continue
        nxt.append(f"git lane repair {rec.key}")
        why.append(
            f"lane {rec.key}: {what}; reconcile does not guess, `git lane repair {rec.key}` puts it back"
        )
    why.extend(_synced_since_ready(repo))
    return nxt, why


def _synced_since_ready(repo: Repo) -> list[str]:
    """A lane rebased onto main since its ready mark (a one-by-one queue killed while its
    gate ran leaves the lane synced, its mark at the old tip): said, never undone here."""
    from guard import ready  # here, not at the top: other branches edit that import line

    out: list[str] = []
    main = repo.ref_sha(repo.main_ref)
    for m in ready.all_marks(repo.state_dir):
        rec = repo.store.read_lane(m.key)
        if rec is None or rec.status != "active" or main is None:
            continue
        with objects.reading(repo, rec.path):  # its commits may be in its own store only
            tip = repo.ref_sha(f"refs/heads/{rec.branch}")
            if tip is None or tip == m.tip or git.is_ancestor(repo.common_dir, m.tip, tip):
                continue  # unmoved, or committed on top: an ordinary stale mark
            then = git.merge_base(repo.common_dir, main, m.tip)
            now = git.merge_base(repo.common_dir, main, tip)
            if (
                not then
                or not now
                or then == now
                or not git.is_ancestor(repo.common_dir, then, now)
            ):
                continue  # not moved onto a later main
        out.append(
            f"lane {m.key}: rebased since it was marked ready (mark at {m.tip[:12]}, now "
            f"{tip[:12]}; a queue stopped while its gate ran leaves it so): "
            f"`git lane ready {m.key}` marks the synced tip, or "
            f"`{git.owner_git(rec.path)} reset --keep {m.tip}` puts it back"
        )
    return out


def _packed_refs_lock(repo: Repo) -> list[dict[str, Any]]:
    """`packed-refs.lock` a dead `gc`/`pack-refs` left (old, no live git in the
    repository): removed, as every ref delete (a release's) fails on it; one a live git
    may hold is left, noted."""
    removed, left = gitlocks.clear_packed_refs(repo)
    if removed:
        return [{"action": "git_lock_removed", "files": [removed]}]
    if left:
        return [
            {
                "action": "git_lock_left",
                "files": [left],
                "why": ["a git process works in the repository (it may be packing refs)"],
            }
        ]
    return []


def _reconcile_lane(
    repo: Repo, rec: LaneRecord, idx: dict[str, git.Worktree]
) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    wt = idx.get(os.path.realpath(rec.path))
    # the worktree is there (whatever it has checked out: status and land name a wrong
    # branch themselves); only a vanished worktree orphans a lane
    present = wt is not None and wt.exists
    if (
        rec.status == "released"
        and wt is not None
        and not present
        and wt.branch == f"refs/heads/{rec.branch}"
    ):
        # a release killed inside its `git worktree remove` (before its journal was
        # finished this way): what is left of the directory, and git's record of it
        changes.extend(release.finish_removal(repo, rec, rec.released_tip))
    new = rec
    if rec.status == "active" and not present:
        new = replace(new, status="orphaned")
    elif rec.status == "orphaned" and present:
        new = replace(new, status="active")
    if new.status == "active" and present and release.thaw_dead(rec.path):
        changes.append({"action": "release_lock_cleared", "lane": rec.key})
    if new.status == "active" and present and lane.read_marker(rec.path) != rec.key:
        lane.write_marker(repo, rec.path, rec.key)  # the hooks tell a lane by it
        changes.append({"action": "marker_written", "lane": rec.key})
    if new.status in ("active", "orphaned") and wt is not None:  # its admin dir is git's
        changes.extend(_git_locks(repo, rec, present))
    if new.owner_pid and not procs.alive(new.owner_pid, new.owner_start):
        new = replace(new, owner_pid=None, owner_start=None)
        changes.append({"action": "owner_cleared", "lane": rec.key, "pid": rec.owner_pid})
    if new.status != rec.status:
        changes.append({"action": new.status, "lane": rec.key, "from": rec.status})
    if new != rec:
        repo.store.write_lane(new)
    return changes
