"""`git lane gc [--dry-run]`: release every lane whose work has landed and that holds
nothing else, keep (G11) and `git worktree lock` every other, and say how much disk that
took back and how much the kept lanes hold.

A lane is released only when all of this holds, each read from git now:
- it has landed: a land of this lane (since it was created) is in the audit log, and its
  tip is an ancestor of main and of the last landed ref (refs/git-lane/landed/*, which the
  hooks protect like main), so nothing on its branch is anywhere else only;
- release's own inspection (G11: unlanded commits, uncommitted or ignored files its setup
  did not leave, a sync in progress, detached or per-worktree-ref commits) finds nothing;
- no live process owns it, and no land of it runs.
The removal itself is `git lane release KEY` (its locks, its freeze of the lane's index,
its compare-and-swap delete of the branch): gc calls it and never removes anything by
itself. A lane with no commit of its own that never landed is kept, unlocked (nothing in
it to protect, but it may be a lane someone is about to start in).

Kept lanes with work are `git worktree lock`ed with a reason that says why (so no `git
worktree prune` and no `git worktree remove` without `--force` takes them); a lock
someone else put there stays as it is. Of git-lane's own leftovers gc removes only what
is certainly dead (the archive name list of a lane that is no longer active); the
archives in kept/ are user data: listed with their sizes, never deleted."""

from __future__ import annotations

import os
import stat

from guard import git, landed, lane, lock, objects, procs, recovery
from guard.commands import release
from guard.errors import Refusal
from guard.lane import LOCK_REASON
from guard.repo import Repo
from guard.results import GcKept, GcReleased, GcResult
from guard.store import LaneRecord


def run(repo: Repo, dry_run: bool = False) -> GcResult:
    lane.forbid_worker("gc", "git lane gc" + (" --dry-run" if dry_run else ""))
    main_sha = repo.main_sha()
    last = landed.last(repo)
    landed_lanes = _landed_keys(repo)
    released: list[GcReleased] = []
    kept: list[GcKept] = []
    hub_next: list[str] = []
    wts = git.by_path(repo.worktrees())
    for rec in sorted(repo.store.lanes(), key=lambda r: r.key):
        if rec.status == "released":
            continue
        size = disk_usage(rec.path)
        try:
            verdict = _look(repo, rec, wts, main_sha, last, landed_lanes)
        except Refusal as r:  # too many paths to look at (a tree bomb): kept, named
            if r.code != "worktree_too_large":
                raise
            verdict = _Verdict(r.code, r.message, list(r.next))
        if verdict is not None and verdict.ignored_only and not dry_run:
            # as release keeps them: its refusal writes the list and names the archive
            # to make before the discard (gc itself never archives or discards anything)
            try:
                release.run(repo, rec.key)
            except Refusal as r:
                verdict.next, verdict.alternatives = list(r.next), list(r.alternatives)
            else:  # the files went meanwhile: the lane is clean and landed after all
                released.append({"lane": rec.key, "path": rec.path, "tip": None, "bytes": size})
                continue
        if verdict is not None:
            kept.append(_keep(repo, rec, verdict, size, dry_run))
            continue
        if dry_run:
            released.append(
                {"lane": rec.key, "path": rec.path, "tip": _tip(repo, rec), "bytes": size}
            )
            continue
        try:
            res = release.run(repo, rec.key)
        except Refusal as r:  # it changed since we looked, or a land of it runs: kept
            kept.append(_keep(repo, rec, _Verdict(r.code, r.message, list(r.next)), size, False))
            continue
        if res["code"] == "released":
            released.append(
                {"lane": rec.key, "path": rec.path, "tip": res.get("tip"), "bytes": size}
            )
            hub_next = list(res.get("next") or hub_next)
    pruned = [] if dry_run else _prune_lists(repo)
    archives = _archives(repo)
    reclaimed = sum(r["bytes"] for r in released)
    repo.store.event(
        "gc",
        code="dry_run" if dry_run else "ok",
        released=[r["lane"] for r in released],
        kept=[{"lane": k["lane"], "code": k["code"]} for k in kept],
        reclaimed_bytes=reclaimed,
    )
    out: GcResult = {
        "ok": True,
        "code": "ok",
        "dry_run": dry_run,
        "released": released,
        "kept": kept,
        "reclaimed_bytes": reclaimed,
        "kept_bytes": sum(k["bytes"] for k in kept),
        "pruned": pruned,
        "archives": archives,
    }
    if hub_next:
        out["next"] = hub_next  # gc ran inside a lane it released: cd out of it
    return out


class _Verdict:
    """Why a lane is kept: a stable code, a sentence, the command(s) that deal with it,
    and (for a lane with work) the lock reason it gets."""

    def __init__(
        self,
        code: str,
        message: str,
        nxt: list[str],
        lock_reason: str | None = None,
        ignored_only: bool = False,
    ) -> None:
        self.code = code
        self.message = message
        self.next = nxt
        self.alternatives: list[str] = []
        self.lock_reason = lock_reason
        self.ignored_only = ignored_only  # only ignored files hold it back


@git.in_own_context
def _look(
    repo: Repo,
    rec: LaneRecord,
    wts: dict[str, git.Worktree],
    main_sha: str,
    last: landed.Landed | None,
    landed_lanes: dict[str, str],
) -> _Verdict | None:
    """None when the lane may be released; else why it is kept."""
    key = rec.key
    objects.use(repo, rec.path)  # its commits may be in its own store only
    wt = wts.get(os.path.realpath(rec.path))
    if wt is None or not wt.exists:
        return _Verdict(
            "lane_not_active",
            f"lane {key} has no worktree at {rec.path}",
            [f"git lane repair {key}"],
        )
    facts = recovery.branch_facts(repo, rec.path, rec.branch, _tip(repo, rec))
    if facts.state != "ok" and facts.recorded is not None:
        # the lane's last commit is known only to its worktree: repair, never release
        r = recovery.branch_refusal(key, facts, "release")
        return _Verdict(r.code, r.message, list(r.next))
    work = release.inspect(repo, rec, main_sha)
    if work.any():
        fresh = work.tip is not None and _shared_ancestor(repo, main_sha, work.tip)
        v = _work_verdict(key, rec.path, work, fresh)
        v.ignored_only = bool(work.ignored) and not (
            work.unlanded or work.dirty or work.rebase or work.detached or work.worktree_refs
        )
        return v
    if rec.owner_pid and procs.alive(rec.owner_pid, rec.owner_start):
        return _Verdict(
            "lane_owner_conflict",
            f"lane {key} belongs to live process {rec.owner_pid}",
            [f"git lane status {key}"],
        )
    holder = lock.read_owner(repo)
    if holder is not None and holder.lane == key and lock.owner_alive(holder):
        return _Verdict("lock_busy", f"a land of lane {key} is running", [f"git lane status {key}"])
    since = landed_lanes.get(key)
    tip = work.tip
    if since is None or since < rec.created_at or tip is None:
        v = _Verdict(
            "never_landed",
            f"lane {key} has nothing of its own and never landed (it may be about to be used)",
            [],
        )
        v.alternatives = [f"git lane release {key}"]
        return v
    # its tip is on main (release found no unlanded commit); it must be under the landed
    # refs too, which no rewrite of main can take away
    if last is None or not _shared_ancestor(repo, tip, last.sha):
        return _Verdict(
            "main_moved",
            f"lane {key}'s tip {tip[:12]} is on main but not under refs/git-lane/landed/",
            ["git lane doctor"],
        )
    return None


def _shared_ancestor(repo: Repo, a: str, b: str) -> bool:
    """Is `a` an ancestor of `b`, asked of the shared store alone (no lane's store, no
    commit-graph: release.inspect imported the lane's tip there first, verified)? False
    when git cannot tell (an object missing there): the lane is kept."""
    with git.shared_store_only():
        res = git.run(["merge-base", "--is-ancestor", a, b], repo.common_dir, check=False)
    return res.returncode == 0


def _work_verdict(key: str, path: str, work: release.Work, fresh: bool) -> _Verdict:
    """A lane release's G11 would keep: what it holds, the lock reason that says so, and
    what lands it (a stale lane syncs first: land alone would refuse stale_lane)."""
    parts = release.work_parts(work)
    if work.dirty or work.ignored or work.rebase:
        reason = LOCK_REASON  # what release locks a dirty lane with
        code = (
            "rebase_in_progress"
            if work.rebase
            else "lane_dirty"
            if work.dirty
            else "unlanded_work"  # ignored files only: release's refusal names the archive
        )
    else:
        reason = f"{lane.LOCK_PREFIX}unlanded work ({len(work.unlanded) or len(work.detached) or len(work.worktree_refs)} commits)"
        code = "unlanded_work"
    land = [f"git lane land {key}"] if fresh else [f"git lane sync {key}", f"git lane land {key}"]
    if work.rebase:
        nxt = [f"git lane continue {key}", f"git lane land {key}"]
    elif work.dirty:
        # checkpoint: add -A and commit, with the lane's pointers checked when it runs
        nxt = [f"git lane checkpoint {key} -m " + git.q(f"Work in lane {key} before land"), *land]
    elif work.unlanded:
        nxt = land
    elif work.ignored and not (work.detached or work.worktree_refs):
        # only ignored files: a gc run for real puts release's own refusal here (the
        # archive to make, then the release)
        nxt = ["git lane gc"]
    else:
        # commits on no branch, or only under refs/worktree/*: release's refusal names
        # them; keeping them is a branch away (release's result says which)
        nxt = [f"git lane status {key}"]
    return _Verdict(code, f"lane {key} has " + ", ".join(parts), nxt, reason)


def _keep(repo: Repo, rec: LaneRecord, v: _Verdict, size: int, dry_run: bool) -> GcKept:
    """Record a kept lane; lock its worktree (unless dry-run) when it holds work and
    nobody else locked it. Our own lock with an outdated reason is replaced."""
    held = release.lock_reason(rec.path) if os.path.isdir(rec.path) else None
    locked = held
    if (
        v.lock_reason is not None
        and not dry_run
        and (held is None or (lane.own_lock(held) and held != v.lock_reason))
    ):
        common = repo.common_dir
        if held is not None:
            git.run(["worktree", "unlock", rec.path], common, check=False)
        res = git.run(
            ["worktree", "lock", "--reason", v.lock_reason, rec.path], common, check=False
        )
        locked = v.lock_reason if res.ok else release.lock_reason(rec.path)
    return {
        "lane": rec.key,
        "path": rec.path,
        "code": v.code,
        "message": v.message,
        "next": v.next,
        "alternatives": v.alternatives,
        "locked": locked,
        "lock_reason": v.lock_reason,
        "locked_by_other": held is not None and not lane.own_lock(held),
        "bytes": size,
    }


def _tip(repo: Repo, rec: LaneRecord) -> str | None:
    return repo.ref_sha(f"refs/heads/{rec.branch}")


def _landed_keys(repo: Repo) -> dict[str, str]:
    """Lane key -> time of its latest land, from the audit log (a land that fell out of
    the rotated log is not known: that lane is kept, the safe side)."""
    out: dict[str, str] = {}
    for ev in repo.store.events():
        if (
            ev.get("kind") == "land"
            and ev.get("code") == "landed"
            and isinstance(ev.get("lane"), str)
        ):
            t = ev.get("time")
            if isinstance(t, str):
                out[ev["lane"]] = max(out.get(ev["lane"], ""), t)
    return out


def _prune_lists(repo: Repo) -> list[str]:
    """Remove kept/KEY.list files (release's archive name lists) of lanes that are no
    longer active: release removes its own list, one is left only by a lane released
    another way. The archives themselves are never touched."""
    kept_dir = repo.store.dir / "kept"
    active = {r.key for r in repo.store.lanes() if r.status != "released"}
    gone: list[str] = []
    try:
        entries = list(os.scandir(kept_dir))
    except OSError:
        return gone
    for e in entries:
        stale = e.name.endswith(".list") and e.name[: -len(".list")] not in active
        if stale and e.is_file(follow_symlinks=False):
            try:
                os.unlink(e.path)
                gone.append(e.path)
            except OSError:
                pass
    return sorted(gone)


def _archives(repo: Repo) -> list[dict[str, object]]:
    """Everything in kept/ but gc's own name lists: the archives release's `next` made
    (ignored files of released lanes), the git dirs a release copied out of a worktree,
    the files the oversize check and restore-main moved there. User data, listed with
    their size (`du -s -B1`) for the owner to look at and remove by hand; never removed
    here, and nothing else ever cleans kept/."""
    out: list[dict[str, object]] = []
    try:
        entries = list(os.scandir(repo.store.dir / "kept"))
    except OSError:
        return out
    for e in entries:
        if e.name.endswith(".list") and e.is_file(follow_symlinks=False):
            continue  # an archive name list: gc's own (pruned above once dead)
        out.append({"path": e.path, "bytes": disk_usage(e.path)})
    return sorted(out, key=lambda a: str(a["path"]))


def disk_usage(path: str | os.PathLike[str]) -> int:
    """Bytes the tree at `path` takes on disk, as `du -s -B1` counts them: allocated
    blocks, every hard-linked file once, symlinks never followed, no other filesystem
    entered. 0 for a path that is not there."""
    try:
        top = os.lstat(path)
    except OSError:
        return 0
    seen: set[tuple[int, int]] = set()
    total = top.st_blocks * 512
    if not stat.S_ISDIR(top.st_mode):
        return total
    todo = [os.fspath(path)]
    while todo:
        d = todo.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    ident = (st.st_dev, st.st_ino)
                    if ident in seen:
                        continue
                    seen.add(ident)
                total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode) and st.st_dev == top.st_dev:
                    todo.append(e.path)
    return total
