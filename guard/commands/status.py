"""`git lane status [KEY]`: main, the hub, the lock and every lane, each with the next
command to run. Read-only: looks without taking any lane's index lock.

Every run also says (as warnings, each with a stable code in `alerts`) what leaves main
unguarded: git-lane switched off, the hooks missing, outdated or switched off by
core.hooksPath, main not where the last land left it. Cheaply: the hooks directory comes
with the repository's discovery, the hooks are files to read, and the landed ref rides
along in the for-each-ref that reads the lane tips."""

from __future__ import annotations

import os
from typing import Any

from guard import git, landed, lane, lock, policy, ready
from guard.errors import GitError, Refusal
from guard.commands.land import hub_next
from guard.repo import Repo
from guard.results import Alert, LaneView, LockView, StatusResult


def lock_view(repo: Repo) -> LockView | None:
    rec = lock.read_owner(repo)
    if rec is None:
        return None
    return {
        "pid": rec.pid,
        "lane": rec.lane,
        "since": rec.since,
        "host": rec.host,
        "alive": lock.owner_alive(rec),
    }


def run(
    repo: Repo, key: str | None = None, all_: bool = False, conflicts: bool = False
) -> StatusResult:
    """Released lanes are left out (counted in `released_hidden`) unless `all_`, or the
    lane is named by `key`: text and JSON list the same lanes. With `conflicts`, each
    lane's `would_conflict` says what it would conflict with ("main", lane keys; None:
    not asked, or the lane cannot be predicted: `git lane conflicts` says why)."""
    named = key
    if lane.bound_lane() is not None or key is not None:
        key = lane.resolve_key(key, "status")  # status is read-only: an unbound worker sees all
    main_sha = repo.main_sha()
    wts = repo.worktrees()
    hub = repo.hub(wts)
    records = repo.store.lanes()
    readable = {r.key for r in records}  # the rest of lane_keys() is corrupt
    if key is not None:
        lane.check_key(key)
        mine = [r for r in records if r.key == key]
        if mine or named is not None or repo.store.lane_file_exists(key):
            records = mine
            if not records:
                lane.get(repo, key)  # raises unknown_lane
        else:
            # a worker bound to a lane that does not exist (yet): it sees every lane, as
            # the unknown_lane it got elsewhere tells it to look
            key = None
    released_hidden = 0
    if key is None and not all_:
        kept = [r for r in records if r.status != "released"]
        released_hidden = len(records) - len(kept)
        records = kept
    idx = git.by_path(wts)
    ep = repo.store.read_epoch()
    # the lane tips and the last land's landed ref, in one git call
    tips = git.plain_refs(
        repo.common_dir,
        "refs/heads/lane/",
        landed.ref_name(ep.epoch) if ep.epoch else landed.BASELINE,  # before any land: the baseline
    )
    # the hub first: with a worktree as big as any lane's, it should not be the straggler
    jobs: list[Any] = [("hub", hub.path)] if hub is not None else []
    jobs.extend(("lane", r) for r in records)

    # Out of step: the last land moved main but git could not carry the hub along, so the
    # hub's index still holds main_before's entries at the paths that land changed (G6 had
    # made sure the hub had no edits of its own there). Only asked while main is where
    # that land left it, and a hub is there.
    step = hub is not None and ep.main_after == main_sha and bool(ep.main_before) and bool(ep.paths)
    if step:
        jobs.insert(1, ("step", hub))

    def one(job: Any) -> Any:
        kind, arg = job
        if kind == "hub":
            try:
                return git.dirty_paths(arg)
            except GitError as exc:  # its .git moved (git init --separate-git-dir), ...
                raise Refusal(
                    "not_a_git_repo",
                    f"git cannot read the hub {git.shown(arg)} as a work tree "
                    f"({exc.stderr.strip()[:200]}); its .git may point at another repository",
                    next=[f"git -C {git.q(arg)} rev-parse --absolute-git-dir", "git lane doctor"],
                    details={"path": str(arg), "stderr": exc.stderr},
                ) from None
        if kind == "step":
            return git.index_matches(arg.path, str(ep.main_before), ep.paths)
        try:
            return lane.view(repo, arg, main_sha, idx, tips)
        except (GitError, FileNotFoundError):
            # a release (or a hand) removed the lane after the worktree list and records
            # were read: shown as it is now; a lane still there and unchanged is an error
            now = repo.store.read_lane(arg.key)
            wt = idx.get(os.path.realpath(arg.path))
            if wt is not None and wt.exists and now == arg:
                raise
            return lane.view(repo, now or arg, main_sha, git.by_path(repo.worktrees()), tips)

    results = git.parallel(one, jobs)
    lanes: list[LaneView] = [r for j, r in zip(jobs, results, strict=True) if j[0] == "lane"]
    if key is None:  # an unreadable record is shown, never dropped
        lanes.extend(corrupt_view(repo, k) for k in repo.store.lane_keys() if k not in readable)
        lanes.sort(key=lambda v: v["key"])
    for v in lanes:  # the ready mark (guard/ready.py): None, or its tip and whether it is current
        v["ready"] = ready.view(ready.read(repo.state_dir, v["key"]), v.get("tip"))
    hub_dirty: list[str] = results[0] if hub is not None else []
    with_conflicts = None
    if conflicts:
        from guard import conflicts as predict

        with_conflicts = predict.would_conflict(
            predict.prediction(repo, [key] if key is not None else None)
        )
    for v in lanes:
        v["would_conflict"] = with_conflicts.get(v["key"]) if with_conflicts is not None else None
    landing_open = repo.store.landing_path.exists()
    alerts = switched_off(repo) + hooks_alerts(repo)
    if not landing_open:  # mid-land, main is ahead of epoch.json by design
        # epoch.json first: a ref can be moved (or deleted) past the hooks, to make a main
        # moved the same way look landed; before any land it keeps the baseline too
        if ep.epoch:
            last, by = ep.main_after or tips.get(landed.ref_name(ep.epoch)), f"land {ep.epoch}"
        else:  # no land yet: where main stood when git-lane started guarding it
            last, by = ep.main_after or tips.get(landed.BASELINE), "the baseline (git lane install)"
        if last and last != main_sha:
            alerts.append(
                {
                    "code": "main_moved",
                    "message": f"{repo.main_ref} is at {main_sha[:12]}, not at {last[:12]} where {by} left it: "
                    "something moved it outside git lane land",
                    "next": "git lane doctor",
                }
            )
    out_of_step = bool(results[1]) if step else False
    warnings = [*repo.config.warnings, *(f"{a['message']} (next: {a['next']})" for a in alerts)]
    if ep.epoch == 0 and os.path.lexists(repo.store.epoch_path) and not repo.store.epoch_is_valid():
        warnings.append(
            f"{repo.store.epoch_path} is unreadable or corrupt: the epoch is not known (shown as 0); "
            "run: git lane reconcile"
        )
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
        "hub": {
            "path": hub.path if hub else None,
            "dirty_paths": hub_dirty,
            "out_of_step": out_of_step,
        },
        "lock": lock_view(repo),
        "landing": landing_open,
        "lanes": lanes,
        "released_hidden": released_hidden,
        "warnings": warnings,
        "alerts": alerts,
    }


def corrupt_view(repo: Repo, key: str) -> LaneView:
    """A lane whose record is unreadable (not JSON, wrong types, an empty path, a
    directory): what can be said without it, and the command that rebuilds it."""
    from guard import recovery

    path = recovery.salvage(repo, key).get("path", "")
    branch = lane.branch_of(key)
    return {
        "key": key,
        "branch": branch,
        "path": path,
        "state": "corrupt",
        "goal": None,
        "fresh": False,
        "sync_required": False,
        "dirty": False,
        "dirty_paths": [],
        "ahead": 0,
        "behind": 0,
        "rebase_in_progress": False,
        "owner_pid": None,
        "owner_alive": False,
        "exec_seen": None,
        "tip": repo.ref_sha(f"refs/heads/{branch}"),
        "head": None,
        "advice": "Record unreadable: `git lane reconcile` rebuilds it from git (the file is kept).",
        "branch_state": "unknown",
        "port": policy.lane_port(key),
        "setup": None,
    }


def switched_off(repo: Repo) -> list[Alert]:
    if repo.config.get("enabled") is not False:
        return []
    return [
        {
            "code": "disabled",
            "message": f"git-lane is switched off (enabled = false in {repo.config.files.get('enabled')}): "
            "the hooks and shims let everything through",
            "next": "git lane config set enabled true",
        }
    ]


def hooks_alerts(repo: Repo) -> list[Alert]:
    """Are git-lane's hooks where git will look for them, and as install writes them?"""
    from guard.commands import install

    common = install.common_hooks_dir(repo)
    d = repo.hooks_dir or common
    found = install.installed(d) if d.is_dir() else dict.fromkeys(install.HOOKS, "missing")
    bad = {name: state for name, state in found.items() if state != "ok"}
    if not bad:
        return []
    what = ", ".join(f"{name} {state.replace('_', ' ')}" for name, state in sorted(bad.items()))
    elsewhere = os.path.realpath(d) != os.path.realpath(common)  # core.hooksPath is set
    if len(bad) == len(found) and set(bad.values()) == {"missing"}:
        if elsewhere:
            return [
                {
                    "code": "hooks_off",
                    "message": f"core.hooksPath makes git run hooks from {d}, where git-lane's are not: "
                    "main is not guarded",
                    "next": "git lane doctor",
                }
            ]
        return [
            {
                "code": "hooks_missing",
                "message": f"git-lane's hooks are not installed in {d}: main is not guarded",
                "next": "git lane install",
            }
        ]
    return [
        {
            "code": "hooks_outdated",
            "message": f"git-lane's hooks in {d} are not as git lane install writes them ({what})",
            "next": "git lane install --hooks-path" if elsewhere else "git lane install",
        }
    ]
