"""`git lane create [KEY]`: branch lane/KEY off main's tip, in a worktree of its own
under worktrees_root, registered under the registry lock; then set up (outside that lock)
as `git lane setup` does: `.worktreeinclude` files copied, `setup_command` run."""

from __future__ import annotations

import os
from dataclasses import replace

from guard import gate, git, include, landed, lane, policy, procs
from guard.commands import install as hookinstall
from guard.commands import setup
from guard.crashpoint import crash_point
from guard.errors import GitError, Refusal
from guard.repo import Repo
from guard.results import CreateResult
from guard.store import LaneRecord, now_iso


def run(
    repo: Repo,
    key: str | None = None,
    goal: str | None = None,
    owner_pid: int | None = None,
    progress: include.Progress | None = None,
    output: gate.Output | None = None,
    tick: gate.Tick | None = None,
) -> CreateResult:
    lane.forbid_worker("create")
    prefix = "adhoc"
    if goal is not None and key is None:
        prefix = policy.goal_slug(goal)
        if not prefix:
            raise Refusal(
                "invalid_lane_key",
                f"the goal {goal!r} has no letter or digit to make a lane key of",
                next=["git lane create"],
                details={"goal": goal},
            )
        lane.check_key(f"{prefix}-1", creating=True)
    if key is not None:
        lane.check_key(key, creating=True)
    # every engine git in the new lane would refuse (git.check_no_worktree_config): refuse
    # before a worktree and branch are made that no git-lane command could then use
    git.check_no_worktree_config(repo.common_dir)
    cfg = repo.config
    main_sha = repo.main_sha()
    link = repo.foreign_main_link() if hookinstall.guarding(repo) else None
    if link is not None and not link.hard:  # (a hard link: the hooks refuse nothing)
        # the hook refuses every ref update while it is there (git worktree add -b too)
        raise Refusal(
            "main_not_plain",
            f"{link.words()}: whoever may write what it leads to moves main with no ref "
            "transaction, so the hooks refuse every ref update (a new lane's branch too) "
            "until main is plain again; nothing was made",
            next=["git lane restore-main", "git lane create" + (f" {key}" if key else "")],
            details={"ref": link.path, "link": link.text},
        )
    if hookinstall.guarding(repo):  # installed, but with no main to record back then
        landed.record_baseline(repo)
    root = lane.worktrees_root(repo)
    # the owner is only what the owner names here (checked live); never taken from the
    # environment, which any process can set
    owner_start = procs.start_time(owner_pid) if owner_pid else None
    if owner_pid and owner_start is None:
        raise Refusal(
            "unknown_process",
            f"owner process {owner_pid} is not running",
            next=["git lane create" + (f" {key}" if key else "")],
            details={"owner_pid": owner_pid},
        )
    with lane.registry_lock(repo):
        records = {r.key: r for r in repo.store.lanes()}
        active = [r for r in records.values() if r.status == "active"]
        if len(active) >= cfg["max_lanes"]:
            raise Refusal(
                "max_lanes",
                f"{len(active)} active lanes already (max_lanes = {cfg['max_lanes']})",
                next=[f"git lane config set max_lanes {cfg['max_lanes'] + 1}" + lane.OWNER_NOTE],
                alternatives=[
                    f"git lane release {r.key}" for r in sorted(active, key=lambda r: r.key)
                ],
                details={"active": [r.key for r in active], "max_lanes": cfg["max_lanes"]},
            )

        def taken(k: str) -> bool:
            r = records.get(k)
            return (
                (r is not None and r.status != "released")
                or repo.ref_sha(f"refs/heads/{lane.branch_of(k)}") is not None
                or (root / repo.slug / k).exists()
            )

        if key is None:
            key = policy.auto_key(prefix, taken)
            lane.check_key(key)
        if key not in records and repo.store.lane_file_exists(key):
            raise lane.corrupt_refusal(repo, key)  # a record is there, unreadable: not free
        rec = records.get(key)
        if rec is not None and rec.status != "released":
            raise Refusal(
                "lane_exists",
                f"lane {key} exists already ({rec.status}, at {rec.path})",
                next=["git lane create"],  # (a lane of a fresh key)
                alternatives=[f"git lane status {key}"],
                details={"lane": key},
            )
        branch = lane.branch_of(key)
        path = root / repo.slug / key
        if repo.ref_sha(f"refs/heads/{branch}") is not None:
            left = git.by_path(repo.worktrees()).get(os.path.realpath(path))
            if left is not None and left.exists and left.branch == f"refs/heads/{branch}":
                # what a create killed between `worktree add` and the registry write left
                raise Refusal(
                    "create_interrupted",
                    f"lane {key} was being created and that create stopped part way: its "
                    f"worktree {path} has {branch} checked out, but it was never registered; "
                    f"it was left as it is, and reconcile adopts it as lane {key}",
                    next=["git lane reconcile", f"git lane status {key}"],
                    alternatives=[
                        f"git worktree remove {git.q(str(path))} && git branch -d {branch} "
                        f"&& git lane create {key}"
                    ],
                    details={"lane": key, "branch": branch, "path": str(path)},
                )
            raise Refusal(
                "branch_exists",
                f"branch {branch} exists already and is not a registered lane; it was left as it is",
                next=["git lane create"],
                alternatives=[f"git branch -m {branch} old/{branch} && git lane create {key}"],
                details={"lane": key, "branch": branch},
            )
        if path.exists() or path.is_symlink():
            # what a release of this key killed inside its removal left: reconcile's
            wt = git.by_path(repo.worktrees()).get(os.path.realpath(path))
            stranded = (
                rec is not None
                and os.path.realpath(rec.path) == os.path.realpath(path)
                and wt is not None
                and not wt.exists
                and wt.branch == f"refs/heads/{branch}"
            )
            raise Refusal(
                "worktree_path_exists",
                f"{path} exists already; it was left as it is",
                next=["git lane reconcile", f"git lane create {key}"]
                if stranded
                else ["git lane create"],
                alternatives=["git lane create"] if stranded else ["git lane reconcile"],
                details={"lane": key, "path": str(path)},
            )
        under = git.run(
            ["for-each-ref", "--count=1", "--format=%(refname)", f"refs/heads/{branch}/"],
            repo.common_dir,
        ).stdout.strip()
        if not under and repo.ref_sha("refs/heads/lane") is not None:
            under = "refs/heads/lane"  # a branch named `lane` leaves no room for lane/<key>
        if under:
            short = under.removeprefix("refs/heads/")
            raise Refusal(
                "branch_exists",
                f"branch {short} exists, so git cannot create {branch} beside it; it was left as it is",
                next=["git lane create"],
                alternatives=[f"git branch -m {short} old/{short} && git lane create {key}"],
                details={"lane": key, "branch": branch, "conflicts_with": under},
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Refusal(
                "invalid_config",
                f"cannot make the lane directory {path.parent}: {exc.strerror}",
                next=[
                    "git lane config set worktrees_root ~/.cache/git-lane/worktrees",
                    "git lane config get worktrees_root",
                ],
                details={"key": "worktrees_root", "path": str(path.parent)},
            ) from None
        refusal = _add_refused(repo, key, branch, str(path), records)
        if refusal is not None:
            raise refusal
        added = git.run(
            ["worktree", "add", "-q", "-b", branch, str(path), main_sha],
            repo.common_dir,
            check=False,
        )
        if not added.ok:
            # git makes the branch before it checks it out: the one made here goes (CAS)
            git.run(
                ["update-ref", "--no-deref", "-d", f"refs/heads/{branch}", main_sha],
                repo.common_dir,
                check=False,
            )
            raise GitError(added.argv, added.returncode, added.stdout, added.stderr)
        crash_point("create_worktree_added")
        rec = LaneRecord(
            key=key,
            branch=branch,
            path=str(path),
            created_at=now_iso(),
            goal=goal,
            owner_pid=owner_pid,
            owner_start=owner_start,
            admin=lane.new_admin(repo, str(path)),
            exec_seen=False,  # no exec ran in it yet: its gate may run in the lane
        )
        if cfg.get("setup_command") or repo.committed_file(main_sha, include.FILE) is not None:
            # marked running by this process until its setup is done: a create killed
            # before then leaves a lane whose status says its setup failed (and how to rerun it)
            me = os.getpid()
            rec = replace(rec, setup="running", setup_pid=me, setup_start=procs.start_time(me))
        repo.store.pin(rec)
        lane.write_repo_marker(repo, str(path))
        lane.write_marker(repo, str(path), key)
        repo.store.write_lane(rec)
    crash_point("create_registered")
    repo.store.event("create", lane=key, main=main_sha, path=str(path), owner_pid=owner_pid)
    included, ran, warnings = setup.prepare(repo, key, str(path), main_sha, progress, output, tick)
    if ran is None and rec.setup == "running":  # only files were copied: nothing ran
        setup.done_without_command(repo, key, str(path))
    rec = repo.store.read_lane(key) or rec
    view = lane.view(repo, rec, main_sha, git.by_path(repo.worktrees()))
    if ran is not None and ran["status"] != "ok":
        raise setup.failed_refusal(repo, key, str(path), ran, included, view, warnings)
    return {
        "ok": True,
        "code": "created",
        "lane": view,
        "included": included,
        "setup": ran,
        "warnings": warnings,
    }


def _add_refused(
    repo: Repo,
    key: str,
    branch: str,
    path: str,
    records: dict[str, LaneRecord],
) -> Refusal | None:
    """What git would refuse `worktree add` for ("already checked out", "already
    registered"): a record git keeps of a worktree whose directory went (a release killed
    inside its removal) still names the branch or the path. A released lane's is
    reconcile's to clear; anyone else's is left to its owner."""
    real = os.path.realpath(path)
    wts = repo.worktrees(gates=True)  # git refuses for a gate admin dir's entry too
    blocking = [
        w for w in wts if w.branch == f"refs/heads/{branch}" or os.path.realpath(w.path) == real
    ]
    if not blocking:
        return None
    w = blocking[0]
    if any(w is g for g in repo.gate_entries(wts)):
        # a confined gate wrote its admin dir's `gitdir`: while the land runs (no land
        # runs: reconcile removes it or moves it into kept/)
        return Refusal(
            "worktree_path_exists",
            f"a clean gate worktree's admin dir (a land's gate, running or left) names "
            f"{w.path}, so git will not check lane {key} out there; it was left as it is",
            next=["git lane reconcile", f"git lane create {key}"],
            alternatives=["git lane status"],
            details={"lane": key, "path": path, "registered": w.path, "gate": True},
        )
    released = {os.path.realpath(r.path) for r in records.values() if r.status == "released"}
    ours = not w.exists and os.path.realpath(w.path) in released
    return Refusal(
        "worktree_path_exists",
        f"git still has a worktree registered at {w.path} on {w.branch or 'a detached HEAD'}"
        + (" (its directory is gone or half removed)" if not w.exists else "")
        + f", so lane {key} cannot be checked out; it was left as it is",
        next=["git lane reconcile", f"git lane create {key}"] if ours else ["git lane create"],
        alternatives=["git worktree list --porcelain"],
        details={"lane": key, "path": path, "registered": w.path},
    )
