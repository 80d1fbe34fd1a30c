"""The landing transaction: what a land records before main may move, so that a land that
dies part way is finished or rolled back by `reconcile` (or by the next land).

Stages, in order: prepared (durable before main moves) -> main_moved -> hub_updated ->
epoch_bumped; every step after main moved is idempotent, so recovery reruns what is left.
Right after main moved, the tip is kept as a landed ref (guard/landed.py), on every run
of `finish`: it is a compare-and-swap create, and a rerun finds it in place."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from pathlib import Path

from guard import git, landed, lock, policy
from guard.crashpoint import crash_point as crash_point  # landing.crash_point: land, queue
from guard.errors import GitError, Refusal
from guard.repo import Repo
from guard.store import EPOCH_MAX, Epoch, FileLock, atomic_write_json, now_iso, set_aside

STAGES = ("prepared", "main_moved", "hub_updated", "epoch_bumped")
SCHEMA = 1
PATHS_CAP = 500  # as land's: a recovered land records its changed paths the same way
SHA_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
LAND_MESSAGE = "git-lane: land "  # update-ref -m of every land: main's reflog names it


def _main_ref_ok(ref: str) -> bool:
    name = ref.removeprefix("refs/heads/")
    return (
        ref.startswith("refs/heads/")
        and bool(name)
        and not name.startswith("-")
        and not any(c.isspace() or c in "~^:?*[\\" for c in name)
        and ".." not in name
    )


@dataclass(frozen=True)
class Landing:
    token: str
    pid: int
    lane: str
    main_ref: str
    main_before: str
    tip: str
    hub: str | None
    paths: list[str]
    truncated: bool
    epoch_after: int
    gate: dict[str, Any]
    stage: str = "prepared"
    at: str = field(default_factory=now_iso)
    schema: int = SCHEMA
    # a batch of the land queue (guard/queue.py): one entry per lane, in stack order, each
    # {lane, branch, path, old_tip, before, tip, epoch, paths, truncated}; main moves from
    # main_before to the last entry's tip (= tip) in one compare-and-swap
    stack: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Landing:
        """Raises ValueError when a field is missing or of the wrong type."""
        types: dict[str, tuple[type, ...]] = {
            "token": (str,),
            "pid": (int,),
            "lane": (str,),
            "main_ref": (str,),
            "main_before": (str,),
            "tip": (str,),
            "hub": (str, type(None)),
            "paths": (list,),
            "truncated": (bool,),
            "epoch_after": (int,),
            "gate": (dict,),
            "stage": (str,),
            "at": (str,),
            "schema": (int,),
            "stack": (list,),
        }
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for name, ok in types.items():
            if name in kw and (
                not isinstance(kw[name], ok) or (isinstance(kw[name], bool) and bool not in ok)
            ):
                raise ValueError(f"landing record: {name} has a bad value {kw[name]!r}")
        if "epoch_after" in kw and not 0 < kw["epoch_after"] <= EPOCH_MAX:
            raise ValueError(f"landing record: epoch_after {kw['epoch_after']} is no land count")
        if kw.get("stage", "prepared") not in STAGES:
            raise ValueError(f"landing record: unknown stage {kw.get('stage')!r}")
        if not all(isinstance(p, str) for p in kw.get("paths", [])):
            raise ValueError("landing record: paths must be strings")
        # recovery hands these to git (read-tree, update-ref): an option or a stray
        # ref name in their place would be obeyed
        for name in ("main_before", "tip"):
            if name in kw and not SHA_RE.fullmatch(kw[name]):
                raise ValueError(f"landing record: {name} is not a commit id")
        if "main_ref" in kw and not _main_ref_ok(kw["main_ref"]):
            raise ValueError("landing record: main_ref is not a branch ref")
        for e in kw.get("stack", []):
            _check_entry(e)
        try:
            return cls(**kw)
        except TypeError as exc:  # a required field is missing
            raise ValueError(f"landing record: {exc}") from None


def _check_entry(e: Any) -> None:
    """A batch entry is handed to git (update-ref, reset) on recovery: every field checked."""
    if not isinstance(e, dict):
        raise ValueError("landing record: a stack entry is not an object")
    for name in ("old_tip", "before", "tip"):
        if not isinstance(e.get(name), str) or not SHA_RE.fullmatch(e[name]):
            raise ValueError(f"landing record: stack {name} is not a commit id")
    if not isinstance(e.get("lane"), str) or not policy.valid_key(e["lane"]):
        raise ValueError("landing record: stack lane is not a lane key")
    if e.get("branch") != f"lane/{e['lane']}":
        raise ValueError("landing record: stack branch is not lane/<key>")
    if not isinstance(e.get("path"), str) or not os.path.isabs(e["path"]) or "\0" in e["path"]:
        raise ValueError("landing record: stack path is not an absolute path")
    if (
        not isinstance(e.get("epoch"), int)
        or isinstance(e.get("epoch"), bool)
        or not 0 < e["epoch"] <= EPOCH_MAX
    ):
        raise ValueError("landing record: stack epoch is not a land count")
    paths = e.get("paths")
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ValueError("landing record: stack paths must be strings")
    if not isinstance(e.get("truncated"), bool):
        raise ValueError("landing record: stack truncated is not a bool")


def stage(repo: Repo, txn: Landing, to: str) -> Landing:
    txn = replace(txn, stage=to)
    if to == "prepared":
        atomic_write_json(repo.store.landing_path, txn.to_dict())  # durable before main may move
    else:
        # Later stages only save recovery a step it would redo anyway (every step after
        # main moved is idempotent), so a rename without fsync is enough: a process
        # crash keeps it, a power loss at worst rolls the record back a stage.
        # A disk too full to take the record leaves it a stage behind, which recovery
        # redoes: the land goes on (main has moved), no half-written temp file stays.
        tmp = repo.store.landing_path.with_name(f".landing.json.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(txn.to_dict(), indent=2, sort_keys=True) + "\n")
            os.replace(tmp, repo.store.landing_path)
        except OSError:
            tmp.unlink(missing_ok=True)
    crash_point(to)
    return txn


def _before(txn: Landing, name: str) -> bool:
    return STAGES.index(txn.stage) < STAGES.index(name)


Diff = tuple[Sequence[str], Collection[str]]  # main_before..tip: (changed, added)


def finish(
    repo: Repo,
    txn: Landing,
    recovered: bool = False,
    held: lock.Held | None = None,
    diff: Diff | None = None,
) -> None:
    """Everything after main moved: hub, epoch (G7), log. Idempotent, so recovery can rerun it.
    A batch (`txn.stack`, with the lock `held`) also gets each lane's landed ref and
    branch at its stacked tip, each epoch and one land event per lane."""
    if _before(txn, "main_moved"):
        txn = stage(repo, txn, "main_moved")
    # whatever later moves main, gc can no longer delete what this land put there
    landed.keep(repo, txn.epoch_after, txn.tip, txn.lane)
    if txn.stack:
        _finish_lanes(repo, txn, held, recovered)
    if _before(txn, "hub_updated"):
        update_hub(repo, txn, diff)
        txn = stage(repo, txn, "hub_updated")
    if _before(txn, "epoch_bumped"):
        for e in txn.stack[:-1]:  # a batch: every lane's epoch in turn, the last one below
            if repo.store.read_epoch().epoch < e["epoch"]:
                repo.store.write_epoch(_epoch_of(e))
        if repo.store.read_epoch().epoch < txn.epoch_after:
            repo.store.write_epoch(
                Epoch(
                    epoch=txn.epoch_after,
                    lane=txn.lane,
                    main_before=txn.main_before,
                    main_after=txn.tip,
                    paths=txn.paths,
                    truncated=txn.truncated,
                    at=now_iso(),
                )
            )
        txn = stage(repo, txn, "epoch_bumped")
    # rerun by recovery, a land killed after its event and before the unlink below is
    # not logged again: one land event per epoch, whenever the kill came
    logged = _logged_lands(repo) if recovered else set()
    for e in txn.stack[:-1]:
        if (e["epoch"], e["tip"]) in logged:
            continue
        repo.store.event(
            "land",
            lane=e["lane"],
            code="landed",
            main_before=e["before"],
            main_after=e["tip"],
            epoch=e["epoch"],
            paths=e["paths"],
            truncated=e["truncated"],
            gate=batch_gate(txn.gate, e["tip"], txn.tip),
            gate_off=txn.gate.get("status") == "off",
            recovered=recovered,
            batch=[x["lane"] for x in txn.stack],
        )
    last = txn.stack[-1] if txn.stack else None
    if (txn.epoch_after, txn.tip) in logged:
        repo.store.landing_path.unlink(missing_ok=True)
        return
    repo.store.event(
        "land",
        lane=txn.lane,
        code="landed",
        **({"batch": [x["lane"] for x in txn.stack]} if txn.stack else {}),
        main_before=last["before"] if last else txn.main_before,
        main_after=txn.tip,
        epoch=txn.epoch_after,
        paths=last["paths"] if last else txn.paths,
        truncated=last["truncated"] if last else txn.truncated,
        gate=batch_gate(txn.gate, txn.tip, txn.tip) if last else txn.gate,
        gate_off=txn.gate.get("status") == "off",
        recovered=recovered,
    )
    crash_point("land_logged")  # the event written, landing.json not yet gone
    repo.store.landing_path.unlink(missing_ok=True)


def _logged_lands(repo: Repo) -> set[tuple[object, object]]:
    """(epoch, main_after) of every land event the log holds (unreadable lines skipped)."""
    return {
        (ev.get("epoch"), ev.get("main_after"))
        for ev in repo.store.events()
        if ev.get("kind") == "land"
    }


def batch_gate(gate: Mapping[str, object], own: str, top: str) -> dict[str, object]:
    """A batch's gate ran once, at the stack's top (`at`): a lane below it lands at its own
    stacked tip, which no gate run judged (`own_tip_gated: false`). Without --batch, the
    queue gates each lane's own tip."""
    if gate.get("status") == "off":
        return dict(gate)
    return {**gate, "at": top, "own_tip_gated": own == top}


def _epoch_of(e: dict[str, Any]) -> Epoch:
    return Epoch(
        epoch=e["epoch"],
        lane=e["lane"],
        main_before=e["before"],
        main_after=e["tip"],
        paths=e["paths"],
        truncated=e["truncated"],
        at=now_iso(),
    )


BATCH_REFLOG = "rebase (git-lane queue --batch)"  # starts with "rebase": see release._inspect


def _finish_lanes(
    repo: Repo, txn: Landing, held: lock.Held | None, recovered: bool = False
) -> None:
    """A batch after main moved: each lane's landed ref (the hook lets one be created only
    at the tip the lock record names, so the record names each in turn) and each lane's
    branch moved from its own tip to its stacked tip, in its worktree (`reset --keep`:
    index and files follow, nothing uncommitted is dropped). Idempotent: a ref in place
    is left; a lane that moved on meanwhile is left as it is (its commits landed).
    Recovered from landing.json (a plain file: red team 17 hooks F4), a stacked tip that is
    not in the history of the tip main now holds gets no landed ref: it was never landed."""
    for e in txn.stack[:-1]:
        if recovered and not _in_history(repo, e["tip"], txn.tip):
            repo.store.event(
                "warning",
                lane=e["lane"],
                code="landed_ref_unproven",
                epoch=e["epoch"],
                sha=e["tip"],
                reason=f"not in the history of the batch's tip {txn.tip}",
            )
            continue
        if held is not None:
            lock.name_move(repo, held, main_before=e["tip"], tip=e["tip"])
        landed.keep(repo, e["epoch"], e["tip"], e["lane"])
    if held is not None:
        lock.name_move(repo, held, main_before=txn.main_before, tip=txn.tip)
    for e in txn.stack:
        ref = f"refs/heads/{e['branch']}"
        now = repo.ref_sha(ref)
        if now == e["tip"] or e["old_tip"] == e["tip"]:
            continue
        if now != e["old_tip"]:
            repo.store.event(
                "warning", lane=e["lane"], code="batch_lane_moved", tip=now, stacked=e["tip"]
            )
            continue
        if _owner_runs(repo, e["lane"]):
            # its worktree is written by a process of the lane (an exec's CMD): the owner's
            # git writing files there could be led through a link CMD swaps in (red team
            # 16A F2). Its commits landed as the stacked ones; its own sync takes it there.
            repo.store.event(
                "warning", lane=e["lane"], code="batch_lane_not_moved", why="owner_live"
            )
            continue
        if os.path.isdir(e["path"]) and _checked_out(e["path"], ref):
            # logged as the rebase it is (the lane's commits, replayed onto the stack):
            # release and gc then count the tip it replaced as landed, as after a sync
            res = git.run(
                ["reset", "-q", "--keep", e["tip"]],
                e["path"],
                check=False,
                env={"GIT_REFLOG_ACTION": BATCH_REFLOG},
            )
        else:
            res = git.run(
                ["update-ref", "-m", f"{BATCH_REFLOG}: {e['lane']}", ref, e["tip"], e["old_tip"]],
                repo.common_dir,
                check=False,
            )
        if not res.ok:
            repo.store.event(
                "warning",
                lane=e["lane"],
                code="batch_lane_not_moved",
                stderr=res.stderr.strip()[:500],
            )
        crash_point("batch_lane_moved")


def _in_history(repo: Repo, tip: str, of: str) -> bool:
    """Is `tip` the commit `of` or one of its ancestors? False when git cannot tell (a
    commit the store lacks)."""
    try:
        return git.is_ancestor(repo.common_dir, tip, of)
    except GitError:
        return False


def _owner_runs(repo: Repo, key: str) -> bool:
    """Does a live process own the lane, other than this one or one of its ancestors
    (lane.owner_conflict's test)? A record that cannot be read counts as owned."""
    from guard import lane

    rec = repo.store.read_lane(key)
    if rec is None:
        return True
    try:
        lane.owner_conflict(repo, rec, "land")
    except Refusal:
        return True
    return False


def _checked_out(path: str, ref: str) -> bool:
    gd = git.worktree_git_dir(path)
    try:
        return gd is not None and git.read_admin(gd / "HEAD").strip() == f"ref: {ref}"
    except OSError:
        return False


def update_hub(repo: Repo, txn: Landing, diff: Diff | None = None) -> None:
    state, stderr = carry_hub(txn.hub, txn.main_ref, txn.main_before, txn.tip, diff)
    if state == "failed":
        repo.store.event("warning", lane=txn.lane, code="hub_update_failed", stderr=stderr)


def hub_in_the_way(hub: str, changed: Sequence[str], added: Collection[str]) -> list[str]:
    """What the hub holds untracked (in practice: ignored, else G6's status saw it) that
    carrying it to a tip which changes `changed` and adds `added` would overwrite or
    delete: `git read-tree -m -u` (git 2.34+) takes every ignored file as expendable, and
    no option of it says otherwise. At a path the tip adds: a file or link, or a directory
    that holds anything git does not track; at a parent directory the tip needs: a file
    or link. Only those paths are looked at (an lstat each), never the whole worktree."""
    hits: list[str] = []
    for p in sorted(added):
        try:
            st = os.lstat(os.path.join(hub, p))
        except OSError:  # not there (or under a file: a parent, below)
            continue
        if not stat.S_ISDIR(st.st_mode) or _holds_untracked(hub, p):
            hits.append(p)
    changed_set = set(changed)
    parents = {p.rsplit("/", i)[0] for p in changed for i in range(1, p.count("/") + 1)}
    for d in sorted(parents - changed_set):
        full = os.path.join(hub, d)
        if os.path.islink(full) or (os.path.lexists(full) and not os.path.isdir(full)):
            hits.append(d)  # untracked: a tracked one would be among the changed paths
    return list(dict.fromkeys(hits))


def _holds_untracked(hub: str, d: str) -> bool:
    """A directory of the hub at a path the tip adds as a file holds something git does
    not track (ignored files included; an empty directory git just removes). When git
    cannot say: it does (nothing is overwritten on a guess)."""
    res = git.run(
        [
            "--literal-pathspecs",
            "-c",
            "core.fsmonitor=false",
            "ls-files",
            "-z",
            "--others",
            "--directory",
            "--no-empty-directory",
            "--",
            d,
        ],
        hub,
        check=False,
        env={"GIT_OPTIONAL_LOCKS": "0"},
    )
    return not res.ok or bool(res.z())


def hub_blockers(hub: str, old: str, new: str, diff: Diff | None = None) -> list[str]:
    """hub_in_the_way for carrying the hub from `old` to `new`; `diff`, their changed and
    added paths when the caller has them (a land read them under its lock), else one
    diff of the two."""
    changed, added = diff if diff is not None else git.changed_and_added(hub, old, new)
    return hub_in_the_way(hub, changed, added)


def carry_hub(
    hub: str | None, main_ref: str, old: str, new: str, diff: Diff | None = None
) -> tuple[str, str]:
    """Carry the hub's index and worktree from `old` to `new` (main just moved), keeping
    its own unrelated edits (a two-tree read-tree merge, as checkout does); never over an
    untracked (ignored) file or directory of the hub in the way (hub_in_the_way: land
    refused that before main moved, but the hub may have changed since, and recovery
    or restore-main carry it much later). Returns ("updated" | "not_hub" | "failed",
    git's stderr, or what is in the way)."""
    if not hub or not os.path.isdir(hub):
        return "not_hub", ""
    # still the hub (main checked out there)? Its HEAD file says, without a git call
    gd = git.worktree_git_dir(hub)
    try:
        head = git.read_admin(gd / "HEAD").strip() if gd is not None else ""
    except OSError:
        head = ""
    if head != f"ref: {main_ref}":
        return "not_hub", ""
    try:
        blockers = hub_blockers(hub, old, new, diff)
    except GitError as exc:
        return "failed", exc.stderr
    if blockers:
        return "failed", (
            f"git-lane: untracked (ignored) files of the hub are where {new[:12]} tracks "
            f"files, and would be overwritten: {', '.join(map(git.shown, blockers[:10]))}"
        )
    res = git.run(["read-tree", "-m", "-u", old, new], hub, check=False)
    return ("updated", "") if res.ok else ("failed", res.stderr)


def recover(repo: Repo) -> list[dict[str, Any]]:
    """reconcile: finish or roll back a land that died part way (needs the lock free)."""
    if not repo.store.landing_path.exists():
        return []
    fl = FileLock(lock.flock_path(repo))
    if not fl.acquire(timeout=0):
        return [{"action": "landing_left", "reason": "a land is running"}]
    try:
        owner = lock.read_owner(repo)
        if owner is not None and lock.could_be_landing(owner):
            return [{"action": "landing_left", "reason": "its owner is alive"}]
        held = lock.adopt(fl, owner.lane if owner is not None else "")
        out = recover_locked(repo, held)
        lock.owner_path(repo).unlink(missing_ok=True)  # the dead land's record, or ours
        return out
    finally:
        fl.release()


def recover_locked(repo: Repo, held: lock.Held) -> list[dict[str, Any]]:
    """Finish or roll back the land that landing.json records (the integration lock held).

    An unreadable record (bad JSON, wrong types, missing keys, an unknown stage, a
    directory) is never simply dropped: main may have moved for it, and then the hub and
    the epoch still wait for it. What git can tell is used instead: the record's own
    main_before/tip when those are intact, else main's reflog, whose newest entry names a
    land (`git-lane: land KEY`) with its old and new value. main at the tip: the land is
    finished. main at the old value, or last moved by something other than an unfinished
    land: the record is set aside (kept, as landing.json.corrupt-*). When neither the
    record nor a reflog can tell, it is refused and left in place."""
    path = repo.store.landing_path
    raw = repo.store.read_json(path)
    try:
        txn = Landing.from_dict(raw) if raw is not None else None
    except ValueError as exc:
        repo.store.event("warning", code="state_corrupt", path=str(path), error=str(exc))
        txn = None
    if txn is None:
        if not os.path.lexists(path):
            return []
        return _recover_unreadable(repo, raw, held)
    now = repo.ref_sha(txn.main_ref)
    if now == txn.tip:
        # the record names the dead land's move while its steps are rerun (the hooks
        # tell land's own ref writes by it), then names no move again
        lock.name_move(repo, held, main_before=txn.main_before, tip=txn.tip)
        finish(repo, txn, recovered=True, held=held)
        lock.name_move(repo, held, main_before="", tip="")
        done: dict[str, Any] = {
            "action": "landing_completed",
            "lane": txn.lane,
            "main_after": txn.tip,
        }
        if txn.stack:
            done["batch"] = [e["lane"] for e in txn.stack]
        return [done]
    if now == txn.main_before:
        repo.store.landing_path.unlink(missing_ok=True)
        repo.store.event("landing_rolled_back", lane=txn.lane, code="rolled_back", main=now)
        return [{"action": "landing_rolled_back", "lane": txn.lane}]
    raise _ambiguous(
        repo,
        f"a land of lane {txn.lane} died, and {txn.main_ref} is now {str(now)[:12]}: neither the "
        f"recorded old value {txn.main_before[:12]} nor the tip {txn.tip[:12]}; nothing was changed",
        txn.main_ref,
        {"landing": txn.to_dict(), "main": now},
    )


def _main_now(repo: Repo) -> str | None:
    try:
        return repo.ref_sha(repo.main_ref)
    except Refusal:
        return None  # no main: nothing is proven landed by it


def _unproven(epoch: int, tip: str, why: str) -> dict[str, Any]:
    return {"action": "landed_ref_unproven", "epoch": epoch, "sha": tip, "reason": why}


def keep_last(repo: Repo) -> list[dict[str, Any]]:
    """reconcile: the last land in epoch.json gets its landed ref when it has none (it
    landed before landed refs existed, or its ref could not be written), when main holds
    its tip (landed.unprovable: epoch.json is a plain file; a tip main never held was
    never landed). Written under the lock, with the lock record's tip the value written,
    as land writes it."""
    ep = repo.store.read_epoch()
    if not ep.epoch or not ep.main_after:
        return []
    if repo.ref_sha(landed.ref_name(ep.epoch)) is not None:
        return []  # there (one at another commit is doctor's `unvouched landed ref`)
    if not git.has_commit(repo.common_dir, ep.main_after):
        return [
            {
                "action": "landed_ref_missing",
                "epoch": ep.epoch,
                "reason": f"commit {ep.main_after} is gone",
            }
        ]
    have = {r.epoch: r.sha for r in landed.all_landed(repo)}
    why = landed.unprovable(repo, ep.epoch, ep.main_after, have, _main_now(repo))
    why = why or landed.lone_claim(repo, ep.epoch, ep.main_after, have)
    if why is not None:
        return [_unproven(ep.epoch, ep.main_after, why)]
    try:
        held = lock.acquire(repo, ep.lane or "", "", ep.main_after)
    except Refusal as busy:
        if busy.code != "lock_busy":
            raise
        return [
            {
                "action": "landed_ref_left",
                "epoch": ep.epoch,
                "reason": "the integration lock is held",
            }
        ]
    try:
        done = landed.keep(repo, ep.epoch, ep.main_after, ep.lane)
    finally:
        lock.release(repo, held)
    if done != "created":
        return []
    return [
        {"action": "landed_ref_written", "ref": landed.ref_name(ep.epoch), "sha": ep.main_after}
    ]


def keep_vouched(repo: Repo) -> list[dict[str, Any]]:
    """reconcile: every land something vouches for (landed.missing: a land event, the
    landing record, epoch.json) whose landed ref is gone gets it back at its tip: a FIFO
    put at one is moved into kept/ by every command's first step (guard/oversize.py, red
    team 15C F2), and nothing else ever deletes one. Only a tip main holds, in land order
    (landed.unprovable): the vouchers are plain files (red team 17 hooks F4b), so one naming a
    commit main never held is reported (`landed_ref_unproven`), never written. Written as
    keep_last writes the last one: under the lock, the record's tip each value in turn."""
    missing = landed.missing(repo)
    if not missing:
        return []
    have = {r.epoch: r.sha for r in landed.all_landed(repo)}
    main = _main_now(repo)
    out: list[dict[str, Any]] = []
    proven: list[tuple[int, str]] = []
    refs_had = dict(have)  # the landed refs as they are: a lone claim past them all is refused
    for epoch, tip in missing:  # oldest first: each written one bounds the next
        why = landed.unprovable(repo, epoch, tip, have, main)
        why = why or landed.lone_claim(repo, epoch, tip, refs_had)
        if why is not None:
            out.append(_unproven(epoch, tip, why))
            continue
        proven.append((epoch, tip))
        have[epoch] = tip
    if not proven:
        return out
    try:
        held = lock.acquire(repo, "(landed refs)", "", proven[0][1])
    except Refusal as busy:
        if busy.code != "lock_busy":
            raise
        return [*out, {"action": "landed_ref_left", "reason": "the integration lock is held"}]
    try:
        for epoch, tip in proven:
            lock.name_move(repo, held, main_before=tip, tip=tip)
            if landed.keep(repo, epoch, tip, None) == "created":
                out.append(
                    {"action": "landed_ref_written", "ref": landed.ref_name(epoch), "sha": tip}
                )
    finally:
        lock.release(repo, held)
    return out


def _ambiguous(repo: Repo, message: str, main_ref: str, details: dict[str, Any]) -> Refusal:
    """reconcile_ambiguous: the owner looks at main and the hub; once they are as they
    should be, the record is moved aside (kept) and reconcile goes on."""
    hub = repo.hub()
    path = repo.store.landing_path
    return Refusal(
        "reconcile_ambiguous",
        message
        + ". Look at main and the hub; once they are as they should be, move the record aside",
        next=[
            f"git log --oneline -5 {main_ref}",
            *([f"git -C {git.q(hub.path)} status --short"] if hub is not None else []),
            git.mv_aside(path, _aside_name(path)),
            "git lane reconcile",
        ],
        details={**details, "file": str(path)},
    )


def _aside_name(path: Path) -> Path:
    n = 0
    while True:
        cand = path.with_name(f"{path.name}.corrupt-{os.getpid()}" + (f"-{n}" if n else ""))
        if not os.path.lexists(cand):
            return cand
        n += 1


def _set_aside(repo: Repo) -> Path | None:
    """Keep the unreadable record beside, out of the way (a directory or a file)."""
    path = repo.store.landing_path
    aside = set_aside(path)
    if aside is None and os.path.lexists(path):
        aside = _aside_name(path)
        os.replace(path, aside)
    return aside


def _salvage(raw: dict[str, Any] | None) -> tuple[str | None, str | None, str | None, str | None]:
    """main_ref, main_before, tip and lane from an unreadable record, each when intact."""
    d = raw or {}

    def field_(name: str, ok: Any) -> str | None:
        v = d.get(name)
        return v if isinstance(v, str) and ok(v) else None

    return (
        field_("main_ref", _main_ref_ok),
        field_("main_before", SHA_RE.fullmatch),
        field_("tip", SHA_RE.fullmatch),
        field_("lane", policy.valid_key),
    )


def _reflog_land(repo: Repo, main_ref: str, now: str | None) -> tuple[str, str] | bool | None:
    """From main's newest reflog entry: (main_before, lane) when a land moved main to where
    it is now and was never finished (no epoch and no land event for it); None when main
    was last moved otherwise or by a finished land; False when main has no reflog."""
    res = git.run(
        ["log", "-g", "-n1", "--format=%H%x00%gs", main_ref, "--"], repo.common_dir, check=False
    )
    new, sep, subject = res.stdout.rstrip("\n").partition("\0")
    if not res.ok or not sep or now is None:
        return False
    key = subject.removeprefix(LAND_MESSAGE)
    if new != now or not subject.startswith(LAND_MESSAGE) or not policy.valid_key(key):
        return None
    if repo.store.read_epoch().main_after == now or any(
        ev.get("kind") == "land" and ev.get("main_after") == now for ev in repo.store.events()
    ):
        return None
    before = repo.ref_sha(f"{main_ref}@{{1}}")
    return (before, key) if before is not None else False


def _recover_unreadable(
    repo: Repo, raw: dict[str, Any] | None, held: lock.Held
) -> list[dict[str, Any]]:
    ref, before, tip, key = _salvage(raw)
    main_ref = ref or repo.main_ref
    now = repo.ref_sha(main_ref)
    if before is not None and tip is not None:
        moved: tuple[str, str] | bool | None = (before, key or "unknown") if now == tip else None
        if now not in (before, tip):
            raise _ambiguous(
                repo,
                f"a land died leaving an unreadable landing record, and {main_ref} is now "
                f"{str(now)[:12]}: neither its old value {before[:12]} nor its tip {tip[:12]}; nothing was changed",
                main_ref,
                {"main": now, "main_before": before, "tip": tip},
            )
    else:
        moved = _reflog_land(repo, main_ref, now)
        if moved is False:
            raise _ambiguous(
                repo,
                f"a land died leaving an unreadable landing record, and {main_ref} has no reflog to "
                "tell whether it moved for that land; nothing was changed",
                main_ref,
                {"main": now},
            )
    aside = _set_aside(repo)
    if not isinstance(moved, tuple) or now is None:
        repo.store.event("landing_set_aside", code="state_corrupt", main=now, to=str(aside))
        return [
            {"action": "landing_set_aside", "reason": "unreadable landing record", "to": str(aside)}
        ]
    main_before, lane = moved
    d = raw or {}
    changed = git.changed_paths(repo.common_dir, main_before, now)
    ep = repo.store.read_epoch()
    hub = repo.hub()
    txn = Landing(
        token=d["token"] if isinstance(d.get("token"), str) else "",
        pid=d["pid"] if isinstance(d.get("pid"), int) and not isinstance(d.get("pid"), bool) else 0,
        lane=lane,
        main_ref=main_ref,
        main_before=main_before,
        tip=now,
        hub=hub.path if hub is not None else None,
        paths=changed[:PATHS_CAP],
        truncated=len(changed) > PATHS_CAP,
        epoch_after=ep.epoch if ep.main_after == now else ep.epoch + 1,
        gate=d["gate"]
        if isinstance(d.get("gate"), dict)
        else {"command": None, "status": "unknown", "seconds": 0.0},
    )
    lock.name_move(repo, held, main_before=main_before, tip=now)
    finish(repo, txn, recovered=True)
    lock.name_move(repo, held, main_before="", tip="")
    return [
        {
            "action": "landing_completed",
            "lane": lane,
            "main_after": now,
            "record_set_aside": str(aside),
        }
    ]


def repair_epoch(repo: Repo) -> None:
    """Rebuild epoch.json from the newest land event, or from the newest landed ref when
    that names a later land something else vouches for (landed.vouchers: never from a
    ref alone, which git run with the hooks off writes); with no land at all, the
    baseline the audit log (else the ref) recorded, as install kept it."""
    last: dict[str, Any] | None = None
    for ev in repo.store.events():
        if (
            ev.get("kind") == "land"
            and isinstance(ev.get("epoch"), int)
            and (last is None or ev["epoch"] >= last["epoch"])
        ):
            last = ev
    ref = landed.newest_vouched(repo)
    if ref is not None and (last is None or ref.epoch > last["epoch"]):
        repo.store.write_epoch(Epoch(epoch=ref.epoch, main_after=ref.sha, at=now_iso()))
        return
    if last is None:
        base = landed.baseline_logged(repo) or landed.baseline_ref(repo)
        repo.store.write_epoch(Epoch(main_after=base, at=now_iso() if base else None))
        return
    repo.store.write_epoch(
        Epoch(
            epoch=last["epoch"],
            lane=last.get("lane"),
            main_before=last.get("main_before"),
            main_after=last.get("main_after"),
            paths=list(last.get("paths") or []),
            truncated=bool(last.get("truncated")),
            at=last.get("time"),
        )
    )
