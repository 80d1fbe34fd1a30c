"""`git lane release KEY`: remove a lane's worktree and branch (G11: never while it holds
unlanded or uncommitted work, ignored files or commits kept only under its per-worktree
refs, unless `--confirm yes-discard-lane`; a lane with such work that is kept is
`git worktree lock`ed).

Release works on what it inspected, and only on that: it runs under the registry lock
(one release, create or reconcile at a time; a second release of the lane finds it
released) and the integration lock (no land of any lane meanwhile: a land whose worktree
vanished under its gate would fail), and it freezes the lane while it looks and removes
(it holds the worktree's `index.lock`, so no `git commit`, `add` or `checkout` in the lane
can slip in between). The branch is deleted by compare-and-swap against the tip it
inspected; if anything moved the branch meanwhile, the removed worktree is put back and
nothing is deleted."""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from guard import git, gitlocks, lane, lock, objects, policy, procs, recovery
from guard.crashpoint import crash_point
from guard.errors import Refusal, hook_line
from guard.lane import CONFIRM, LOCK_REASON
from guard.repo import Repo
from guard.results import ReleaseResult
from guard.store import FileLock, LaneRecord, atomic_write, atomic_write_json, now_iso, set_aside
from guard.store import move_aside


@dataclass
class Work:
    """What releasing the lane would lose, as inspected (frozen) just before removal."""

    tip: str | None
    unlanded: list[str] = field(default_factory=list)
    dirty: list[str] = field(default_factory=list)
    rebase: bool = False
    head: str | None = None  # a detached HEAD's commit
    detached: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    worktree_refs: list[dict[str, object]] = field(default_factory=list)

    def any(self) -> bool:
        return bool(
            self.unlanded
            or self.dirty
            or self.rebase
            or self.detached
            or self.ignored
            or self.worktree_refs
        )


@git.in_own_context
def run(repo: Repo, key: str | None, confirm: str | None = None) -> ReleaseResult:
    own = key or lane.bound_lane() or lane.lane_at(repo)
    lane.forbid_worker("release", f"git lane release {git.q(own)}" if own else "git lane status")
    key = lane.current(repo, key, "release")
    lane.check_key(key)
    with lane.registry_lock(repo):
        # read under the lock: a release that ran meanwhile left the record released
        rec = lane.get(repo, key)
        if rec.status == "released":
            return {"ok": True, "code": "already_released", "lane": key}
        objects.use(repo, rec.path)  # its commits may be in its own store only
        lane.check_pointers(repo, rec)  # git in the lane would use another repository
        lane.check_path_owner(repo, rec)  # never another lane's worktree removed as this one
        lane.owner_conflict(repo, rec, "release")
        if confirm != CONFIRM:
            facts = recovery.branch_facts(
                repo, rec.path, rec.branch, repo.ref_sha(f"refs/heads/{rec.branch}")
            )
            if facts.state != "ok" and facts.recorded is not None:
                # the lane's last commit is known only to its worktree: repair, not release
                raise recovery.branch_refusal(key, facts, "release")
        integration = FileLock(lock.flock_path(repo))
        if not integration.acquire(timeout=0):
            raise Refusal(
                "lock_busy",
                f"a land holds the integration lock; lane {key} is not released while a land runs",
                next=["git lane status", f"git lane release {key}"],
                details={
                    "lane": key,
                    "holder": h.public() if (h := lock.read_owner(repo)) is not None else None,
                },
            )
        inside = _stands_in(rec.path)
        try:
            res = _release(repo, rec, confirm == CONFIRM)
        finally:
            integration.release()
    hub = repo.hub()
    where = hub.path if hub is not None else str(repo.repo_root())
    res["hub"] = where
    if inside:
        # the shell that ran this stands in a directory that is gone now
        res["next"] = [f"cd {git.q(where)}"]
    return res


def _branch_unlocked(repo: Repo, rec: LaneRecord) -> None:
    """Refuse (lane_busy) before anything is removed while the lane branch's lock
    `refs/heads/lane/KEY.lock` exists: git would refuse the branch's delete, and then the
    `worktree add` that puts the removed worktree back (HEAD names the branch) as well."""
    lk, state = gitlocks.ref_lock_state(repo, rec.branch, rec.path)
    what = f"lane {rec.key}'s branch"
    if lk is None:
        # git takes packed-refs.lock for every ref delete (a gc or pack-refs holds it): the
        # delete would fail after the worktree went, and each retry remove it again
        lk, state = gitlocks.packed_refs_lock_state(repo, rec.path)
        what = "the repository's packed refs"
    if lk is None:
        return
    if state == "stale":
        raise gitlocks.stale_refusal(rec.key, [str(lk)], "release")
    raise Refusal(
        "lane_busy",
        f"a git command is writing {what} ({git.shown(lk)} exists); nothing was removed",
        next=[f"git lane release {rec.key}"],
        alternatives=["git lane status"],
        details={"lane": rec.key, "locks": [str(lk)], "stale": False},
    )


def _stands_in(path: str) -> bool:
    """Does the calling process's cwd lie inside the lane worktree at `path`?"""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        return False
    real = os.path.realpath(path)
    return cwd == real or cwd.startswith(real.rstrip(os.sep) + os.sep)


def _release(repo: Repo, rec: LaneRecord, confirmed: bool) -> ReleaseResult:
    key, common = rec.key, repo.common_dir
    main_sha = repo.main_sha()
    branch_ref = f"refs/heads/{rec.branch}"
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    present = wt is not None and wt.exists
    # git's record of a worktree whose checkout is gone (deleted by hand, a cache cleaner):
    # its admin dir still holds HEAD, its reflog, refs/worktree/*, the index and the
    # submodule git dirs, all looked at before it goes. Whatever is at the path now is no
    # checkout of the lane (no `.git`): never removed, unless it is an empty directory
    gone_admin: str | None = None
    if wt is not None and not present:
        _nothing_at(key, rec.path)
        gone_admin = _pinned_admin(repo, key, rec.path)
    _branch_unlocked(repo, rec)
    frozen = _freeze(repo, key, rec.path, confirmed) if wt is not None else None
    try:
        # _inspect imports what the branch holds into the shared store first (verified):
        # its store goes with its admin dir, and `recover` below must still find the commits
        work = _inspect(repo, rec, wt if present else None, main_sha)
        if wt is not None and gone_admin is not None:
            _inspect_admin(repo, rec, wt, gone_admin, main_sha, work)
        g11_keep_work(
            repo, key, rec.path, rec.branch, present, confirmed, work, gone=gone_admin is not None
        )
        # every commit a recover below names goes into the shared store first (verified, as
        # the tip): a sandboxed lane's store goes with its admin dir; what cannot is lost
        lost = _absorb_recovered(repo, rec, work)
        begin(repo, rec, work)  # what reconcile finishes if this process dies from here on
        crash_point("release_inspected")  # the lane frozen (its index.lock), nothing removed
        kept_modules: str | None = None
        kept_skipped: list[str] = []
        if present:
            if confirmed:
                admin = _pinned_admin(repo, key, rec.path)
                kept_modules, kept_skipped = keep_modules(repo, key, rec.path)
                _drop_modules(rec.path)  # kept: gone through fds, as git could not
                _remove_by_fds(key, rec.path, admin)
            else:
                kept_modules, kept_skipped = _remove_clean_worktree(repo, key, rec.path)
        elif gone_admin is not None:  # gone by hand: git's record goes through fds as well
            # its submodule git dirs are kept first (nothing to confirm: a copy loses nothing)
            kept_modules, kept_skipped = keep_modules(
                repo, key, rec.path, worktree=False, again=_again(key, confirmed)
            )
            _nothing_at(key, rec.path, remove=True)
            _remove_by_fds(key, rec.path, gone_admin, confirmed, worktree=False)
        crash_point("release_removed")  # the worktree gone, the branch and record not yet
        if work.tip is not None:
            # CAS delete: only the tip inspected above is dropped
            res = git.run(
                [
                    "update-ref",
                    "--no-deref",
                    "-m",
                    f"git-lane: release {key}",
                    "-d",
                    branch_ref,
                    work.tip,
                ],
                common,
                check=False,
            )
            if not res.ok:
                _end(repo, key)
                raise _not_deleted(repo, rec, work.tip, present, res.stderr, kept_modules)
        crash_point("release_branch_deleted")  # the record still says active
    except BaseException:
        try:
            kept = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path)) is not None
        except Exception:
            kept = False  # cannot tell: the journal stays, reconcile looks
        if kept:
            _end(repo, key)  # refused before the removal, or put back: nothing to finish
        raise
    finally:
        _thaw(frozen)
    detached_head = work.head if work.detached and work.head not in lost else None
    _finish(
        repo,
        rec,
        work.tip,
        discarded_commits=work.unlanded,
        discarded_paths=work.dirty[:200],
        discarded_head=detached_head,
        discarded_ignored=work.ignored[:200],
        discarded_worktree_refs=work.worktree_refs,
        kept_modules=kept_modules,
        kept_modules_skipped=kept_skipped[:200],
        lost_commits=lost,
    )
    return {
        "ok": True,
        "code": "released",
        "lane": key,
        "tip": work.tip,
        "discarded_commits": work.unlanded,
        "discarded_paths": work.dirty,
        "discarded_detached": work.detached,
        "discarded_ignored": work.ignored,
        "discarded_worktree_refs": work.worktree_refs,
        "recover": f"git branch {rec.branch} {work.tip}"
        if work.unlanded and work.tip and work.tip not in lost
        else None,
        "recover_detached": f"git branch {rec.branch}-detached {detached_head}"
        if detached_head
        else None,
        "recover_worktree_refs": [
            f"git branch {git.q(rec.branch + '-' + str(r['ref']).removeprefix('refs/worktree/').replace('/', '-'))} {r['sha']}"
            for r in work.worktree_refs
            if r["sha"] not in lost
        ],
        "lost_commits": lost,
        "kept_modules": kept_modules,
        "kept_modules_skipped": kept_skipped,
    }


def _absorb_recovered(repo: Repo, rec: LaneRecord, work: Work) -> list[str]:
    """Import into the shared store, verified and re-hashed (objects.absorb, as the tip
    is), every commit a released result names to get back: the unlanded tip, a detached
    HEAD, each refs/worktree/* tip. A sandboxed lane made them in its own store
    (worktrees/<id>/objects), which goes with its admin dir. Returns those that could
    not be (their objects missing or forged): no recover names them, they are lost."""
    named = [
        *([work.tip] if work.unlanded and work.tip else []),
        *([work.head] if work.detached and work.head else []),
        *(str(r["sha"]) for r in work.worktree_refs),
    ]
    lost: list[str] = []
    for sha in dict.fromkeys(named):
        why = objects.absorb(repo, rec.key, rec.path, rec.branch, sha)
        if why:
            repo.store.event("objects_kept_in_lane", lane=rec.key, why=why, tip=sha)
            lost.append(sha)
    return lost


def _finish(repo: Repo, rec: LaneRecord, tip: str | None, **logged: object) -> None:
    """After the worktree and the branch went: the record says released, the lane's
    leftovers in the state go, the release is logged, and its journal is dropped."""
    new = replace(
        rec,
        status="released",
        released_at=now_iso(),
        released_tip=tip,
        owner_pid=None,
        owner_start=None,
    )
    repo.store.write_lane(new)
    objects.forget(repo)  # the lane's store went with its admin dir: drop its alternates entry
    repo.store.drop_setup_manifest(rec.key)
    list_path(repo, rec.key).unlink(missing_ok=True)
    _prune_agent_excludes(repo, rec.key)
    _drop_private_cache(repo, rec.key)
    repo.store.event("release", lane=rec.key, code="released", tip=tip, **logged)
    _end(repo, rec.key)


def _drop_private_cache(repo: Repo, key: str) -> None:
    """The cache dir a sandboxed CMD of the lane had (guard/sandbox.py private_cache) and
    Codex's temp dir (sandbox.codex_tmp) go with the lane: a lane made later under the
    same key starts with none. Removed through directory fds (no link CMD made in it
    followed; a tree deeper than any git tree is left, never a RecursionError)."""
    from guard import dirfd, sandbox
    from guard.config import cache_home

    cache = os.path.realpath(cache_home())
    dirfd.remove_tree(sandbox.private_cache(cache, repo.slug, key))
    # and Codex's temp dir (agent-setup --for codex), kept beside it
    dirfd.remove_tree(sandbox.codex_tmp(cache, repo.slug, key))


# -- a release killed part way ------------------------------------------------------------
# Written (durably) once G11 let the release through and before anything is removed; gone
# when the record says released. A journal found under the registry lock is a dead
# release's (every release holds that lock throughout): reconcile finishes it when the
# worktree went, and drops it when nothing was removed.
def journal_path(repo: Repo, key: str) -> Path:
    return repo.store.dir / "releasing" / f"{key}.json"


def begin(repo: Repo, rec: LaneRecord, work: Work) -> None:
    atomic_write_json(
        journal_path(repo, rec.key),
        {
            "lane": rec.key,
            "path": rec.path,
            "tip": work.tip,
            "discarded_commits": work.unlanded,
            "at": now_iso(),
        },
    )


def _end(repo: Repo, key: str) -> None:
    path = journal_path(repo, key)
    try:
        path.unlink(missing_ok=True)
    except IsADirectoryError:  # no journal of ours: kept aside, as other state files are
        aside = set_aside(path)
        repo.store.event("warning", lane=key, code="state_corrupt", path=str(path), to=str(aside))


def _keep_journal(repo: Repo, key: str) -> list[dict[str, Any]]:
    """An unreadable journal is moved aside as `KEY.json.corrupt-<UTC time>` (kept, as
    other state files are), logged; left where it is when it cannot be moved."""
    path = journal_path(repo, key)
    if not os.path.lexists(path):
        return []
    try:
        aside = move_aside(path, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    except OSError:
        return []
    repo.store.event("warning", lane=key, code="state_corrupt", path=str(path), to=str(aside))
    return [{"action": "release_journal_kept", "lane": key, "path": str(aside)}]


def recover(repo: Repo, idx: dict[str, git.Worktree]) -> list[dict[str, Any]]:
    """reconcile, under the registry lock: finish each release that died after its
    journal was written (the worktree gone: the branch is deleted at the tip it
    inspected, the record written released), or drop its journal when its worktree is
    still there (nothing was removed). A branch moved since, or one holding unlanded
    commits the release was confirmed to discard, is kept, and so is the lane."""
    changes: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(repo.store.dir / "releasing"))
    except OSError:
        return changes
    for name in names:
        key = name.removesuffix(".json")
        if not name.endswith(".json") or name.startswith(".") or not policy.valid_key(key):
            continue
        d = repo.store.read_json(journal_path(repo, key), lane=key)
        rec = repo.store.read_lane(key)
        tip = d.get("tip") if d is not None else None
        if d is None or not (tip is None or isinstance(tip, str)):
            # unreadable (not JSON, not a file, a tip of no form): kept aside, never deleted
            changes.extend(_keep_journal(repo, key))
            continue
        if (
            rec is None
            or rec.status == "released"
            or d.get("path") != rec.path
            or not (tip is None or isinstance(tip, str))
        ):
            _end(repo, key)
            continue
        wt = idx.get(os.path.realpath(rec.path))
        if wt is not None and wt.exists:
            _end(repo, key)
            changes.append({"action": "release_rolled_back", "lane": key})
            continue
        now = repo.ref_sha(f"refs/heads/{rec.branch}")
        if now is not None and now != tip:
            _end(repo, key)  # moved since it was inspected: kept, as release keeps it
            continue
        if now is not None and (d.get("discarded_commits") or _unlanded(repo, now)):
            # what finishing would lose is asked of git, at the branch's tip now, never
            # taken from the journal (a file in the state dir). A confirmed discard of
            # unlanded commits is the owner's to redo, never reconcile's: the branch (and
            # so the commits) stays, and so does git's record of its worktree (`repair`
            # checks it out again from there), the lane orphaned
            _end(repo, key)
            changes.append({"action": "release_not_finished", "lane": key, "tip": tip})
            continue
        if wt is not None:  # git's record of a worktree whose directory went (in part)
            changes.extend(finish_removal(repo, rec, tip))
        if now is not None:
            res = git.run(
                [
                    "update-ref",
                    "--no-deref",  # a branch made a symbolic ref: the ref goes, never its target
                    "-m",
                    f"git-lane: release {key}",
                    "-d",
                    f"refs/heads/{rec.branch}",
                    now,
                ],
                repo.common_dir,
                check=False,
            )
            if not res.ok:
                continue  # left as it is: the next reconcile (or release) looks again
        _finish(repo, rec, tip, recovered=True, discarded_commits=d.get("discarded_commits"))
        changes.append({"action": "release_finished", "lane": key, "tip": tip})
    return changes


def finish_removal(repo: Repo, rec: LaneRecord, tip: str | None) -> list[dict[str, Any]]:
    """A release killed inside `git worktree remove` leaves part of the lane's directory
    (its `.git` file may be among what went) and git's record of the worktree: create of
    the key then fails on both. What is left goes only when each file of it is, byte for
    byte, the file the lane's tip `tip` commits (nothing lost); else the directory is
    moved, whole, to `kept/KEY-leftover-<time>` (never deleted). Then git's record goes,
    by `git worktree remove` of a path where nothing is left (git then drops only its
    admin dir: nothing of a directory there is ever removed by path)."""
    from guard import dirfd

    changes: list[dict[str, Any]] = []
    path = rec.path
    if os.path.lexists(path):
        if not os.path.isdir(path) or os.path.islink(path) or not _only_tip_files(repo, path, tip):
            kept = repo.store.dir / "kept" / f"{rec.key}-leftover-{now_iso().replace(':', '')}"
            try:
                kept.parent.mkdir(parents=True, exist_ok=True)
                os.rename(path, kept)
            except OSError:
                return changes  # left as it is: create refuses, nothing is lost
            changes.append({"action": "release_leftover_kept", "lane": rec.key, "to": str(kept)})
        else:
            if not dirfd.remove_tree(path):  # (through directory fds, no link followed)
                return changes
            changes.append({"action": "release_leftover_removed", "lane": rec.key, "path": path})
    if os.path.lexists(path):
        return changes  # made again meanwhile: the next reconcile looks again
    git.run(["worktree", "remove", "--force", path], repo.common_dir, check=False)
    return changes


def _only_tip_files(repo: Repo, path: str, tip: str | None) -> bool:
    """Is every file under `path` (a symlink as its target) the same as `tip` commits it
    at the same place? False when git cannot tell. A file is read only when its size is
    the blob's: one the lane grew (`truncate -s 3G`, no disk used) is never read whole."""
    import hashlib

    if tip is None:
        return False
    listed = git.run(
        ["ls-tree", "-r", "-l", "-z", "--full-tree", tip], repo.common_dir, check=False
    )
    if not listed.ok:
        return False
    blobs: dict[str, tuple[str, int]] = {}
    for entry in listed.z():
        meta, _, name = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 4 and parts[1] == "blob" and parts[3].isdigit():
            blobs[name] = parts[2], int(parts[3])
    algo = "sha1" if len(tip) == 40 else "sha256"
    for top, dirs, files in os.walk(path):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            full = os.path.join(top, name)
            want, size = blobs.get(os.path.relpath(full, path), ("", -1))
            if not want:
                return False
            try:
                st = os.lstat(full)
                if st.st_size != size:
                    return False
                if stat.S_ISLNK(st.st_mode):
                    data = os.fsencode(os.readlink(full))
                elif stat.S_ISREG(st.st_mode):  # never a FIFO's read (it would hang)
                    # a swap since: no read; grown since: never past the blob's size
                    data = git.read_regular(full, follow=False, limit=size)
                else:
                    return False
            except OSError:
                return False
            h = hashlib.new(algo, b"blob %d\0" % len(data) + data)
            if h.hexdigest() != want:
                return False
    return True


def _unlanded(repo: Repo, tip: str) -> bool:
    """Does `tip` hold a commit that neither main nor any landed ref reaches? True when
    git cannot tell: reconcile then keeps the branch."""
    try:
        main_sha = repo.main_sha()
    except Refusal:
        return True
    with git.shared_store_only():  # no lane's store, no commit-graph (see branch_unlanded)
        res = git.run(
            ["rev-list", "--count", tip, "--not", main_sha, "--glob=refs/git-lane/landed/*"],
            repo.common_dir,
            check=False,
        )
    return not res.ok or res.stdout.strip() != "0"


def keep_modules(
    repo: Repo,
    key: str,
    path: str,
    worktree: bool = True,
    again: str | None = None,
) -> tuple[str | None, list[str]]:
    """The git dirs of the lane's populated submodules live in its admin dir
    (`worktrees/<id>/modules/`), which a forced removal deletes, with every submodule
    commit made in the lane: one main may already record. So do the git dirs of
    repositories made in the worktree (`git init sub`: its git dir `sub/.git`, committed
    as a gitlink or not, or not any more). Both are copied into git-lane's `kept/` first,
    as `alpha-modules-20260101T000000Z/` for lane alpha (never deleted):
    `<admin>/modules/NAME` as `NAME/`, and (when `worktree`: the checkout is there) every
    git dir `_embedded_git_dirs` finds in it, `PATH/.git` as `worktree-gitdirs/PATH/.git`
    (a bare-looking `PATH` as `worktree-gitdirs/PATH`). Returns that path (None when the
    lane has neither) and what was not copied. A worktree it cannot look at all of is
    refused `worktree_unreadable`, with `again` after moving it aside.

    The admin dir and the worktree can be written from the lane: the copy is read through
    directory fds (guard/dirfd.py: no link followed, no open that blocks) and written
    through directory fds of the copy (no path limit: a git dir deep in the worktree has
    a copy path longer than its own), of regular files and directories only; a link,
    FIFO, socket or device (git makes none in a git dir: none holds a commit) is left out
    and named. A file or directory the owner may not open (its mode: the lane may chmod
    them; the removal would give the owner's bits back and delete it) is refused
    `worktree_unreadable` (_not_copied), and so is one deeper than the worktree's removal
    goes. A file is copied once whatever the number of its hard links (the others are
    links in the copy), and its holes stay holes.
    A copy that would not fit in the free space of `kept/` is refused before it starts
    (`state_write_failed`, with `again` as its next once there is room); one that fails
    otherwise is a refusal (`worktree_remove_failed`): nothing was removed."""
    from guard import dirfd

    again = again or _again(key, True)
    sources: list[tuple[str, str, str]] = []  # (trusted root, dir under it, name in the copy)
    gd = git.worktree_git_dir(path)
    try:
        if gd is not None and stat.S_ISDIR(os.lstat(gd / "modules").st_mode):
            sources.append((str(gd), "modules", "."))
            # what the lane chmod-ed there gets the owner's bits back through directory
            # fds (the removal gives them back too), so it is copied; never a printed
            # `chmod -R` by path, which follows a link the lane puts at `modules`
            dirfd.owner_bits(str(gd), "modules", COPY_DEPTH)
    except OSError:
        pass
    embedded = _embedded_git_dirs(key, path, again) if worktree else []
    if not sources and not embedded:
        return None, []
    dest = repo.store.dir / "kept" / f"{key}-modules-{now_iso().replace(':', '')}"
    n = 0
    while os.path.lexists(dest.with_name(dest.name + (f"-{n}" if n else ""))):
        n += 1
    dest = dest.with_name(dest.name + (f"-{n}" if n else ""))
    skipped: list[str] = []
    lost: list[tuple[str, str, str]] = []  # (root, path under it): a file or dir not copied
    repos: list[str] = []  # each copy that is a repository, relative to `dest`
    copies: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) -> its copy, under `dest`
    try:
        os.makedirs(dest.parent, exist_ok=True)
        if embedded:
            # a submodule named like the embedded dirs' place: the place takes a suffix
            top = "worktree-gitdirs"
            names = {s.split("/", 1)[0] for s in _module_names(gd)}
            m = 0
            while top + (f"-{m}" if m else "") in names:
                m += 1
            top += f"-{m}" if m else ""
            sources += [(path, rel, f"{top}/{rel}") for rel in embedded]
        _check_room(repo, key, dest, sources, again, lost)
        if not lost:
            dest.mkdir()
            # every copy is made relative to a directory fd of it (mkdirat, openat): a
            # git dir deep in the lane's tree has a copy path longer than its own, past
            # what a path can name (PATH_MAX), red team 14H-B F1
            root_fd = os.open(dest, dirfd.DIR)
            try:
                for root, rel, into in sources:
                    _copy_source(root, rel, into, root_fd, copies, skipped, lost, repos)
            finally:
                os.close(root_fd)
    except OSError as exc:
        # the partial copy goes (the lane's own is still there: nothing was removed), so
        # the next, run once space is freed, leaves no second copy behind
        dirfd.remove_tree(str(dest))
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_room(repo, key, dest, again, str(exc)) from None
        raise Refusal(
            "worktree_remove_failed",
            f"could not copy the submodule git dirs of lane {key} "
            f"into {dest} before removing it: {exc}; nothing was removed",
            next=[again],
            details={"lane": key, "path": path, "stderr": str(exc), "kept_modules": str(dest)},
        ) from None
    # what lies deeper than the copy in <admin>/modules is deeper than its removal goes
    # (dirfd.remove_tree stops there too): left in place and named, as before
    skipped += [f"{r}/" for root, r, why in lost if why == "deep" and root != path]
    lost = [x for x in lost if x[2] != "deep" or x[0] == path]
    if lost:
        # a file or directory of a git dir that was not copied would go with the removal
        # (remove_tree gives the owner's bits back and deletes it): the one home, maybe,
        # of a commit main records. Refused before anything is removed (red team 14H-B F2)
        dirfd.remove_tree(str(dest))
        raise _not_copied(key, path, lost, again)
    # each copy is a repository of its own now: its core.worktree named the lane's
    # checkout, which is going (git would refuse to run in it). Only in the copy: regular
    # files git-lane wrote, in directories it made
    for here in repos:
        git.run(
            ["config", "--file", str(dest / here / "config"), "--unset-all", "core.worktree"],
            check=False,
        )
    return str(dest), skipped


# how deep the copy of a git dir goes: as deep as dirfd.remove_tree (one source and one
# copy fd open per level), so what lies deeper is left by the removal as well
COPY_DEPTH = 200


def _copy_source(
    root: str,
    rel: str,
    into: str,
    root_fd: int,
    copies: dict[tuple[int, int], str],
    skipped: list[str],
    lost: list[tuple[str, str, str]],
    repos: list[str],
) -> None:
    """Copy the directory `root/rel` (reached from the trusted `root` without a link) to
    `into` under the copy's root `root_fd`, relative to directory fds throughout. What
    it may not open, and what lies deeper than COPY_DEPTH, goes to `lost`."""
    from guard import dirfd

    try:
        parent, _ = dirfd.walk(root, os.path.dirname(rel))
    except PermissionError:
        lost.append((root, os.path.dirname(rel) or ".", "mode"))
        return
    try:
        sfd = _open_source_dir(parent, os.path.basename(rel), root, rel, lost)
    finally:
        os.close(parent)
    if sfd is None:
        return
    try:
        dfd, _ = dirfd.walk(f"/proc/self/fd/{root_fd}", into, create=True)
    except BaseException:
        os.close(sfd)
        raise
    # the copy's repositories as paths under `dest` (for `git config --file`)
    _copy_dir(
        root,
        rel,
        sfd,
        dfd,
        os.path.normpath(into),
        COPY_DEPTH,
        root_fd,
        copies,
        skipped,
        lost,
        repos,
    )


def _open_source_dir(
    pfd: int, name: str, root: str, rel: str, lost: list[tuple[str, str, str]]
) -> int | None:
    """An fd on the directory `name` of `pfd` (never through a link, never blocking);
    None when it is gone or no directory any more, or (in `lost`) its mode refuses it."""
    from guard import dirfd

    try:
        return os.open(name, dirfd.DIR | os.O_NONBLOCK, dir_fd=pfd)
    except PermissionError:
        lost.append((root, rel, "mode"))
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            raise
    return None


def _copy_dir(
    root: str,
    rel: str,
    sfd: int,
    dfd: int,
    at: str,
    depth: int,
    root_fd: int,
    copies: dict[tuple[int, int], str],
    skipped: list[str],
    lost: list[tuple[str, str, str]],
    repos: list[str],
) -> None:
    """Copy the entries of the source directory `sfd` (`rel` under `root`) into the copy's
    directory `dfd` (`at` under the copy's root); both fds closed on return."""
    from guard import dirfd

    try:
        entries = dirfd.listing(sfd)
        files: set[str] = set()
        for name, kind in entries:
            here = os.path.normpath(os.path.join(rel, name))
            if kind == stat.S_IFDIR:
                if depth <= 0:
                    lost.append((root, here, "deep"))
                    continue
                sub = _open_source_dir(sfd, name, root, here, lost)
                if sub is None:
                    continue
                try:
                    os.mkdir(name, dir_fd=dfd)
                    sub_d = os.open(name, dirfd.DIR, dir_fd=dfd)
                except BaseException:
                    os.close(sub)
                    raise
                _copy_dir(
                    root,
                    here,
                    sub,
                    sub_d,
                    os.path.join(at, name),
                    depth - 1,
                    root_fd,
                    copies,
                    skipped,
                    lost,
                    repos,
                )
            elif kind != stat.S_IFREG:
                skipped.append(here)  # a link, FIFO, socket or device: no commit in it
            else:
                try:
                    copied = _copy_file(sfd, name, dfd, os.path.join(at, name), root_fd, copies)
                except PermissionError:
                    lost.append((root, here, "mode"))
                    continue
                if copied:
                    files.add(name)
                else:
                    skipped.append(here)
        if {"HEAD", "config"} <= files:
            repos.append(at)
    finally:
        os.close(sfd)
        os.close(dfd)


def _module_names(gd: Path | None) -> list[str]:
    try:
        return os.listdir(gd / "modules") if gd is not None else []
    except OSError:
        return []


# how deep release looks for git dirs in the lane's worktree: every directory that
# dirfd.remove_tree can remove (TREE_DEPTH levels, the root among them) is looked at, so a
# tree deeper than that is refused before anything goes, never half removed; and how many
# git dirs it keeps (each is copied whole). Past either, or at a directory it may not read,
# release refuses (worktree_unreadable) rather than delete what it did not look at
GITDIR_DEPTH = 199  # dirfd.TREE_DEPTH less the root
GITDIR_MAX = 512


def _embedded_git_dirs(key: str, path: str, again: str) -> list[str]:
    """Every git dir in the lane's worktree at `path`, relative to it: each directory
    named `.git` (at any depth, the root's among them: a repository made in the lane,
    `git init sub`, whose commits, one main may record, are nowhere else, whether or not
    a gitlink of the lane names it now: `git rm --cached sub` leaves `sub/.git` the only
    home of a commit main's tree points at, red team 14G F4; a `.git` moved into a
    tracked directory, which `git status` never shows), and each directory below the root
    that looks like one to git (`HEAD` and `objects/` and `refs/`, or `HEAD` and a
    `commondir` file: a bare or separate git dir, `git init --separate-git-dir`). Neither
    is entered: the copy takes it whole. A `.git` file (a submodule's, a linked worktree's)
    names a git dir elsewhere: in `<admin>/modules/` (copied whole), in the worktree (found
    here as a directory that looks like a git dir) or outside (not removed).

    Found by a walk over directory fds (dirfd.scan: no link followed, so nothing outside
    the worktree is looked at or kept; no open that blocks), from the kernel's d_type (no
    stat per file: a node_modules of 100k files is a fraction of a second), never by
    listing gitlinks (the lane's index, HEAD and tip: what they no longer name was lost)
    and never by running git in a repository the lane made. A directory the owner may not
    open (its mode: the lane may chmod it), a tree deeper than GITDIR_DEPTH levels or more
    than GITDIR_MAX git dirs are refused `worktree_unreadable`: nothing is removed."""
    from guard import dirfd

    found: list[str] = []
    refused: list[str] = []
    deep: list[str] = []
    failed: OSError | None = None
    try:
        for here, _, entries in dirfd.scan(path, ".", GITDIR_DEPTH, refused=refused):
            rel = os.path.normpath(here)
            level = 0 if rel == "." else rel.count("/") + 1
            kinds = dict(entries)
            if rel != "." and _looks_like_git_dir(kinds):
                found.append(rel)
                entries.clear()  # copied whole: scan enters none of it
            elif kinds.get(".git") == stat.S_IFDIR:
                found.append(os.path.normpath(os.path.join(rel, ".git")))
                entries.remove((".git", stat.S_IFDIR))
            if level >= GITDIR_DEPTH and any(k == stat.S_IFDIR for _, k in entries):
                deep.append(rel)
            if len(found) > GITDIR_MAX or deep or refused:
                break
    except OSError as exc:  # a directory git-lane could not list (EACCES, EIO)
        failed = exc
    chmod = False
    if len(found) > GITDIR_MAX:
        why = f"it holds more than {GITDIR_MAX} git dirs (the first: {git.shown(found[0])})"
    elif deep:
        why = f"{git.shown(deep[0])} goes deeper than {GITDIR_DEPTH} levels"
    elif refused or failed is not None:
        chmod = True  # the owner's bits back, and it can be read
        where = git.shown(os.path.normpath(refused[0])) if refused else "one of its directories"
        why = f"{where} is a directory release may not read" + (
            f" ({failed.strerror or failed})" if failed is not None and not refused else ""
        )
    else:
        return sorted(found)
    raise _unreadable(key, path, again, why, chmod)


def _looks_like_git_dir(kinds: dict[str, int]) -> bool:
    """Would git take a directory with these entries for a git dir (is_git_directory)?"""
    if kinds.get("HEAD") != stat.S_IFREG:
        return False
    objects = kinds.get("objects") == stat.S_IFDIR and kinds.get("refs") == stat.S_IFDIR
    return objects or kinds.get("commondir") == stat.S_IFREG


def _unreadable(key: str, path: str, again: str, why: str, chmod: bool) -> Refusal:
    """Release could not look at every directory of the lane's worktree for git dirs: it
    removes nothing. Moving the worktree aside (one rename: nothing read, nothing lost)
    leaves the lane a worktree gone by hand, which the release then takes."""
    aside = f"{path.rstrip(os.sep)}.moved-aside-{now_iso().replace(':', '')}"
    alternatives = [f"chmod -R u+rwX -- {git.q(path)} && {again}"] if chmod else []
    return Refusal(
        "worktree_unreadable",
        f"release could not look for git dirs in all of lane {key}'s worktree "
        f"{git.shown(path)}: {why}; a repository there may hold commits found nowhere "
        "else (one main records), so nothing was removed: move the worktree aside (kept "
        "as it is), then release again",
        next=[f"mv -T -- {git.q(path)} {git.q(aside)}", again],
        alternatives=alternatives,
        details={"lane": key, "path": path, "why": why, "aside": aside},
    )


def _not_copied(key: str, path: str, lost: list[tuple[str, str, str]], again: str) -> Refusal:
    """A part of a git dir of the lane the copy could not take (its mode refuses the
    owner: the lane may chmod it; or deeper than the copy goes): nothing was removed.
    In the worktree, it is moved aside whole (one rename, nothing read) and the release
    run again, or its owner's bits given back; in the admin dir's `modules/`, its
    owner's bits given back."""
    root, rel, why = lost[0]
    what = "deeper than release copies" if why == "deep" else "a part release may not read"
    more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
    if root == path:
        return _unreadable(
            key,
            path,
            again,
            f"{git.shown(rel)}, in one of its git dirs, is {what}{more}",
            chmod=why == "mode",
        )
    return Refusal(
        "worktree_unreadable",
        f"release could not copy all of lane {key}'s submodule git dirs into kept/: "
        f"{git.shown(os.path.join(root, rel))} is {what}{more}; a submodule commit there "
        "may be found nowhere else, so nothing was removed: release again (it gives the "
        "owner's bits back there itself, through directory fds, no link followed)",
        next=[again],
        details={
            "lane": key,
            "path": path,
            "why": f"{os.path.join(root, rel)} is {what}{more}",
            "left": os.path.join(root, rel),
        },
    )


def _check_room(
    repo: Repo,
    key: str,
    dest: Path,
    sources: list[tuple[str, str, str]],
    again: str,
    lost: list[tuple[str, str, str]],
) -> None:
    """Refuse (`state_write_failed`) a copy that would not fit in the free space where
    `dest` goes: the blocks its regular files take, each file once (its hard links are
    links in the copy), counted before anything is written. A directory it may not open
    goes to `lost` (the caller refuses: nothing is copied or removed)."""
    from guard import dirfd

    seen: set[tuple[int, int]] = set()
    need = 0
    for root, rel, _ in sources:
        refused: list[str] = []
        try:
            for _, dfd, entries in dirfd.scan(root, rel, COPY_DEPTH, refused=refused):
                for name, kind in entries:
                    if kind != stat.S_IFREG:
                        continue
                    try:
                        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    except OSError:
                        continue
                    if (st.st_dev, st.st_ino) not in seen:
                        seen.add((st.st_dev, st.st_ino))
                        need += st.st_blocks * 512
        except PermissionError:  # the git dir itself (its mode: the lane's chmod)
            refused.append(rel)
        lost += [(root, r, "mode") for r in refused]
    if lost:
        return
    vfs = os.statvfs(dest.parent)
    free = vfs.f_bavail * vfs.f_frsize
    if need > free:
        raise _no_room(
            repo, key, dest, again, f"{need} bytes to copy, {free} free", need=need, free=free
        )


def _no_room(repo: Repo, key: str, dest: Path, again: str, why: str, **sizes: int) -> Refusal:
    return Refusal(
        "state_write_failed",
        f"the submodule git dirs of lane {key} do not fit in {dest.parent} ({why}); nothing "
        "was copied or removed: free space there, then run the release again",
        next=[again],
        alternatives=[f"df -h {git.q(dest.parent)}"],
        details={
            "lane": key,
            "path": str(dest),
            "errno": "ENOSPC",
            "state_dir": str(repo.store.dir),
            **sizes,
        },
    )


def _drop_modules(path: str) -> None:
    """`<admin>/modules`, once kept, removed through directory fds: the lane may have made
    it deeper than a path can name, where git's own removal fails (ENAMETOOLONG) for
    ever. What remains (deeper than dirfd.TREE_DEPTH) is git's to refuse, as before."""
    from guard import dirfd

    # the admin dir from trusted state (check_pointers pinned it), never the lane's `.git`
    # read again: a lane still running could point it at another lane's admin dir
    pinned = git.lane_pointers(path)
    if pinned and pinned.get("GIT_DIR"):
        dirfd.remove_tree(os.path.join(pinned["GIT_DIR"], "modules"))


def _pinned_admin(repo: Repo, key: str, path: str) -> str:
    """The lane's admin dir from trusted state (check_pointers pinned it), never the
    lane's `.git` read again; one that is not a directory right under
    `<common>/worktrees/` is refused (lane_pointers_tampered) before anything goes."""
    pinned = git.lane_pointers(path)
    admin = pinned.get("GIT_DIR") if pinned else None
    base = os.path.realpath(repo.common_dir / "worktrees")
    if (
        admin is None
        or os.path.islink(admin)
        or os.path.realpath(os.path.dirname(admin)) != base
        or not os.path.isdir(admin)
    ):
        raise lane.pointers_refusal(
            repo, key, [f"its admin dir in {base} is not known ({admin or 'none pinned'})"]
        )
    return os.path.join(base, os.path.basename(admin))


def _remove_by_fds(
    key: str, path: str, admin: str, confirmed: bool = True, worktree: bool = True
) -> None:
    """Release removes the lane's worktree, then its admin dir (git's record
    of it: git forgets a worktree whose admin dir is gone), through directory fds only
    (dirfd.remove_tree), never `git worktree remove` by path: a process of the lane may
    still run there (nothing stops it), and one exchanged a directory git was emptying
    with a link (renameat2 RENAME_EXCHANGE, both names in its worktree) and had the
    owner's release unlink files outside the lane (red team 14A). What remove_tree leaves
    (deeper than dirfd.TREE_DEPTH, or changed while it went) is a refusal: git's record,
    the branch and the lane's record stay, and the owner's `rm -rf` (which, like
    remove_tree, never follows a link) takes the rest before the release is run again."""
    from guard import dirfd

    for what in (path, admin) if worktree else (admin,):
        if not dirfd.remove_tree(what):
            raise Refusal(
                "worktree_remove_failed",
                f"could not remove all of {what} (lane {key}) through directory fds "
                "(each directory given its owner's u+rwx first): something in it is "
                "deeper than a git tree, another user's, or changed while it was removed "
                "(a process of the lane may still run); it was left, never removed by "
                "path, and the lane's branch was kept",
                next=[f"rm -rf -- {git.q(what)}", _again(key, confirmed)],
                details={"lane": key, "path": path, "left": what},
            )


def _again(key: str, confirmed: bool) -> str:
    """The release as it was run, for a refusal's next."""
    return f"git lane release {key}" + (f" --confirm {CONFIRM}" if confirmed else "")


def _nothing_at(key: str, path: str, remove: bool = False) -> None:
    """Release removes no checkout it cannot tell is the lane's. At the path of a worktree
    whose `.git` is gone there may be nothing, or an empty directory (removed when
    `remove`); anything else (the lane's files after an `rm -rf .git`, a directory or a
    file someone put there) is refused `worktree_path_exists` and left as it is: it is
    not the lane's checkout as git knows it, and its files are in no commit."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        try:
            if remove:
                os.rmdir(path)  # only an empty one: ENOTEMPTY when a file came since
                return
            if not os.listdir(path):
                return
        except FileNotFoundError:
            return
        except OSError:
            pass
    mv = git.mv_aside(path, path.rstrip(os.sep) + ".moved-aside")
    raise Refusal(
        "worktree_path_exists",
        f"{git.shown(path)}, where lane {key}'s worktree was, has no .git linking it to the "
        "repository (an `rm -rf .git`, or something put there since): it is not the lane's "
        "checkout as git knows it, and what it holds is in no commit; nothing was removed",
        next=[mv, f"git lane release {key}"],
        alternatives=[f"{mv} && git lane repair {key}"],
        details={"lane": key, "path": path},
    )


def _copy_file(
    sfd: int,
    name: str,
    dfd: int,
    at: str,
    root_fd: int,
    copies: dict[tuple[int, int], str] | None = None,
) -> bool:
    """Copy the regular file `name` of directory `sfd` to the new file `name` of directory
    `dfd` (`at` under the copy's root `root_fd`), with its mode bits (not setuid/setgid);
    False when it is not a regular file once opened (a link, a socket, gone since it was
    listed); PermissionError when its mode refuses the owner (the caller's to refuse).
    Only its data is copied, its holes stay holes (dirfd.copy_data): a lane may make
    a file of a terabyte that takes no space (truncate), which a copy byte by byte would
    write out as zeros until the owner's disk is full. A file already copied (its
    (st_dev, st_ino) in `copies`: another hard link of it) is a hard link to that copy:
    a lane's 60000 links to one file of a GiB are one GiB in the copy, not 60 TiB."""
    from guard import dirfd

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=sfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.ENOENT):
            return False  # a link, a socket, gone since it was listed
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        first = copies.get((st.st_dev, st.st_ino)) if copies is not None else None
        if first is not None:
            try:
                os.link(first, name, src_dir_fd=root_fd, dst_dir_fd=dfd, follow_symlinks=False)
                return True
            except OSError as exc:
                # too many links, or the first copy's path too long to name: its own copy
                if exc.errno not in (errno.EMLINK, errno.ENAMETOOLONG):
                    raise
        out = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dfd,
        )
        try:
            dirfd.copy_data(fd, out, st.st_size)
            os.fchmod(out, stat.S_IMODE(st.st_mode) & 0o777)
        finally:
            os.close(out)
        if copies is not None and st.st_nlink > 1:
            copies.setdefault((st.st_dev, st.st_ino), at)
        return True
    finally:
        os.close(fd)


def inspect(repo: Repo, rec: LaneRecord, main_sha: str) -> Work:
    """What releasing the lane now would lose (read only: nothing is locked or frozen);
    `git lane gc` decides with it."""
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    return _inspect(repo, rec, wt if wt is not None and wt.exists else None, main_sha)


def lock_reason(path: str) -> str | None:
    """The reason of the `git worktree lock` on the worktree at `path` ("" for a lock
    without one), or None when it is not locked."""
    gd = git.worktree_git_dir(path)
    try:
        return (
            git.read_admin(gd / "locked").strip()
            if gd is not None and (gd / "locked").is_file()
            else None
        )
    except OSError:
        return ""


def branch_unlanded(repo: Repo, rec: LaneRecord, tip: str, main_sha: str) -> list[str]:
    """The commits of the lane's branch at `tip` that main lacks ("%h %s" each). Asked of
    the shared store alone (git.shared_store_only: no lane's store, no commit-graph), once
    what `tip` holds beyond main is imported there from the lane's own store, every object
    re-hashed (objects.absorb, as land's G5): a commit-graph or pack a sandboxed CMD wrote
    into its store cannot make the owner's commits look landed. A tip whose objects do not
    verify, or that git cannot read there, counts as unlanded (the branch is kept)."""
    why = objects.absorb(repo, rec.key, rec.path, rec.branch, tip)
    if why:
        repo.store.event("objects_kept_in_lane", lane=rec.key, why=why, tip=tip)
        return [f"{tip[:12]} (its objects are not verified into the shared store: {why})"]
    with git.shared_store_only():
        res = git.run(
            ["log", "--format=%h %s", f"{main_sha}..{tip}", "--"], repo.common_dir, check=False
        )
    if not res.ok:
        return [f"{tip[:12]} (git could not list the commits main lacks)"]
    return res.lines()


def _inspect(repo: Repo, rec: LaneRecord, wt: git.Worktree | None, main_sha: str) -> Work:
    common = repo.common_dir
    work = Work(tip=repo.ref_sha(f"refs/heads/{rec.branch}"))
    if work.tip is not None:
        work.unlanded = branch_unlanded(repo, rec, work.tip, main_sha)
    if wt is None:
        return work
    keep = [main_sha, *([work.tip] if work.tip else [])]
    work.dirty = git.dirty_paths(rec.path)
    work.rebase = git.rebase_in_progress(rec.path)
    # commits made on a detached HEAD in the lane are on no branch: removing the worktree
    # (and with it HEAD's reflog) would lose them silently
    work.head = wt.head if wt.branch is None and not work.rebase else None
    if work.head and work.head.strip("0"):
        work.detached = git.run(
            ["log", "--format=%h %s", work.head, "--not", *keep], common
        ).lines()
    # Commits HEAD was on and left (a detached HEAD switched back to the branch), and tips
    # the lane's branch had before a reset or an amend, live only in this worktree's HEAD
    # reflog and the branch's reflog, which go with the lane: they are work too.
    head_log = git.run(  # the lane's logs/HEAD: a FIFO planted there must not hang release
        ["reflog", "show", "--format=%H %gs", "HEAD"],
        rec.path,
        check=False,
        timeout=git.lane_read_timeout(),
    )
    work.detached = list(dict.fromkeys([*work.detached, *_reflog_work(repo, rec, head_log)]))
    # files flagged assume-unchanged or skip-worktree: `git status` (and `git worktree
    # remove`) do not see their edits, so they are looked at against the tip directly
    if work.tip is not None:
        hidden = git.hidden_differences(rec.path, work.tip)
        work.dirty = list(dict.fromkeys([*work.dirty, *hidden.changed]))
    # ignored files (.env, build outputs) are in no commit and `worktree remove` deletes
    # them without a word; each is counted once (a directory git does not enter, once,
    # with its trailing slash) ...
    from guard import include

    work.ignored = include.ignored_files(rec.path)
    # ...except what the lane's setup left and nobody changed since (a venv or
    # node_modules that setup_command made, what .worktreeinclude copied)...
    manifest = repo.store.read_setup_manifest(rec)
    if manifest and work.ignored:
        work.ignored = include.work(rec.path, work.ignored, manifest)
    # ...and what is the same as the hub's, byte for byte: removing it loses nothing
    hub = repo.hub()
    if (
        hub is not None
        and work.ignored
        and os.path.realpath(hub.path) != os.path.realpath(rec.path)
    ):
        work.ignored = [
            p for p in work.ignored if not include.unchanged_copy(hub.path, rec.path, p)
        ]
    # ...and what `git lane agent-setup` created there and nobody changed since
    if work.ignored:
        from guard import adapters

        work.ignored = [
            p for p in work.ignored if not adapters.unchanged(repo.state_dir, rec.key, rec.path, p)
        ]
    # refs/worktree/* belong to this worktree alone: they go with it
    for ref, sha in git.refs(rec.path, "refs/worktree/").items():
        n = int(git.run(["rev-list", "--count", sha, "--not", *keep], common).stdout.strip() or 0)
        if n:
            work.worktree_refs.append({"ref": ref, "sha": sha, "commits": n})
    return work


def _reflog_work(repo: Repo, rec: LaneRecord, head_log: git.GitResult) -> list[str]:
    """What only the lane's HEAD reflog (`head_log`, read by the caller) and its branch's
    reflog hold ("%h %s" each, or a line saying a reflog could not be read). What a
    sync's rebase replaced is not work (it is on the branch in another form): the tip
    just before each `rebase` entry, and what a rebase made and then dropped."""
    common = repo.common_dir
    branch_log = git.run(
        ["reflog", "show", "--format=%H %gs", f"refs/heads/{rec.branch}"], common, check=False
    )
    out: list[str] = []
    wanted: set[str] = set()
    replaced: set[str] = set()
    for ref, logged in (("HEAD", head_log), ("branch", branch_log)):
        if not logged.ok and ref == "HEAD":
            out.append(f"(the HEAD reflog of {rec.path} could not be read)")
            continue
        entries = [ln.partition(" ")[::2] for ln in logged.lines()]  # newest first
        for n, (sha, why) in enumerate(entries):
            if not sha.strip("0"):
                continue
            if why.startswith("rebase"):
                older = entries[n + 1] if n + 1 < len(entries) else None
                if older is not None and not older[1].startswith("rebase"):
                    replaced.add(older[0])
                continue
            wanted.add(sha)
    wanted -= replaced
    if wanted:
        # every sha through stdin, before --not: no argument list grows with the reflog
        only = git.run(
            ["log", "--ignore-missing", "--format=%h %s", "--stdin", "--not", "--all"],
            common,
            check=False,
            input="".join(f"{sha}\n" for sha in sorted(wanted))
            + "".join(f"^{sha}\n" for sha in sorted(replaced)),
        )
        out += only.lines() if only.ok else [f"(the reflogs of lane {rec.key} could not be read)"]
    return out


def _inspect_admin(
    repo: Repo, rec: LaneRecord, wt: git.Worktree, admin: str, main_sha: str, work: Work
) -> None:
    """Add to `work` what the admin dir of a worktree whose checkout is gone still holds,
    which its removal would lose: the commits of a detached HEAD, of its HEAD reflog and
    of its per-worktree refs (`refs/worktree/*`), and what its index stages beyond HEAD.
    git runs with GIT_DIR and GIT_COMMON_DIR from trusted state (never the admin dir's
    own `commondir`); what git cannot read counts as work (G11 keeps the lane)."""
    common = str(repo.common_dir)
    git.check_no_worktree_config(common, os.path.join(admin, "config.worktree"))
    env = {"GIT_DIR": admin, "GIT_COMMON_DIR": common}

    def run(*args: str) -> git.GitResult:
        return git.run(
            [*git.LANE_CONFIG, *args],
            common,
            check=False,
            env=env,
            timeout=git.lane_read_timeout(),
        )

    keep = [main_sha, *([work.tip] if work.tip else [])]
    work.rebase = git.rebase_in_progress(rec.path)
    work.head = wt.head if wt.branch is None and not work.rebase else None
    if work.head and work.head.strip("0"):
        res = git.run(["log", "--format=%h %s", work.head, "--not", *keep], common, check=False)
        work.detached = (
            res.lines() if res.ok else [f"{work.head[:12]} (the detached HEAD of {rec.path})"]
        )
    elif wt.head is None and wt.branch is None:
        work.detached = [f"(the HEAD of {rec.path} could not be read)"]
    found = _reflog_work(repo, rec, run("reflog", "show", "--format=%H %gs", "HEAD", "--"))
    work.detached = list(dict.fromkeys([*work.detached, *found]))
    refs = run("for-each-ref", "--format=%(objectname) %(refname)", "refs/worktree/")
    if not refs.ok:
        work.detached.append(f"(the per-worktree refs of {rec.path} could not be read)")
    for ln in refs.lines() if refs.ok else []:
        sha, _, ref = ln.partition(" ")
        n = git.run(["rev-list", "--count", sha, "--not", *keep], common, check=False)
        count = int(n.stdout.strip() or 0) if n.ok else 1
        if count:
            work.worktree_refs.append({"ref": ref, "sha": sha, "commits": count})
    # staged work: the index is in the admin dir, and `git lane repair` checks it out again
    if git.index_file_fault(admin) is not None:
        work.dirty.append("(the lane's index is no file git can read)")
    elif work.head is not None or wt.branch is not None:
        staged = run("diff-index", "--cached", "--no-renames", "--name-only", "-z", "HEAD", "--")
        work.dirty += staged.z() if staged.ok else ["(the lane's index could not be read)"]


def work_parts(work: Work, branch: str | None = None, path: str | None = None) -> list[str]:
    """What `work` holds that G11 keeps, a phrase each: brief (gc's list), or naming the
    branch, the worktree and the first few files and refs (release's refusal)."""
    at = f" in {git.shown(path)}" if path is not None else ""
    parts: list[str] = []
    if work.unlanded:
        parts.append(
            f"{len(work.unlanded)} unlanded commit(s)" + (f" on {branch}" if branch else "")
        )
    if work.dirty:
        parts.append(f"{len(work.dirty)} uncommitted path(s){at}")
    if work.rebase:
        parts.append("a sync in progress")
    if work.detached:
        parts.append(
            f"{len(work.detached)} commit(s) on " + (f"a detached HEAD{at}" if at else "no branch")
        )
    if work.ignored:
        names = ""
        if path is not None:
            more = ", ..." if len(work.ignored) > 5 else ""
            names = f" ({', '.join(map(git.shown, work.ignored[:5]))}{more})"
        parts.append(f"{len(work.ignored)} ignored file(s) its setup did not leave{names}")
    if work.worktree_refs:
        refs = ""
        if path is not None:
            refs = f" ({', '.join(str(r['ref']) for r in work.worktree_refs[:5])})"
        parts.append(f"commits that only its per-worktree refs hold{refs}")
    return parts


def g11_keep_work(
    repo: Repo,
    key: str,
    path: str,
    branch: str,
    present: bool,
    confirmed: bool,
    work: Work,
    gone: bool = False,
) -> None:
    """G11: a lane with unlanded commits, uncommitted or ignored files, or commits only its
    per-worktree refs hold is never removed unconfirmed; one that is kept is `git worktree
    lock`ed so no prune takes it either. `gone`: its checkout is gone, and what its admin
    dir holds is the work (repair checks it out again, from there)."""
    if not work.any() or confirmed:
        return
    if (work.dirty or work.ignored or work.worktree_refs) and present:
        git.run(["worktree", "lock", "--reason", LOCK_REASON, path], repo.common_dir, check=False)
    what = work_parts(work, branch, path)
    message = f"lane {key} has " + " and ".join(what) + "; releasing would lose them"
    discard = f"git lane release {key} --confirm {CONFIRM}"
    # land takes only committed work on the lane branch: first the branch back in a
    # detached worktree (when HEAD holds nothing of its own) and the changes committed,
    # or land would refuse (lane_branch_mismatch, lane_dirty) and the path stop there
    ready: list[str] = []
    if present and work.head is not None and not work.detached:
        ready.append(
            f"{git.owner_git(path)} switch --quiet {git.q(branch)}"
        )  # --quiet: as lane.py says
    if present and work.dirty and not work.detached:
        # checkpoint commits what `add -A && commit` would, with the lane's pointers
        # checked when it runs: a plain git in the lane follows them wherever the lane,
        # still running, repointed them after this refusal
        ready.append(f"git lane checkpoint {key} -m " + git.q(f"Work of lane {key}"))
    nxt = [*ready, f"git lane land {key}", discard]
    alternatives: list[str] = []
    if gone:
        # land, continue and the rest refuse a lane with no checkout (lane_not_active):
        # repair checks it out again from its admin dir (HEAD, index, reflog, refs kept)
        message += (
            f"; its worktree {git.shown(path)} is gone: `git lane repair {key}` checks it out again"
        )
        nxt = [f"git lane repair {key}", f"git lane release {key}"]
        alternatives = [discard]
    elif work.rebase:
        # the sync's rebase is half done: finish it (or undo it) before anything else;
        # land would only refuse rebase_in_progress
        nxt = [f"git lane continue {key}", f"git lane land {key}"]
        alternatives = [f"git lane abort {key}", discard]
    elif work.ignored and not (work.unlanded or work.dirty or work.detached or work.worktree_refs):
        # nothing to land (land would say nothing_to_land and point back here): the files
        # are kept in an archive first, then the lane goes; or committed with add -f
        kept = repo.store.dir / "kept" / f"{key}-{now_iso().replace(':', '')}.tar"
        files = " ".join(git.q("./" + p.rstrip("/")) for p in work.ignored)
        # the archive takes a whole ignored directory where one holds the files (a build
        # dir of many files is one word; what setup left in it comes along, harmlessly).
        # The names go to tar in a NUL-separated list file, never on its command line
        # (40000 files would pass ARG_MAX: tar would not run, and the discard after it must
        # not either: `next` is joined with &&)
        listing = _write_list(list_path(repo, key), _ignored_tops(path, work.ignored))
        message += (
            f". There is nothing to land: `--confirm {CONFIRM}` discards them; the first "
            f"command below keeps a copy in {git.shown(kept)}"
        )
        nxt = [
            # --sparse: a file of a terabyte a lane made with truncate (no space taken)
            # goes into the archive as its data and a map, not as zeros filling the disk
            f"tar -C {git.q(path)} --sparse --null -T {git.q(listing)} -cf {git.q(kept)}",
            discard,
        ]
        alternatives = [discard]
        if len(work.ignored) <= ADD_F_MAX:
            g = git.owner_git(path)
            alternatives.append(
                f"{g} --literal-pathspecs add -f -- {files} && {g} commit -q -m "
                + git.q(f"Keep the ignored files of lane {key}")
                + f" && git lane land {key}"
            )
    raise Refusal(
        "unlanded_work",
        message,
        next=nxt,
        alternatives=alternatives,
        details={
            "lane": key,
            "commits": work.unlanded[:50],
            "dirty_paths": work.dirty[:50],
            "detached_commits": work.detached[:50],
            "ignored_paths": work.ignored[:50],
            "ignored_count": len(work.ignored),
            "worktree_refs": work.worktree_refs[:50],
            "tip": work.tip,
            "head": work.head,
        },
    )


ADD_F_MAX = 20  # past this many files, committing them is no quick way out: not offered


def _prune_agent_excludes(repo: Repo, key: str) -> None:
    """The info/exclude entries agent-setup added go when no active lane has a file at
    them any more (the last lane with that adapter is released)."""
    from guard import adapters

    exclude = repo.common_dir / "info" / "exclude"
    _, block, _ = adapters.exclude_block(_read(exclude))
    if not block:
        return
    rels = [e.lstrip("/") for e in block]
    in_use = {
        rel
        for rec in repo.store.lanes()
        if rec.status == "active" and rec.key != key
        for rel in rels
        if os.path.lexists(os.path.join(rec.path, rel))
    }
    adapters.prune_exclude(exclude, in_use)


def _read(path: Path) -> str:
    try:
        return git.read_regular(path).decode("utf-8", "surrogateescape")
    except OSError:
        return ""


def list_path(repo: Repo, key: str) -> Path:
    """The name list of lane `key`'s archive: one per lane, the latest refusal's; the
    release removes it."""
    return repo.store.dir / "kept" / f"{key}.list"


def _write_list(listing: Path, tops: list[str]) -> Path:
    """Write the NUL-separated list of what the archive takes (`./`-prefixed, so no name
    reads as a tar option) to `listing`; its path."""
    data = b"".join(os.fsencode("./" + t.rstrip("/")) + b"\0" for t in tops)
    # temp + rename like every state file: a release killed mid-write leaves the old list
    # or the new one, never half of one that `tar -T` would read as a shorter archive
    atomic_write(listing, data, mode=0o600)
    return listing


def _ignored_tops(path: str, files: list[str]) -> list[str]:
    """`files` with those under a wholly ignored directory of the lane (as `git ls-files
    --directory` names it) replaced by that directory, each once, in order."""
    dirs = [
        d
        for d in git.run(
            ["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"],
            path,
            env={"GIT_OPTIONAL_LOCKS": "0"},
        ).z()
        if d.endswith("/")
    ]
    out = [next((d for d in dirs if f.startswith(d)), f) for f in files]
    return list(dict.fromkeys(out))


# -- freezing the lane while it is looked at and removed --------------------------------------
def _freeze(repo: Repo, key: str, path: str, confirmed: bool) -> tuple[Path, int] | None:
    """Take the lane worktree's index.lock (what every git command that writes the index
    or HEAD of the lane takes first), so nothing committed there after the inspection can
    be lost by the removal. A lock already there means a git command is at work in the
    lane: refused, unless the owner confirmed the discard."""
    gd = git.worktree_git_dir(path)
    if gd is None:
        return None
    lk = gd / "index.lock"
    thaw_dead(path)  # a release killed while it held the lane frozen
    try:
        fd = os.open(lk, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        if confirmed:
            return None
        # left by a git killed in the lane (judged as checkpoint's, abort's): reconcile
        # lifts it (a staged state in it kept), then the release; else it is at work
        if lk in gitlocks.stale(repo, key, path, gd):
            raise gitlocks.stale_refusal(key, [str(lk)], "release") from None
        raise Refusal(
            "lane_busy",
            f"a git command is writing in lane {key} (its {lk} exists); nothing was released",
            next=[f"git lane release {key}"],
            alternatives=[f"rm {git.q(lk)} && git lane release {key}"],
            details={"lane": key, "index_lock": str(lk), "locks": [str(lk)], "stale": False},
        ) from None
    except OSError:
        return None  # an admin dir we cannot write: git's own checks still apply
    try:
        ino = os.fstat(fd).st_ino
        me = os.getpid()
        os.write(fd, f"{FREEZE_TAG}pid={me} ticks={procs.start_ticks(me)}\n".encode())
    finally:
        os.close(fd)
    return lk, ino


# what _freeze writes into the index.lock it holds (git's own start with "DIRC")
FREEZE_TAG = "git-lane release: "


def thaw_dead(path: str) -> bool:
    """Remove the index.lock a release SIGKILLed while it froze the lane left there (it
    names the release's pid and start; git would refuse every commit in the lane until
    someone removed it by hand). Anyone else's index.lock is left alone."""
    gd = git.worktree_git_dir(path)
    if gd is None:
        return False
    lk = gd / "index.lock"
    try:
        with os.fdopen(git.open_regular(lk, follow=False), "rb") as f:  # never a FIFO's
            head = f.read(200).decode("ascii")
    except (OSError, UnicodeDecodeError):
        return False
    if not head.startswith(FREEZE_TAG):
        return False
    kv = dict(w.partition("=")[::2] for w in head[len(FREEZE_TAG) :].split())
    pid = int(kv["pid"]) if kv.get("pid", "").isdigit() else 0
    if pid and kv.get("ticks") and procs.start_ticks(pid) == kv["ticks"]:
        return False  # that release is still at work
    try:
        os.unlink(lk)
    except OSError:
        return False
    return True


def _thaw(frozen: tuple[Path, int] | None) -> None:
    """Drop the index.lock taken by _freeze, if it is still ours (removal took the admin
    directory, and with it the lock, when the release went through)."""
    if frozen is None:
        return
    lk, ino = frozen
    try:
        if os.lstat(lk).st_ino == ino:
            os.unlink(lk)
    except OSError:
        pass


# -- refusals after the inspection ----------------------------------------------------------
def _not_deleted(
    repo: Repo,
    rec: LaneRecord,
    tip: str,
    removed: bool,
    stderr: str,
    kept_modules: str | None = None,
) -> Refusal:
    """The branch's delete failed: it is kept, and a worktree already removed (it was
    clean, or its discard confirmed) is checked out again at the branch. Why, as it is: the
    branch moved after it was inspected, or (it did not) a hook of ours refused the delete
    (its code and its next), or git failed otherwise (branch_delete_failed, git's words).
    The git dirs copied into kept/ before the removal (`kept_modules`) are not in the
    worktree put back (a checkout holds the branch's files only): the refusal names
    where they are (red team 14H-B F7)."""
    key = rec.key
    now = repo.ref_sha(f"refs/heads/{rec.branch}")
    restored = False
    if removed and now is not None:
        res = git.run(["worktree", "add", "-q", rec.path, rec.branch], repo.common_dir, check=False)
        restored = res.ok
        if restored:
            lane.write_marker(repo, rec.path, key)
    if now != tip:
        return _changed(rec, tip, now, restored, kept_modules)
    kept = "the branch was kept" + (
        " and its worktree put back"
        if restored
        else f" (its worktree, removed, could not be put back: `git lane repair {key}` does)"
        if removed
        else ""
    )
    kept += _modules_said(kept_modules)
    details = {
        "lane": key,
        "branch": rec.branch,
        "tip": tip,
        "worktree_restored": restored,
        "stderr": stderr[-4000:],
        "kept_modules": kept_modules,
    }
    again = f"git lane release {key}"
    hook = hook_line(stderr)
    if hook is not None:
        code, why, nxt = hook
        return Refusal.from_dict(  # the hook's code (hook_line took only one in CODES)
            {
                "code": code,
                "message": f"a git-lane hook refused the delete of lane {key}'s branch "
                f"{rec.branch} (it did not move: {tip[:12]}); {kept}: {why}",
                "next": [nxt or "git lane doctor", again],
                "alternatives": [],
                "details": {**details, "hook": True},
            }
        )
    # git's first line says what (a lock that exists); what follows is its advice
    said = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "no output")
    return Refusal(
        "branch_delete_failed",
        f"git could not delete lane {key}'s branch {rec.branch} (it did not move: "
        f"{tip[:12]}); {kept}: {said[:300]}",
        next=["git lane reconcile", again],
        alternatives=["git lane doctor"],
        details=details,
    )


def _modules_said(kept_modules: str | None) -> str:
    if kept_modules is None:
        return ""
    return (
        f"; the git dirs of its submodules and nested repositories, taken before the "
        f"removal, are in {git.shown(kept_modules)} (not in the worktree put back)"
    )


def _changed(
    rec: LaneRecord, tip: str, now: str | None, restored: bool, kept_modules: str | None = None
) -> Refusal:
    """The branch moved after it was inspected (or went): it is kept."""
    return Refusal(
        "lane_changed_during_release",
        f"lane {rec.key}'s branch moved from {tip[:12]} to {str(now)[:12]} while it was being released; "
        "the branch was kept"
        + (" and its worktree put back" if restored else "")
        + _modules_said(kept_modules),
        next=[f"git lane status {rec.key}", f"git lane release {rec.key}"],
        details={
            "lane": rec.key,
            "tip_inspected": tip,
            "tip_now": now,
            "worktree_restored": restored,
            "kept_modules": kept_modules,
        },
    )


def _remove_failed(key: str, path: str, stderr: str) -> Refusal:
    return Refusal(
        "worktree_remove_failed",
        f"git could not remove the worktree of lane {key}: {stderr.strip()[:300]}",
        next=[git.owner_status(path), f"git lane release {key} --confirm {CONFIRM}"],
        details={"lane": key, "path": path, "stderr": stderr},
    )


def _remove_clean_worktree(repo: Repo, key: str, path: str) -> tuple[str | None, list[str]]:
    """Remove a lane worktree with nothing to lose. The lock a refused release put on it
    (while it was dirty) no longer has a reason and goes with the admin dir; anyone
    else's lock is respected. Through directory fds, as a confirmed release: `git worktree
    remove LANE` removed by path too, while a process of the lane may still run. What git
    refused stays refused: a worktree holding a populated submodule (its git dir, with
    the submodule's commits, is in the admin dir or the submodule's own `.git`). Any
    other git dir in it (one `git status` never shows: a `.git` moved into a tracked
    directory) is kept first, as a confirmed release keeps it (keep_modules: a copy loses
    nothing); what keep_modules returns."""
    reason = lock_reason(path)
    if reason is not None and not lane.own_lock(reason):
        raise Refusal(
            "worktree_locked",
            f"the worktree of lane {key} is locked ({reason or 'no reason given'}); it was left as it is",
            next=[f"git worktree unlock {git.q(path)}", f"git lane release {key}"],
            details={"lane": key, "path": path, "reason": reason},
        )
    admin = _pinned_admin(repo, key, path)
    if _holds_submodules(path, admin):
        raise _remove_failed(
            key, path, "working trees containing submodules cannot be moved or removed"
        )
    kept = keep_modules(repo, key, path, again=_again(key, False))
    _remove_by_fds(key, path, admin, confirmed=False)
    return kept


def _holds_submodules(path: str, admin: str) -> bool:
    """git's own test before `worktree remove` (validate_no_submodules): `<admin>/modules`
    is a directory, or a gitlink of the lane's index is populated (its `.git` there).
    True when git cannot tell."""
    if os.path.isdir(os.path.join(admin, "modules")):
        return True
    listed = git.run(["ls-files", "-s", "-z"], path, check=False)
    if not listed.ok:
        return True
    for entry in listed.z():
        meta, _, name = entry.partition("\t")
        if meta.startswith("160000 ") and os.path.lexists(os.path.join(path, name, ".git")):
            return True
    return False
