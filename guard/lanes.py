"""Lane lifecycle: create, status, release, reconcile. A lane's record holds identity only;
freshness, dirtiness and ahead/behind are derived from git at every look."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from guard import gitrun, policy, procs
from guard.config import cache_home
from guard.errors import Refusal
from guard.repo import ZERO, Repo, Worktree, is_ancestor
from guard.store import FileLock, LaneRecord, now_iso

MARKER = "gitlane-lane"  # file in a lane worktree's admin dir naming its key (read by hooks)
CONFIRM = "yes-discard-lane"


def registry_lock(repo: Repo) -> FileLock:
    return FileLock(repo.store.locks_dir / "registry.flock")


def lane_branch(key: str) -> str:
    return f"lane/{key}"


def check_key(key: str) -> None:
    if not policy.valid_key(key):
        raise Refusal(
            "invalid_lane_key",
            f"{key!r} is not a lane key: use 1-63 characters of a-z, 0-9 and -, "
            "starting and ending with a letter or digit",
            next=["git lane create", "git lane create my-feature"],
            details={"key": key},
        )


def get_lane(repo: Repo, key: str) -> LaneRecord:
    check_key(key)
    rec = repo.store.read_lane(key)
    if rec is None:
        raise Refusal(
            "unknown_lane",
            f"there is no lane {key}",
            next=["git lane status", f"git lane create {key}"],
            details={"lane": key},
        )
    return rec


def worktrees_root(repo: Repo) -> Path:
    cfg = repo.config
    raw = cfg.get("worktrees_root")
    root = Path(os.path.expanduser(raw)) if raw else cache_home() / "git-lane" / "worktrees"
    if not root.is_absolute():
        root = repo.repo_root() / root
    real = Path(os.path.realpath(root))
    inside = real == repo.repo_root() or repo.repo_root() in real.parents
    if inside and not cfg.get("allow_in_repo_worktrees"):
        raise Refusal(
            "invalid_config",
            f"worktrees_root {real} is inside the repository {repo.repo_root()}; lane checkouts "
            "there would show up in the hub",
            next=[
                "git lane config set worktrees_root ~/.cache/git-lane/worktrees",
                "git lane config set allow_in_repo_worktrees true",
            ],
            details={"key": "worktrees_root", "file": cfg.sources.get("worktrees_root"), "value": str(real)},
        )
    return real


def lane_dir(repo: Repo, key: str) -> Path:
    return worktrees_root(repo) / repo.slug / key


def read_marker(repo: Repo, path: str) -> str | None:
    gd = repo.worktree_git_dir(path)
    try:
        return (gd / MARKER).read_text().strip() if gd is not None else None
    except OSError:
        return None


def write_marker(repo: Repo, path: str, key: str) -> None:
    gd = repo.worktree_git_dir(path)
    if gd is not None and gd != repo.common_dir:
        try:
            (gd / MARKER).write_text(key + "\n")
        except OSError:
            pass


def owner_conflict(repo: Repo, rec: LaneRecord, action: str) -> None:
    """Refuse when the lane's recorded owner is a different, still-live process."""
    if not rec.owner_pid or not procs.alive(rec.owner_pid, rec.owner_start):
        return
    import psutil

    try:
        me = psutil.Process()
        lineage = {me.pid, *(p.pid for p in me.parents())}
    except psutil.Error:
        lineage = {os.getpid()}
    if rec.owner_pid in lineage or os.environ.get("GITLANE_OWNER_PID") == str(rec.owner_pid):
        return
    raise Refusal(
        "lane_owner_conflict",
        f"lane {rec.key} belongs to live process {rec.owner_pid}; only it may {action} the lane",
        next=[f"let process {rec.owner_pid} run: git lane {action} {rec.key}", f"kill {rec.owner_pid} (then retry)"],
        details={"lane": rec.key, "owner_pid": rec.owner_pid},
    )


# -- facts ------------------------------------------------------------------------------
def dirty_paths(path: str | os.PathLike[str]) -> list[str]:
    """Changed, staged, unmerged and untracked (not ignored) paths of a worktree."""
    # GIT_OPTIONAL_LOCKS=0: no opportunistic index refresh, so looking at a lane never holds
    # its index.lock and never makes the agent's own `git add`/`git commit` there fail
    res = gitrun.run(
        ["status", "--porcelain=v1", "-z", "--untracked-files=all"], path, env={"GIT_OPTIONAL_LOCKS": "0"}
    )
    return parse_status_z(res.stdout)


def dirty_refusal(key: str, path: str, dirty: list[str], action: str) -> Refusal:
    """lane_dirty (G2), the same for every command that needs a clean lane."""
    return Refusal(
        "lane_dirty",
        f"lane {key} has {len(dirty)} uncommitted path(s): {', '.join(dirty[:5])}",
        next=[f"git -C '{path}' add -A && git -C '{path}' commit", f"git lane {action} {key}"],
        details={"lane": key, "dirty_paths": dirty[:100]},
    )


def parse_status_z(out: str) -> list[str]:
    """The paths of `git status --porcelain=v1 -z` output (both sides of a rename)."""
    paths: list[str] = []
    fields = out.split("\0")
    i = 0
    while i < len(fields):
        f = fields[i]
        i += 1
        if len(f) < 4:
            continue
        paths.append(f[3:])
        if f[0] in "RC":  # a rename carries its source in the next field
            paths.append(fields[i])
            i += 1
    return paths


def rebase_in_progress(repo: Repo, path: str) -> bool:
    gd = repo.worktree_git_dir(path)
    return gd is not None and ((gd / "rebase-merge").is_dir() or (gd / "rebase-apply").is_dir())


def changed_paths(repo: Repo, a: str, b: str) -> list[str]:
    return repo.git(["diff", "--name-only", "--no-renames", "-z", a, b]).z()


def overlap(repo: Repo, main_sha: str, tip: str) -> tuple[list[str], list[str]]:
    """Paths the lane and main each changed since their merge-base."""
    mb = repo.git(["merge-base", main_sha, tip], check=False).stdout.strip()
    if not mb:
        return [], []
    return changed_paths(repo, mb, tip), changed_paths(repo, mb, main_sha)


def lane_sync_required(repo: Repo, main_sha: str, tip: str | None, fresh: bool) -> bool:
    pol = repo.config["sync_policy"]
    if fresh or tip is None or pol == "land_time_only":
        return False
    if pol == "overlap_mandatory":
        lp, mp = overlap(repo, main_sha, tip)
        return policy.sync_required(pol, fresh, lp, mp)
    return policy.sync_required(pol, fresh)


def lane_tips(repo: Repo) -> dict[str, str]:
    """Every `refs/heads/lane/*` and its sha, in one git call (ref names hold no spaces or
    newlines, so plain lines parse safely)."""
    res = repo.git(["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/lane/"])
    tips: dict[str, str] = {}
    for ln in res.lines():
        sha, _, ref = ln.partition(" ")
        tips[ref] = sha
    return tips


def lane_view(
    repo: Repo,
    rec: LaneRecord,
    main_sha: str,
    wts: dict[str, Worktree],
    tips: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Everything status reports about one lane, derived from git now. `tips` (from
    `lane_tips`) saves a git call per lane when many lanes are looked at together."""
    branch_ref = f"refs/heads/{rec.branch}"
    wt = wts.get(os.path.realpath(rec.path))
    exists = wt is not None and wt.exists
    state = rec.status
    if state == "active" and not exists:
        state = "orphaned"
    view: dict[str, Any] = {
        "key": rec.key,
        "branch": rec.branch,
        "path": rec.path,
        "state": state,
        "goal": rec.goal,
        "fresh": False,
        "sync_required": False,
        "dirty": False,
        "dirty_paths": [],
        "ahead": 0,
        "behind": 0,
        "rebase_in_progress": False,
        "owner_pid": rec.owner_pid,
        "owner_alive": procs.alive(rec.owner_pid, rec.owner_start) if rec.owner_pid else False,
        "tip": None,
        "head": None,
        "advice": "",
    }
    if state == "released":
        view["advice"] = policy.advice(_facts(view, exists))
        return view
    tip = tips.get(branch_ref) if tips is not None else repo.ref_sha(branch_ref)
    view["tip"] = tip
    if tip == main_sha:
        view["fresh"] = True  # 0 ahead, 0 behind: no need to ask git
    elif tip is not None:
        counts = repo.git(["rev-list", "--left-right", "--count", f"{main_sha}...{tip}"]).stdout.split()
        view["behind"], view["ahead"] = int(counts[0]), int(counts[1])
        view["fresh"] = view["behind"] == 0
    if exists:
        dp = dirty_paths(rec.path)
        view["dirty_paths"] = dp[:50]
        view["dirty"] = bool(dp)
        view["rebase_in_progress"] = rebase_in_progress(repo, rec.path)
        assert wt is not None
        view["head"] = wt.branch
    view["sync_required"] = lane_sync_required(repo, main_sha, tip, view["fresh"])
    view["advice"] = policy.advice(_facts(view, exists))
    return view


def _facts(view: dict[str, Any], exists: bool) -> policy.LaneFacts:
    return policy.LaneFacts(
        key=view["key"],
        path=view["path"],
        state=view["state"],
        exists=exists,
        dirty=view["dirty"],
        rebase=view["rebase_in_progress"],
        fresh=view["fresh"],
        sync_required=view["sync_required"],
        ahead=view["ahead"],
        behind=view["behind"],
        head=view["head"],
        branch=view["branch"],
    )


def wt_index(wts: list[Worktree]) -> dict[str, Worktree]:
    return {os.path.realpath(w.path): w for w in wts}


# -- create -----------------------------------------------------------------------------
def create(repo: Repo, key: str | None = None, goal: str | None = None, owner_pid: int | None = None) -> dict[str, Any]:
    procs.forbid_worker("create")
    prefix = goal or "adhoc"
    if goal is not None:
        check_key(f"{goal}-1")
    if key is not None:
        check_key(key)
    cfg = repo.config
    main_sha = repo.main_sha()
    root = worktrees_root(repo)
    if owner_pid is None and os.environ.get("GITLANE_OWNER_PID", "").isdigit():
        owner_pid = int(os.environ["GITLANE_OWNER_PID"])
    owner_start = procs.start_time(owner_pid) if owner_pid else None
    if owner_pid and owner_start is None:
        raise Refusal(
            "unknown_process",
            f"owner process {owner_pid} is not running",
            next=["git lane create" + (f" {key}" if key else "") + " (without --owner-pid)"],
            details={"owner_pid": owner_pid},
        )
    with registry_lock(repo):
        records = {r.key: r for r in repo.store.lanes()}
        active = [r for r in records.values() if r.status == "active"]
        if len(active) >= cfg["max_lanes"]:
            raise Refusal(
                "max_lanes",
                f"{len(active)} active lanes already (max_lanes = {cfg['max_lanes']})",
                next=["git lane status", "git lane release <KEY>", "git lane config set max_lanes <N>"],
                details={"active": [r.key for r in active], "max_lanes": cfg["max_lanes"]},
            )

        def taken(k: str) -> bool:
            r = records.get(k)
            return (
                (r is not None and r.status != "released")
                or repo.ref_sha(f"refs/heads/{lane_branch(k)}") is not None
                or (root / repo.slug / k).exists()
            )

        if key is None:
            n = 1
            while taken(f"{prefix}-{n}"):
                n += 1
            key = f"{prefix}-{n}"
            check_key(key)
        rec = records.get(key)
        if rec is not None and rec.status != "released":
            raise Refusal(
                "lane_exists",
                f"lane {key} exists already ({rec.status}, at {rec.path})",
                next=["git lane create", f"git lane status {key}"],
                details={"lane": key},
            )
        branch = lane_branch(key)
        if repo.ref_sha(f"refs/heads/{branch}") is not None:
            raise Refusal(
                "branch_exists",
                f"branch {branch} exists already and is not a registered lane; it was left as it is",
                next=["git lane create <another key>", f"git branch -m {branch} <new name>  (then retry)"],
                details={"lane": key, "branch": branch},
            )
        path = root / repo.slug / key
        if path.exists() or path.is_symlink():
            raise Refusal(
                "worktree_path_exists",
                f"{path} exists already; it was left as it is",
                next=["git lane create <another key>", "git lane reconcile"],
                details={"lane": key, "path": str(path)},
            )
        under = repo.git(["for-each-ref", "--count=1", "--format=%(refname)", f"refs/heads/{branch}/"]).stdout.strip()
        if not under and repo.ref_sha("refs/heads/lane") is not None:
            under = "refs/heads/lane"  # a branch named `lane` leaves no room for lane/<key>
        if under:
            raise Refusal(
                "branch_exists",
                f"branch {under.removeprefix('refs/heads/')} exists, so git cannot create {branch} beside it; "
                "it was left as it is",
                next=["git lane create <another key>", f"git branch -m {under.removeprefix('refs/heads/')} <new name>  (then retry)"],
                details={"lane": key, "branch": branch, "conflicts_with": under},
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Refusal(
                "invalid_config",
                f"cannot make the lane directory {path.parent}: {exc.strerror}",
                next=["git lane config set worktrees_root ~/.cache/git-lane/worktrees", "git lane config get worktrees_root"],
                details={"key": "worktrees_root", "path": str(path.parent)},
            ) from None
        repo.git(["worktree", "add", "-q", "-b", branch, str(path), main_sha])
        rec = LaneRecord(
            key=key,
            branch=branch,
            path=str(path),
            created_at=now_iso(),
            goal=goal,
            owner_pid=owner_pid,
            owner_start=owner_start,
        )
        write_marker(repo, str(path), key)
        repo.store.write_lane(rec)
    repo.store.event("create", lane=key, main=main_sha, path=str(path), owner_pid=owner_pid)
    view = lane_view(repo, rec, main_sha, wt_index(repo.worktrees()))
    return {"ok": True, "code": "created", "lane": view}


# -- status -----------------------------------------------------------------------------
def read_lock_holder(repo: Repo) -> dict[str, Any] | None:
    from guard import lock

    rec = lock.read_owner(repo)
    if rec is None:
        return None
    return {
        "pid": rec.get("pid"),
        "lane": rec.get("lane"),
        "since": rec.get("since"),
        "host": rec.get("host"),
        "alive": lock.owner_alive(rec),
    }


def status(repo: Repo, key: str | None = None) -> dict[str, Any]:
    if procs.bound_lane() is not None or key is not None:
        key = procs.resolve_lane_key(key, "status")  # status is read-only: an unbound worker sees all
    main_sha = repo.main_sha()
    wts = repo.worktrees()
    hub = repo.hub(wts)
    records = repo.store.lanes()
    if key is not None:
        check_key(key)
        records = [r for r in records if r.key == key]
        if not records:
            get_lane(repo, key)  # raises unknown_lane
    idx = wt_index(wts)
    tips = lane_tips(repo)
    # the hub first: with a worktree as big as any lane's, it should not be the straggler
    jobs: list[Any] = [("hub", hub.path)] if hub is not None else []
    jobs.extend(("lane", r) for r in records)

    def one(job: Any) -> Any:
        kind, arg = job
        if kind == "hub":
            return dirty_paths(arg)
        return lane_view(repo, arg, main_sha, idx, tips)

    results = gitrun.parallel(one, jobs)
    lanes = [r for j, r in zip(jobs, results, strict=True) if j[0] == "lane"]
    hub_dirty = results[0] if hub is not None else []
    ep = repo.store.read_epoch()
    return {
        "ok": True,
        "code": "ok",
        "epoch": ep.epoch,
        "main": {"branch": repo.main_branch, "sha": main_sha},
        "hub": {"path": hub.path if hub else None, "dirty_paths": hub_dirty},
        "lock": read_lock_holder(repo),
        "landing": repo.store.landing_path.exists(),
        "lanes": lanes,
        "warnings": repo.config.warnings,
    }


# -- release ----------------------------------------------------------------------------
def release(repo: Repo, key: str | None, confirm: str | None = None) -> dict[str, Any]:
    procs.forbid_worker("release")
    if key is None:
        raise Refusal("unknown_lane", "release needs a lane key", next=["git lane status", "git lane release <KEY>"])
    rec = get_lane(repo, key)
    if rec.status == "released":
        return {"ok": True, "code": "already_released", "lane": key}
    owner_conflict(repo, rec, "release")
    main_sha = repo.main_sha()
    branch_ref = f"refs/heads/{rec.branch}"
    tip = repo.ref_sha(branch_ref)
    idx = wt_index(repo.worktrees())
    wt = idx.get(os.path.realpath(rec.path))
    present = wt is not None and wt.exists
    unlanded: list[str] = []
    if tip is not None and not is_ancestor(repo, tip, main_sha):
        unlanded = repo.git(["log", "--format=%h %s", f"{main_sha}..{tip}"]).lines()
    dirty = dirty_paths(rec.path) if present else []
    rebase = present and rebase_in_progress(repo, rec.path)
    # commits made on a detached HEAD in the lane are on no branch: removing the worktree
    # (and with it HEAD's reflog) would lose them silently
    head = wt.head if present and wt is not None and wt.branch is None and not rebase else None
    detached: list[str] = []
    if head and head != ZERO:
        detached = repo.git(["log", "--format=%h %s", head, "--not", main_sha, *([tip] if tip else [])]).lines()
    confirmed = confirm == CONFIRM
    if (unlanded or dirty or rebase or detached) and not confirmed:
        if dirty and present:
            repo.git(["worktree", "lock", "--reason", LOCK_REASON, rec.path], check=False)
        what = []
        if unlanded:
            what.append(f"{len(unlanded)} unlanded commit(s) on {rec.branch}")
        if dirty:
            what.append(f"{len(dirty)} uncommitted path(s) in {rec.path}")
        if rebase:
            what.append("a sync in progress")
        if detached:
            what.append(f"{len(detached)} commit(s) on a detached HEAD in {rec.path}")
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
    if present:
        if confirmed:
            repo.git(["worktree", "unlock", rec.path], check=False)
            repo.git(["worktree", "remove", "--force", "--force", rec.path])
        else:
            _remove_clean_worktree(repo, key, rec.path)
    elif wt is not None:
        repo.git(["worktree", "remove", "--force", rec.path], check=False)
    if tip is not None:
        hub = repo.hub()
        if not unlanded and hub is not None:
            repo.git(["branch", "-d", rec.branch], hub.path)
        else:
            # CAS delete: only the tip we inspected above is dropped
            repo.git(["update-ref", "-m", f"git-lane: release {key}", "-d", branch_ref, tip])
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


LOCK_REASON = "git-lane: lane has uncommitted work"


def _remove_clean_worktree(repo: Repo, key: str, path: str) -> None:
    """Remove a lane worktree with nothing to lose. The lock a refused release put on it
    (while it was dirty) no longer has a reason and is lifted; anyone else's lock is
    respected; whatever else makes git refuse is a refusal, not a crash."""
    gd = repo.worktree_git_dir(path)
    try:
        reason = (gd / "locked").read_text().strip() if gd is not None and (gd / "locked").is_file() else None
    except OSError:
        reason = ""
    if reason is not None:
        if reason != LOCK_REASON:
            raise Refusal(
                "worktree_locked",
                f"the worktree of lane {key} is locked ({reason or 'no reason given'}); it was left as it is",
                next=[f"git worktree unlock '{path}'", f"git lane release {key}"],
                details={"lane": key, "path": path, "reason": reason},
            )
        repo.git(["worktree", "unlock", path], check=False)
    res = repo.git(["worktree", "remove", path], check=False)
    if not res.ok:
        if reason == LOCK_REASON:
            repo.git(["worktree", "lock", "--reason", LOCK_REASON, path], check=False)
        raise Refusal(
            "worktree_remove_failed",
            f"git could not remove the worktree of lane {key}: {res.stderr.strip()[:300]}",
            next=[f"git -C '{path}' status", f"git lane release {key} --confirm {CONFIRM}"],
            details={"lane": key, "path": path, "stderr": res.stderr},
        )


# -- reconcile --------------------------------------------------------------------------
def reconcile(repo: Repo) -> dict[str, Any]:
    procs.forbid_worker("reconcile")
    from guard import land, lock

    changes: list[dict[str, Any]] = []
    changes.extend(land.recover(repo))
    changes.extend(lock.clear_dead(repo))
    with registry_lock(repo):
        wts = repo.worktrees()
        idx = wt_index(wts)
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
            wt = idx.get(os.path.realpath(rec.path))
            # the worktree is there (whatever it has checked out: status and land name a
            # wrong branch themselves); only a vanished worktree orphans a lane
            present = wt is not None and wt.exists
            new = rec
            if rec.status == "active" and not present:
                new = replace(new, status="orphaned")
            elif rec.status == "orphaned" and present:
                new = replace(new, status="active")
            if new.status == "active" and present and read_marker(repo, rec.path) != rec.key:
                write_marker(repo, rec.path, rec.key)  # the hooks tell a lane by it
                changes.append({"action": "marker_written", "lane": rec.key})
            if new.owner_pid and not procs.alive(new.owner_pid, new.owner_start):
                new = replace(new, owner_pid=None, owner_start=None)
                changes.append({"action": "owner_cleared", "lane": rec.key, "pid": rec.owner_pid})
            if new.status != rec.status:
                changes.append({"action": new.status, "lane": rec.key, "from": rec.status})
            if new != rec:
                repo.store.write_lane(new)
        registered = {os.path.realpath(r.path) for r in known.values() if r.status != "released"}
        for wt in wts:
            if not wt.branch or not wt.branch.startswith("refs/heads/lane/") or not wt.exists:
                continue
            k = wt.branch[len("refs/heads/lane/"):]
            if os.path.realpath(wt.path) in registered or not policy.valid_key(k):
                continue
            if k in known and known[k].status != "released":
                continue
            rec = LaneRecord(key=k, branch=f"lane/{k}", path=wt.path, created_at=now_iso())
            repo.store.write_lane(rec)
            write_marker(repo, wt.path, k)
            changes.append({"action": "adopted", "lane": k, "path": wt.path})
    if not repo.store.epoch_is_valid():
        land.repair_epoch(repo)
        changes.append({"action": "epoch_repaired"})
    if changes:
        repo.store.event("reconcile", changes=changes)
    return {"ok": True, "code": "reconciled" if changes else "ok", "changes": changes}
