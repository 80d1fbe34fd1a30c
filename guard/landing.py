"""The landing transaction: what a land records before main may move, so that a land that
dies part way is finished or rolled back by `reconcile` (or by the next land).

Stages, in order: prepared (durable before main moves) -> main_moved -> hub_updated ->
epoch_bumped; every step after main moved is idempotent, so recovery reruns what is left.
Right after main moved, the tip is kept as a landed ref (guard/landed.py), on every run
of `finish`: it is a compare-and-swap create, and a rerun finds it in place."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from guard import git, landed, lock
from guard.errors import Refusal
from guard.repo import Repo
from guard.store import Epoch, FileLock, atomic_write_json, now_iso

STAGES = ("prepared", "main_moved", "hub_updated", "epoch_bumped")
SCHEMA = 1


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
        }
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for name, ok in types.items():
            if name in kw and (not isinstance(kw[name], ok) or (isinstance(kw[name], bool) and bool not in ok)):
                raise ValueError(f"landing record: {name} has a bad value {kw[name]!r}")
        if kw.get("stage", "prepared") not in STAGES:
            raise ValueError(f"landing record: unknown stage {kw.get('stage')!r}")
        if not all(isinstance(p, str) for p in kw.get("paths", [])):
            raise ValueError("landing record: paths must be strings")
        try:
            return cls(**kw)
        except TypeError as exc:  # a required field is missing
            raise ValueError(f"landing record: {exc}") from None


def crash_point(name: str) -> None:
    # The crash tests SIGKILL a real land at each stage through this variable.
    if os.environ.get("GITLANE_TEST_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def stage(repo: Repo, txn: Landing, to: str) -> Landing:
    txn = replace(txn, stage=to)
    if to == "prepared":
        atomic_write_json(repo.store.landing_path, txn.to_dict())  # durable before main may move
    else:
        # Later stages only save recovery a step it would redo anyway (every step after
        # main moved is idempotent), so a rename without fsync is enough: a process
        # crash keeps it, a power loss at worst rolls the record back a stage.
        tmp = repo.store.landing_path.with_name(f".landing.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(txn.to_dict(), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, repo.store.landing_path)
    crash_point(to)
    return txn


def _before(txn: Landing, name: str) -> bool:
    return STAGES.index(txn.stage) < STAGES.index(name)


def finish(repo: Repo, txn: Landing, recovered: bool = False) -> None:
    """Everything after main moved: hub, epoch (G7), log. Idempotent, so recovery can rerun it."""
    if _before(txn, "main_moved"):
        txn = stage(repo, txn, "main_moved")
    # whatever later moves main, gc can no longer delete what this land put there
    landed.keep(repo, txn.epoch_after, txn.tip, txn.lane)
    if _before(txn, "hub_updated"):
        update_hub(repo, txn)
        txn = stage(repo, txn, "hub_updated")
    if _before(txn, "epoch_bumped"):
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
    repo.store.event(
        "land",
        lane=txn.lane,
        code="landed",
        main_before=txn.main_before,
        main_after=txn.tip,
        epoch=txn.epoch_after,
        paths=txn.paths,
        truncated=txn.truncated,
        gate=txn.gate,
        gate_off=txn.gate.get("status") == "off",
        recovered=recovered,
    )
    repo.store.landing_path.unlink(missing_ok=True)


def update_hub(repo: Repo, txn: Landing) -> None:
    state, stderr = carry_hub(txn.hub, txn.main_ref, txn.main_before, txn.tip)
    if state == "failed":
        repo.store.event("warning", lane=txn.lane, code="hub_update_failed", stderr=stderr)


def carry_hub(hub: str | None, main_ref: str, old: str, new: str) -> tuple[str, str]:
    """Carry the hub's index and worktree from `old` to `new` (main just moved), keeping
    its own unrelated edits (a two-tree read-tree merge, as checkout does). Returns
    ("updated" | "not_hub" | "failed", git's stderr)."""
    if not hub or not os.path.isdir(hub):
        return "not_hub", ""
    # still the hub (main checked out there)? Its HEAD file says, without a git call
    gd = git.worktree_git_dir(hub)
    try:
        head = (gd / "HEAD").read_text().strip() if gd is not None else ""
    except OSError:
        head = ""
    if head != f"ref: {main_ref}":
        return "not_hub", ""
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
        if owner is not None and lock.owner_alive(owner):
            return [{"action": "landing_left", "reason": "its owner is alive"}]
        held = lock.adopt(fl, owner.lane if owner is not None else "")
        out = recover_locked(repo, held)
        lock.owner_path(repo).unlink(missing_ok=True)  # the dead land's record, or ours
        return out
    finally:
        fl.release()


def recover_locked(repo: Repo, held: lock.Held) -> list[dict[str, Any]]:
    """Finish or roll back the recorded land, holding the lock (`held`)."""
    raw = repo.store.read_json(repo.store.landing_path)
    try:
        txn = Landing.from_dict(raw) if raw is not None else None
    except ValueError as exc:
        repo.store.event("warning", code="state_corrupt", path=str(repo.store.landing_path), error=str(exc))
        txn = None
    if txn is None:
        repo.store.landing_path.unlink(missing_ok=True)
        return [{"action": "landing_discarded", "reason": "unreadable landing record"}]
    now = repo.ref_sha(txn.main_ref)
    if now == txn.tip:
        # the record names the dead land's move while its steps are rerun (the hooks
        # tell land's own ref writes by it), then names no move again
        lock.name_move(repo, held, main_before=txn.main_before, tip=txn.tip)
        finish(repo, txn, recovered=True)
        lock.name_move(repo, held, main_before="", tip="")
        return [{"action": "landing_completed", "lane": txn.lane, "main_after": txn.tip}]
    if now == txn.main_before:
        repo.store.landing_path.unlink(missing_ok=True)
        repo.store.event("landing_rolled_back", lane=txn.lane, code="rolled_back", main=now)
        return [{"action": "landing_rolled_back", "lane": txn.lane}]
    raise Refusal(
        "reconcile_ambiguous",
        f"a land of lane {txn.lane} died, and {txn.main_ref} is now {str(now)[:12]}: neither the "
        f"recorded old value {txn.main_before[:12]} nor the tip {txn.tip[:12]}; nothing was changed",
        next=[
            f"git log --oneline -5 {txn.main_ref}",
            f"git reflog {txn.main_ref}",
            f"cat {git.q(repo.store.landing_path)}  (then remove it once main is as it should be)",
        ],
        details={"landing": txn.to_dict(), "main": now},
    )


def keep_last(repo: Repo) -> list[dict[str, Any]]:
    """reconcile: the last land in epoch.json gets its landed ref when it has none (it
    landed before landed refs existed, or its ref could not be written). Written under
    the lock, with the lock record's tip the value written, as land writes it."""
    ep = repo.store.read_epoch()
    if not ep.epoch or not ep.main_after:
        return []
    newest = landed.newest_ref(repo)
    if newest is not None and newest.epoch >= ep.epoch:
        return []
    if not git.has_commit(repo.common_dir, ep.main_after):
        return [{"action": "landed_ref_missing", "epoch": ep.epoch, "reason": f"commit {ep.main_after} is gone"}]
    try:
        held = lock.acquire(repo, ep.lane or "", "", ep.main_after)
    except Refusal as busy:
        if busy.code != "lock_busy":
            raise
        return [{"action": "landed_ref_left", "epoch": ep.epoch, "reason": "the integration lock is held"}]
    try:
        done = landed.keep(repo, ep.epoch, ep.main_after, ep.lane)
    finally:
        lock.release(repo, held)
    if done != "created":
        return []
    return [{"action": "landed_ref_written", "ref": landed.ref_name(ep.epoch), "sha": ep.main_after}]


def repair_epoch(repo: Repo) -> None:
    """Rebuild epoch.json from the newest land event, or from the newest landed ref when
    that names a later land (the event log is rotated; the refs are never pruned)."""
    last: dict[str, Any] | None = None
    for ev in repo.store.events():
        if (
            ev.get("kind") == "land"
            and isinstance(ev.get("epoch"), int)
            and (last is None or ev["epoch"] >= last["epoch"])
        ):
            last = ev
    ref = landed.newest_ref(repo)
    if ref is not None and (last is None or ref.epoch > last["epoch"]):
        repo.store.write_epoch(Epoch(epoch=ref.epoch, main_after=ref.sha, at=now_iso()))
        return
    if last is None:
        repo.store.write_epoch(Epoch())
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
