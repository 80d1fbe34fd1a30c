"""`git lane repair KEY`: put one lane back together from what git still knows, after
something outside git-lane broke it. In order: an unreadable record is set aside and
rebuilt from git; a branch deleted or moved by hand goes back to the commit the lane's
worktree recorded (its HEAD reflog; a moved value with other commits is kept on a
rescue branch); a worktree deleted by hand is checked out again at its path (linked
back to git's admin dir when `git worktree prune` has not run, else `worktree add`).
Owner only, under the registry lock. Nothing is ever discarded to get there."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from guard import dirfd, git, lane, objects, recovery
from guard.errors import Refusal
from guard.lane import CONFIRM
from guard.repo import Repo
from guard.results import RepairResult
from guard.store import LaneRecord


def default_path(repo: Repo, key: str) -> str | None:
    """Where create puts the lane, when nothing else names its path."""
    try:
        return str(lane.worktrees_root(repo) / repo.slug / key)
    except Refusal:
        return None


@git.in_own_context
def run(
    repo: Repo,
    key: str,
    move_aside: bool = False,
    keep: tuple[str, ...] = (),
    into: str | None = None,
    ignore: tuple[str, ...] = (),
    set_aside: tuple[str, ...] = (),
) -> RepairResult:
    """`move_aside`: a directory at the lane's `.git` (a repository of its own) is renamed
    aside (kept) and the pointer written in its place; without it, refused. `keep`: paths
    of the lane's worktree moved into kept/`into` first (recovery.keep_paths), as the
    nexts of ignored_in_the_way and lane_index_unsafe name them. `ignore`: lines appended to
    the lane's top .gitignore (recovery.add_ignores), as lane_changed_during_gate names them.
    `set_aside`: submodules of the lane's worktree renamed aside (into kept/`into` when
    given) and left unpopulated (recovery.set_aside_submodules), last, once its pointers
    and worktree are back, as submodule_unreadable and submodule_differs name them."""
    lane.forbid_worker("repair", f"git lane repair {key}")
    lane.check_key(key)
    changes: list[dict[str, Any]] = []
    with lane.registry_lock(repo):
        if repo.store.read_lane(key) is None and repo.store.lane_file_exists(key):
            _, changes = recovery.rebuild_record(
                repo, key, repo.worktrees(), default_path(repo, key)
            )
            if repo.store.read_lane(key) is None:  # nothing in git to rebuild it from
                repo.store.event("repair", lane=key, changes=changes)
                return {"ok": True, "code": "repaired", "lane": key, "changes": changes}
        rec = lane.get(repo, key)
        # repair writes the lane's worktree (keep, a refill, submodules set aside): never
        # while a process of the lane runs (red team 16A F2; sync.py _lane)
        lane.owner_conflict(repo, rec, "repair")
        if rec.status == "released":
            raise Refusal(
                "lane_not_active",
                f"lane {key} is released; there is nothing to repair",
                next=[f"git lane create {key}"],
                details={"lane": key, "state": "released"},
            )
        wts = repo.worktrees()
        whose = lane.path_taken(repo, rec, wts)
        if whose is not None:
            # never written to: the record is moved to the lane's own checkout
            rec, moved = _move_off(repo, rec, wts, whose)
            changes.append(moved)
        if keep:
            changes.extend(recovery.keep_paths(repo, rec, list(keep), into))
        if ignore:
            changes.extend(recovery.add_ignores(rec, list(ignore)))
        objects.use(repo, rec.path)  # its commits may be in its own store only
        ref = f"refs/heads/{rec.branch}"
        facts = recovery.branch_facts(repo, rec.path, rec.branch, repo.ref_sha(ref))
        changes.extend(recovery.restore_branch(repo, rec, facts))
        # before git runs in the lane
        changes.extend(recovery.repair_pointers(repo, rec, move_aside))
        changes.extend(_head_back(repo, rec))
        wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
        if wt is None or not wt.exists:
            changes.extend(recovery.restore_worktree(repo, rec))
        changes.extend(recovery.repair_pointers(repo, rec))  # a worktree just checked out
        if set_aside:
            changes.extend(recovery.set_aside_submodules(repo, rec, list(set_aside), into))
        lane.write_repo_marker(repo, rec.path)
        if lane.read_marker(rec.path) != rec.key:
            lane.write_marker(repo, rec.path, rec.key)  # the hooks tell a lane by it
            if lane.read_marker(rec.path) == rec.key:
                changes.append({"action": "marker_written", "lane": key})
        if rec.status != "active":
            repo.store.write_lane(replace(rec, status="active"))
            changes.append({"action": "active", "lane": key, "from": rec.status})
    if changes:
        repo.store.event("repair", lane=key, changes=changes)
    warnings = [
        f"the moved value of {rec.branch} ({c['sha'][:12]}) had commits the lane's own tip lacks: "
        f"kept as {c['ref'].removeprefix('refs/heads/')}"
        for c in changes
        if c["action"] == "moved_value_kept"
    ]
    warnings += [
        f"submodule {git.shown(c['path'])} was set aside as {git.shown(c['to'])}, but something "
        "the lane made since is at its path (left as it is)"
        for c in changes
        if c["action"] == "submodule_set_aside" and "left" in c
    ]
    return {
        "ok": True,
        "code": "repaired" if changes else "ok",
        "lane": key,
        "changes": changes,
        "warnings": warnings,
    }


def _head_back(repo: Repo, rec: LaneRecord) -> list[dict[str, Any]]:
    """The lane's HEAD names another branch (`ref: refs/heads/main`, written in its admin
    dir or by a switch in the lane): it is pointed at the lane's branch again (only HEAD:
    the files and the index are left as they are, nothing committed moves). A rebase in
    progress (HEAD detached) is sync's, left to it."""
    admin = repo.store.admin_dir(rec)
    if admin is None or not admin.is_dir() or not os.path.isdir(rec.path):
        return []
    want = f"ref: refs/heads/{rec.branch}"
    try:
        text = git.read_admin(admin / "HEAD").strip()
    except OSError:
        return []  # no regular file: the admin walk refuses it, reconcile mends it
    if text == want or not text.startswith("ref: refs/heads/") or git.rebase_in_progress(rec.path):
        return []
    dirfd.write_file(str(admin), "HEAD", f"{want}\n".encode())
    return [{"action": "head_restored", "lane": rec.key, "from": text[len("ref: ") :]}]


def _move_off(
    repo: Repo, rec: LaneRecord, wts: list[git.Worktree], whose: str
) -> tuple[LaneRecord, dict[str, Any]]:
    """The record names a path that is not the lane's: it is pointed at the lane's own
    checkout, the worktree git has on the lane's branch (its admin dir's `gitdir` naming
    it), else at where create puts the lane (repair checks it out there). Nothing at the
    old path is touched."""
    old = os.path.realpath(rec.path)
    new, admin = None, None
    for w in wts:
        if w.branch == f"refs/heads/{rec.branch}" and w.exists and os.path.realpath(w.path) != old:
            # never a path only a (lane-writable) gitdir names: another lane's admin dir
            # naming this lane's branch and a directory of its choosing
            others = [r for r in repo.store.lanes() if r.key != rec.key]
            admin = recovery.own_admin(repo, w.path, others)
            if (
                admin is not None
                and lane.path_taken(repo, replace(rec, path=w.path, admin=admin.name), wts) is None
            ):
                new = w.path
                break
    if new is None:
        new = str(lane.worktrees_root(repo) / repo.slug / rec.key)
        admin = None
        if os.path.realpath(new) == old or lane.path_taken(
            repo, replace(rec, path=new, admin=None), wts
        ):
            raise Refusal(
                "worktree_path_exists",
                f"lane {rec.key}'s record names {rec.path}, which is {whose}, and its own "
                f"place {new} is taken too; nothing was changed",
                next=[
                    git.mv_aside(new, new + ".moved-aside"),
                    f"git lane repair {rec.key}",
                ]
                if os.path.lexists(new)
                else [f"git lane status {rec.key}"],
                alternatives=[f"git lane release {rec.key} --confirm {CONFIRM}"],
                details={"lane": rec.key, "path": rec.path, "taken_by": whose},
            )
    moved = replace(rec, path=new, admin=admin.name if admin is not None else None)
    repo.store.write_lane(moved)
    return moved, {
        "action": "record_path_moved",
        "lane": rec.key,
        "from": rec.path,
        "to": new,
        "because": f"{rec.path} is {whose}",
    }
