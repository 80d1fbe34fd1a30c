"""Cross-rebase (`auto_sync = true`): after a land, every idle lane that rebases cleanly
onto the new main is synced, as `git lane sync KEY` would sync it; every other lane is
left exactly as it was and reported with the reason (and, for a conflict, the paths).

Idle means: no live recorded owner, no land of it running, no setup_command running in
it, no git command writing in it (its index.lock), on its branch (not moved or deleted by
hand), no sync in progress, nothing uncommitted (tracked, untracked or
hidden by assume-unchanged/skip-worktree flags), and no ignored file where main now puts
a tracked one (a rebase would overwrite an ignored file without a word). Whether the
rebase is clean is predicted first with `git merge-tree --write-tree` of main and the
tip, which touches no worktree, index or ref: a lane that would conflict is never
touched. A rebase replays commit by commit, so it can still stop where the merge of the
two tips is clean (a change made and undone within the lane); then it is aborted at
once, which puts the branch, index and worktree back as they were (the lane's reflogs
keep a note of it).

A lane whose owner is alive is never rebased under it. The race (an exec starting
between the check and the rebase) is closed by the registry lock: `git lane exec`
records itself as the lane's owner only under that lock (exec._claim), so the final
check and the rebase run while holding it, one lane at a time; an exec that starts
meanwhile waits for it and then finds the lane already synced. What has no owner record
(a person, or a `shellenv` shell, working in the lane) is seen only by its uncommitted
changes, checked again under the lock just before the rebase (and git's rebase itself
refuses to start over changes). The integration lock is not taken: other lands go on
while lanes are synced (a land of a lane being synced re-checks its tip after its gate).

Nothing here raises into the land that called it: the land has happened. Failures are
reported in the result (`left`, or `error` when the whole pass stopped)."""

from __future__ import annotations

import os

from guard import git, lane, lock, objects, procs, recovery, sandbox
from guard.errors import GitError, Refusal
from guard.repo import Repo
from guard.results import AutoSyncLeft, AutoSyncResult, LandResult
from guard.store import LaneRecord

PATHS_CAP = 100


def enabled(repo: Repo) -> bool:
    return bool(repo.config["auto_sync"])


def after_land(repo: Repo, landed_key: str | None) -> AutoSyncResult:
    """Sync every idle lane but `landed_key` that rebases cleanly onto main's tip now."""
    out: AutoSyncResult = {"synced": [], "left": [], "main": ""}
    try:
        main_sha = repo.main_sha()
        out["main"] = main_sha
        for rec in sorted(repo.store.lanes(), key=lambda r: r.key):
            if rec.status == "released" or rec.key == landed_key:
                continue
            try:
                left = _one(repo, rec, main_sha)
            except Refusal as r:
                left = _left(rec.key, r.code, r.message, list(r.next))
            except GitError as exc:
                left = _left(rec.key, "sync_failed", str(exc)[:500], [f"git lane sync {rec.key}"])
            if left is None:
                continue  # fresh already
            if isinstance(left, str):
                out["synced"].append(rec.key)
            else:
                out["left"].append(left)
    except Exception as exc:  # the land stands whatever happens here: said, not raised
        out["error"] = f"{type(exc).__name__}: {exc}"[:500]
    repo.store.event(
        "auto_sync",
        lane=landed_key,
        code="auto_sync_failed" if "error" in out else "ok",
        main=out["main"],
        synced=out["synced"],
        left=[{"lane": x["lane"], "code": x["code"]} for x in out["left"]],
        error=out.get("error"),
    )
    return out


def report(done: LandResult, res: AutoSyncResult) -> None:
    """Put the pass's result in a land's result: `auto_sync`, and no `git lane sync K` in
    its `next` for a lane K that is synced now."""
    done["auto_sync"] = res
    synced = {f"git lane sync {k}" for k in res["synced"]}
    done["next"] = [n for n in done.get("next", []) if n not in synced]


def _left(
    key: str, code: str, message: str, nxt: list[str], paths: list[str] | None = None
) -> AutoSyncLeft:
    left: AutoSyncLeft = {"lane": key, "code": code, "message": message, "next": nxt}
    if paths is not None:
        left["paths"] = paths[:PATHS_CAP]
    return left


@git.in_own_context
def _one(repo: Repo, rec: LaneRecord, main_sha: str) -> AutoSyncLeft | str | None:
    """Sync one lane: "synced", None when it is fresh already, else why it was left."""
    objects.use(repo, rec.path)  # this lane's store only, never the landed lane's
    key, branch_ref = rec.key, f"refs/heads/{rec.branch}"
    tip = repo.ref_sha(branch_ref)
    if tip is not None:
        with objects.decided_in_shared_store(repo, rec.path, main_sha, tip):
            if git.is_ancestor(repo.common_dir, main_sha, tip):
                return None
    # cheap looks first, without the registry lock; all of them again under it
    why = _not_idle(repo, rec, tip, main_sha)
    if why is not None:
        return why
    with lane.registry_lock(repo):
        now = repo.store.read_lane(key)
        if now is None or now.status != "active":
            return _left(key, "lane_not_active", f"lane {key} is no longer active", [])
        tip = repo.ref_sha(branch_ref)
        why = _not_idle(repo, now, tip, main_sha)
        if why is not None:
            return why
        assert tip is not None
        conflicts = predict(repo, main_sha, tip)
        if conflicts is not None:
            return _left(
                key,
                "sync_would_conflict",
                f"lane {key} would conflict with main in {len(conflicts)} path(s); it was not touched",
                [f"git lane sync {key}"],
                conflicts,
            )
        return _rebase(repo, now, main_sha, tip)


def _rebase(repo: Repo, rec: LaneRecord, main_sha: str, tip: str) -> AutoSyncLeft | str:
    """The rebase `git lane sync` runs; one that stops on conflicts is aborted at once."""
    from guard.commands import sync

    key, path = rec.key, rec.path
    sandbox.clear_stale_pick(path)  # as sync does: a sandboxed rebase's leftover
    try:
        res = sync.rebase(repo, key, path, main_sha, tip, branch=rec.branch)
    except BaseException:
        _undo(repo, rec, tip)  # a failed (or interrupted) rebase leaves nothing behind either
        raise
    if res["state"] == "fresh":
        return "synced"
    paths = [f["path"] for f in res.get("worklist", {}).get("files", [])]
    back = _undo(repo, rec, tip)
    repo.store.event("abort", lane=key, tip=tip, code="auto_sync_aborted")
    return _left(
        key,
        "sync_conflicts",
        f"the rebase of lane {key} stopped on conflicts where the prediction saw none; it was "
        + (
            "aborted and the lane is as it was"
            if back
            else "aborted, but the lane is not back at its tip"
        ),
        [f"git lane sync {key}"] if back else [f"git lane status {key}"],
        paths,
    )


def _undo(repo: Repo, rec: LaneRecord, tip: str) -> bool:
    """Abort a rebase this pass started; True when the lane's HEAD is back at `tip`. One
    whose state the lane rewrote meanwhile is never aborted by git (it would move the ref
    named in it): rebase_state_untrusted, raised into the pass (the lane is left)."""
    from guard.commands import sync

    path = rec.path
    if git.rebase_in_progress(path):
        sync.abort_rebase(repo, rec.key, path, rec.branch)
    head = git.run(["rev-parse", "-q", "--verify", "HEAD"], path, check=False).stdout.strip()
    return head == tip


def _not_idle(repo: Repo, rec: LaneRecord, tip: str | None, main_sha: str) -> AutoSyncLeft | None:
    """Why the lane may not be rebased now (None: it is idle)."""
    key, path = rec.key, rec.path
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(path))
    if wt is None or not wt.exists:
        return _left(
            key, "lane_not_active", f"lane {key} has no worktree", [f"git lane repair {key}"]
        )
    if rec.owner_pid and procs.alive(rec.owner_pid, rec.owner_start):
        return _left(
            key,
            "lane_owner_conflict",
            f"lane {key} belongs to live process {rec.owner_pid}: never rebased under it",
            [f"git lane sync {key}  # from process {rec.owner_pid} or a process it started"],
        )
    holder = lock.read_owner(repo)
    if holder is not None and holder.lane == key and lock.owner_alive(holder):
        return _left(
            key, "lock_busy", f"a land of lane {key} is running", [f"git lane status {key}"]
        )
    if lane.setup_state(rec) == "running":
        return _left(
            key, "lane_busy", f"lane {key}'s setup_command is running", [f"git lane sync {key}"]
        )
    gd = git.worktree_git_dir(path)
    if gd is not None and (gd / "index.lock").exists():
        return _left(
            key,
            "lane_busy",
            f"a git command is writing in lane {key} (its index.lock exists)",
            [f"git lane sync {key}"],
        )
    if git.rebase_in_progress(path):
        return _left(
            key,
            "rebase_in_progress",
            f"lane {key} is in the middle of a sync",
            [f"git lane continue {key}"],
        )
    if wt.branch != f"refs/heads/{rec.branch}":
        r = lane.branch_mismatch_refusal(repo, key, path, rec.branch, wt.branch)
        return _left(key, r.code, r.message, list(r.next))
    facts = recovery.branch_facts(repo, path, rec.branch, tip)
    if facts.state != "ok":
        r = recovery.branch_refusal(key, facts, "sync")
        return _left(key, r.code, r.message, list(r.next))
    assert tip is not None
    dirty, hidden = git.dirty_and_hidden(path, tip)
    dirty += hidden.changed
    if dirty:
        r = lane.dirty_refusal(key, path, dirty, "sync")
        return _left(key, r.code, r.message, list(r.next))
    clobbered = _ignored_in_the_way(repo, path, tip, main_sha)
    if clobbered:
        return _left(
            key,
            "sync_would_conflict",
            f"lane {key} has ignored files where main now tracks files ({', '.join(map(git.shown, clobbered[:5]))}); "
            "a rebase would overwrite them: it was not touched",
            [f"git lane sync {key}"],
            clobbered,
        )
    return None


def predict(repo: Repo, main_sha: str, tip: str) -> list[str] | None:
    """The paths a merge of `tip` onto `main_sha` conflicts in, or None when it merges
    cleanly: `git merge-tree --write-tree` (objects only: no worktree, index or ref is
    touched). Anything but "clean" or "conflicts" from git is a failure, never a clean."""
    res = git.run(
        ["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", main_sha, tip],
        repo.common_dir,
        check=False,
    )
    if res.returncode == 0:
        return None
    if res.returncode != 1:
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    fields = res.stdout.split("\0")[1:]  # the tree, then each conflicted path
    return list(dict.fromkeys(f for f in fields if f)) or ["(unnamed)"]


def _ignored_in_the_way(repo: Repo, path: str, tip: str, main_sha: str) -> list[str]:
    """The one check every rebase of a lane makes (guard/commands/sync.py)."""
    from guard.commands import sync

    return sync.ignored_in_the_way(repo, path, tip, main_sha)
