"""`git lane release KEY`: remove a lane's worktree and branch (G11: never while it holds
unlanded or uncommitted work, unless `--confirm yes-discard-lane`; a dirty lane that is
kept is `git worktree lock`ed)."""

from __future__ import annotations

import os
from dataclasses import replace

from guard import git, lane
from guard.errors import Refusal
from guard.lane import CONFIRM, LOCK_REASON
from guard.repo import Repo
from guard.results import ReleaseResult
from guard.store import now_iso

ZERO = "0" * 40


def run(repo: Repo, key: str | None, confirm: str | None = None) -> ReleaseResult:
    lane.forbid_worker("release")
    if key is None:
        raise Refusal("unknown_lane", "release needs a lane key", next=["git lane status", "git lane release <KEY>"])
    rec = lane.get(repo, key)
    if rec.status == "released":
        return {"ok": True, "code": "already_released", "lane": key}
    lane.owner_conflict(repo, rec, "release")
    common = repo.common_dir
    main_sha = repo.main_sha()
    branch_ref = f"refs/heads/{rec.branch}"
    tip = repo.ref_sha(branch_ref)
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    present = wt is not None and wt.exists
    unlanded: list[str] = []
    if tip is not None and not git.is_ancestor(common, tip, main_sha):
        unlanded = git.run(["log", "--format=%h %s", f"{main_sha}..{tip}"], common).lines()
    dirty = git.dirty_paths(rec.path) if present else []
    rebase = present and git.rebase_in_progress(rec.path)
    # commits made on a detached HEAD in the lane are on no branch: removing the worktree
    # (and with it HEAD's reflog) would lose them silently
    head = wt.head if present and wt is not None and wt.branch is None and not rebase else None
    detached: list[str] = []
    if head and head.strip("0"):
        detached = git.run(["log", "--format=%h %s", head, "--not", main_sha, *([tip] if tip else [])], common).lines()
    g11_keep_work(repo, key, rec.path, rec.branch, present, confirm == CONFIRM, unlanded, dirty, rebase, detached, tip, head)
    if present:
        if confirm == CONFIRM:
            git.run(["worktree", "unlock", rec.path], common, check=False)
            git.run(["worktree", "remove", "--force", "--force", rec.path], common)
        else:
            _remove_clean_worktree(repo, key, rec.path)
    elif wt is not None:
        git.run(["worktree", "remove", "--force", rec.path], common, check=False)
    if tip is not None:
        hub = repo.hub()
        if not unlanded and hub is not None:
            git.run(["branch", "-d", rec.branch], hub.path)
        else:
            # CAS delete: only the tip we inspected above is dropped
            git.run(["update-ref", "-m", f"git-lane: release {key}", "-d", branch_ref, tip], common)
    new = replace(rec, status="released", released_at=now_iso(), released_tip=tip, owner_pid=None, owner_start=None)
    repo.store.write_lane(new)
    repo.store.event(
        "release",
        lane=key,
        code="released",
        tip=tip,
        discarded_commits=unlanded,
        discarded_paths=dirty[:200],
        discarded_head=head if detached else None,
    )
    return {
        "ok": True,
        "code": "released",
        "lane": key,
        "tip": tip,
        "discarded_commits": unlanded,
        "discarded_paths": dirty,
        "discarded_detached": detached,
        "recover": f"git branch {rec.branch} {tip}" if unlanded and tip else None,
        "recover_detached": f"git branch {rec.branch}-detached {head}" if detached else None,
    }


def g11_keep_work(
    repo: Repo,
    key: str,
    path: str,
    branch: str,
    present: bool,
    confirmed: bool,
    unlanded: list[str],
    dirty: list[str],
    rebase: bool,
    detached: list[str],
    tip: str | None,
    head: str | None,
) -> None:
    """G11: a lane with unlanded or uncommitted work is never removed unconfirmed; a dirty
    one that is kept is `git worktree lock`ed so no prune takes it either."""
    if not (unlanded or dirty or rebase or detached) or confirmed:
        return
    if dirty and present:
        git.run(["worktree", "lock", "--reason", LOCK_REASON, path], repo.common_dir, check=False)
    what = []
    if unlanded:
        what.append(f"{len(unlanded)} unlanded commit(s) on {branch}")
    if dirty:
        what.append(f"{len(dirty)} uncommitted path(s) in {path}")
    if rebase:
        what.append("a sync in progress")
    if detached:
        what.append(f"{len(detached)} commit(s) on a detached HEAD in {path}")
    raise Refusal(
        "unlanded_work",
        f"lane {key} has " + " and ".join(what) + "; releasing would lose them",
        next=[f"git lane land {key}", f"git lane release {key} --confirm {CONFIRM}"],
        details={
            "lane": key,
            "commits": unlanded[:50],
            "dirty_paths": dirty[:50],
            "detached_commits": detached[:50],
            "tip": tip,
            "head": head,
        },
    )


def _remove_clean_worktree(repo: Repo, key: str, path: str) -> None:
    """Remove a lane worktree with nothing to lose. The lock a refused release put on it
    (while it was dirty) no longer has a reason and is lifted; anyone else's lock is
    respected; whatever else makes git refuse is a refusal, not a crash."""
    gd = git.worktree_git_dir(path)
    try:
        reason = (gd / "locked").read_text().strip() if gd is not None and (gd / "locked").is_file() else None
    except OSError:
        reason = ""
    common = repo.common_dir
    if reason is not None:
        if reason != LOCK_REASON:
            raise Refusal(
                "worktree_locked",
                f"the worktree of lane {key} is locked ({reason or 'no reason given'}); it was left as it is",
                next=[f"git worktree unlock {git.q(path)}", f"git lane release {key}"],
                details={"lane": key, "path": path, "reason": reason},
            )
        git.run(["worktree", "unlock", path], common, check=False)
    res = git.run(["worktree", "remove", path], common, check=False)
    if not res.ok:
        if reason == LOCK_REASON:
            git.run(["worktree", "lock", "--reason", LOCK_REASON, path], common, check=False)
        raise Refusal(
            "worktree_remove_failed",
            f"git could not remove the worktree of lane {key}: {res.stderr.strip()[:300]}",
            next=[f"git -C {git.q(path)} status", f"git lane release {key} --confirm {CONFIRM}"],
            details={"lane": key, "path": path, "stderr": res.stderr},
        )
