"""`git lane land [KEY]`: the only door to main. Reads as the gate table: one function per
gate, named for it, called in order under the integration lock.

    g1_lock       one land at a time (the integration lock)
    g2_clean      the lane worktree is clean
    g3_fresh      main is an ancestor of the tip, re-derived from git under the lock
    g6_hub        the hub's own edits do not meet the paths this land changes
    g9_markers    main..tip adds no conflict block (a `commit --no-verify` skipped the hook)
    g4_exact      what the gate will see is the tip: no change hidden from `git status`
    g4_gate       the gate passes at the exact tip; the tip and worktree are re-checked after
    g5_move_main  main moves by compare-and-swap fast-forward, recorded first (landing.json)
    g7_epoch      hub carried along, epoch bumped, land logged, before the lock is released;
                  a hub git could not carry along is reported, not only logged
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import stat
from dataclasses import dataclass
from collections.abc import Callable
from typing import cast

from guard import (
    dirfd,
    dirwatch,
    gate,
    git,
    include,
    landed,
    landing,
    lane,
    lock,
    objects,
    policy,
    procs,
    recovery,
)
from guard.errors import GitError, Interrupted, Refusal
from guard.hookcheck import _PICKAXE as MARKER_PICKAXE  # one marker pre-filter, hook and land
from guard.hookcheck import AddedLines
from guard.repo import Repo
from guard.store import LaneRecord
from guard.results import GateSummary, HubUpdate, Included, LandResult, SyncResult

PATHS_CAP = 500
PATHSPEC_MAX = 1000
PATHS_IN_NEXT = 20  # more paths than this, and a `next` names them by a git listing instead


@dataclass(frozen=True)
class Target:
    """What is being landed, read once under the lock."""

    key: str
    branch: str
    path: str
    main_before: str
    tip: str | None


@git.in_own_context
def run(
    repo: Repo,
    key: str | None,
    wait: float | None = None,
    output: gate.Output | None = None,
    tick: gate.Tick | None = None,
    waiting: lock.Waiting | None = None,
    sync: bool = False,
) -> LandResult | SyncResult:
    """Land the lane. With `sync`, a stale lane is first rebased onto main under the same
    lock hold (exactly as `git lane sync` would); a rebase that stops on conflicts is
    left as `sync` leaves it and its result (`sync_conflicts`) is returned, the lock
    released."""
    usage = " --sync" if sync else ""
    key = lane.current(repo, key, "land", usage)
    if lane.is_worker() and repo.config["worker_land"] != "allow":
        raise worker_land_refusal(key, usage)
    rec = lane.get(repo, key)
    if rec.status == "orphaned":
        raise lane.missing_worktree_refusal(key, rec.path, "land")
    if rec.status != "active":
        raise lane.not_active_refusal(repo, rec, f"is {rec.status}")
    lane.check_pointers(repo, rec)  # git in the lane would use another repository
    lane.owner_conflict(repo, rec, "land")
    objects.use(repo, rec.path)  # read its commits where they may be (G5 imports them)
    objects.catch_up(repo, rec.key, rec.path, rec.branch)  # so the gate's git reads them
    cfg = repo.config
    command = gate_command(repo)
    landing.crash_point("before_lock")
    held = g1_lock(repo, key, wait, waiting, sync)
    try:
        landing.crash_point("locked")
        if repo.store.landing_path.exists():
            landing.recover_locked(repo, held)
        clean = cfg["gate_worktree"] == "clean"
        live = why_clean_gate(repo, rec.key)  # read under the lock, as late as it can be
        res = _land_locked(
            repo,
            rec.key,
            rec.branch,
            rec.path,
            held,
            command,
            cfg["gate_timeout"],
            clean,
            output,
            tick,
            sync,
            live,
        )
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM while the gate ran (gate.Terminated)
        lock.release(repo, held)  # the gate's group is dead already (gate.run killed it)
        raise interrupted(repo, key, held, exc) from None
    finally:
        lock.release(repo, held)
    if res["code"] != "landed":
        return res
    done = cast(LandResult, res)
    done["made_stale"] = made_stale(repo, key, done["main_before"], done["main_after"])
    done["next"] = [f"git lane sync {k}" for k in done["made_stale"]]
    if cfg["auto_sync"]:  # after the lock's release: other lands go on meanwhile
        from guard import crossrebase

        crossrebase.report(done, crossrebase.after_land(repo, key))
    return done


def why_clean_gate(repo: Repo, key: str) -> str | None:
    """Why this land's gate must not read the lane's own files (None: nothing says so; the
    gate then runs where gate_worktree says).

    A process of the lane that runs while the gate does can change a tracked file's bytes
    and put them back with no lstat field moving (a write into a page a MAP_SHARED mapping
    keeps dirty, red team 16B F1), so no compare before and after an in-lane gate can
    tell. A land through exec's land socket knows it is one from the supervisor's own code
    (gate.FOR_EXEC, set by the land child's boot, never by anything CMD sends); any other
    land asks the lane's record for a live owner (an exec, whether or not this land
    descends from it).

    And a lane any `git lane exec` ever ran in (the record's exec_seen, set before CMD
    started, or before `shellenv` printed a binding, and never unset) holds whatever its processes left in files the tip ignores
    (a `__pycache__/*.pyc` whose header names the tracked source's mtime and size, which
    Python imports instead of it; `.env`; build output), none of which the content check
    compares, and may have left a daemon running that no record names: its gate runs on
    the tip alone. A record that cannot say (older than the field: None) counts as one
    an exec ran in; one that cannot be read rules nothing out."""
    if gate.FOR_EXEC:
        return (
            f"the land runs for a live `git lane exec` of lane {key} (its land socket), "
            "whose processes may write the lane while the gate runs"
        )
    rec = repo.store.read_lane(key)
    if rec is None:
        return f"lane {key}'s record cannot be read, so no live process of it is ruled out"
    if rec.owner_pid and procs.alive(rec.owner_pid, rec.owner_start):
        return (
            f"lane {key}'s owner process {rec.owner_pid} is alive and may write the lane "
            "while the gate runs"
        )
    if rec.exec_seen is not False:
        ran = "ran" if rec.exec_seen else "may have run (its record predates exec_seen)"
        return (
            f"`git lane exec` (or a `git lane shellenv` shell) {ran} in lane {key}: what its "
            "processes left in files the tip ignores, or still run, the gate must not read"
        )
    return None


def gate_command(repo: Repo) -> str | None:
    """The gate to run (None: `gate = "off"`); refused when the gate is on but unset."""
    cfg = repo.config
    command: str | None = cfg.get("gate_command") if cfg["gate"] == "on" else None
    if cfg["gate"] == "on" and not command:
        raise Refusal(
            "gate_command_unset",
            "the gate is on but no gate_command is set",
            next=['git lane config set gate_command "pytest -q"' + lane.OWNER_NOTE],
            alternatives=["git lane config set gate off  # land without a check"],
        )
    return command


def worker_land_refusal(key: str, usage: str = "") -> Refusal:
    """A worker's land while worker_land is not "allow" (its own, or one it asks its exec
    supervisor for): `next` is the command the owner runs."""
    return Refusal(
        "role_forbidden",
        'workers may not land (worker_land = "deny")',
        next=[f"git lane land {key}{usage}" + lane.OWNER_NOTE],
        alternatives=["git lane config set worker_land allow" + lane.OWNER_NOTE],
        details={"lane": key, "owner_command": f"git lane land {key}{usage}"},
    )


def made_stale(repo: Repo, key: str, before: str, after: str) -> list[str]:
    """The other active lanes this land made stale: main_before was an ancestor of their
    tip (they were fresh) and the new main is not. The lanes whose commits are all in the
    shared store are asked in one git call (a land with 30 lanes beside it made 60
    `merge-base` calls); a lane with a store of its own is asked alone, reading that store
    only (guard/objects.py: one lane's store never serves another lane's reads)."""
    tips = git.plain_refs(repo.common_dir, "refs/heads/lane/")
    asked: dict[str, LaneRecord] = {}
    out: list[str] = []
    for rec in repo.store.lanes():
        ref = f"refs/heads/{rec.branch}"
        tip = tips.get(ref)
        if rec.key == key or rec.status != "active" or tip is None:
            continue
        if (
            policy.valid_key(rec.key)
            and rec.branch == lane.branch_of(rec.key)
            and objects.lane_store(repo.common_dir, rec.path) is None
        ):
            asked[ref] = rec  # lane/KEY: a-z, 0-9 and -, so the ref is its own pattern
            continue
        with objects.reading(repo, rec.path):  # that lane's store, not the landed one's
            if _stale_now(repo.common_dir, before, after, tip):
                out.append(rec.key)
    if asked:
        # a lane committing meanwhile is answered for at its new tip: for a notice, better
        res = git.run(
            [
                "for-each-ref",
                f"--contains={before}",
                f"--no-contains={after}",
                "--format=%(refname)",
                *sorted(asked),
            ],
            repo.common_dir,
            check=False,
        )
        if res.ok:
            out += [asked[ref].key for ref in res.lines() if ref in asked]
        else:  # git could not answer for all at once (an object missing?): one by one
            out += [
                rec.key
                for ref, rec in asked.items()
                if _stale_now(repo.common_dir, before, after, tips[ref])
            ]
    return sorted(out)


def _stale_now(common: git.Where, before: str, after: str, tip: str) -> bool:
    return git.is_ancestor(common, before, tip) and not git.is_ancestor(common, after, tip)


def interrupted(repo: Repo, key: str, held: lock.Held, exc: KeyboardInterrupt) -> Interrupted:
    """What an interrupted land leaves, said from git (the lock is released already):
    main where it was (the usual case: the gate was running), main at the tip (it landed
    just before the signal), or a staged landing that reconcile finishes or rolls back."""
    signum = int(getattr(exc, "signum", signal.SIGINT))
    main = repo.ref_sha(repo.main_ref) or ""
    if repo.store.landing_path.exists():
        state = "part_way"
        message = (
            f"the land of {key} stopped part way with main at {main[:12]}; the integration lock "
            "is released, and git lane reconcile finishes or rolls it back"
        )
        nxt = ["git lane reconcile", f"git lane status {key}"]
    elif held.record.tip and main == held.record.tip:
        state = "landed"
        message = f"lane {key} had landed: main is at {main[:12]}; the integration lock is released"
        nxt = [f"git lane status {key}"]
    else:
        state = "unchanged"
        message = f"main unchanged at {main[:12]}; the integration lock is released"
        nxt = [f"git lane land {key}"]
    name = signal.Signals(signum).name
    repo.store.event(
        "land_interrupted",
        lane=key,
        code="land_interrupted",
        signal=name,
        main=main,
        main_state=state,
    )
    return Interrupted(
        "land_interrupted",
        message,
        signum,
        next=nxt,
        details={"lane": key, "signal": name, "main": main, "main_state": state},
    )


def _land_locked(
    repo: Repo,
    key: str,
    branch: str,
    path: str,
    held: lock.Held,
    command: str | None,
    timeout: int,
    clean: bool,
    output: gate.Output | None,
    tick: gate.Tick | None,
    sync: bool = False,
    live: str | None = None,
) -> LandResult | SyncResult:
    """`live`: why the gate must not read the lane's files (why_clean_gate: a process of
    the lane may run meanwhile, or an exec ran in it): the gate then runs in a clean
    worktree of the tip whatever gate_worktree says."""
    main_before, tip = _main_and_tip(repo, branch)
    t = Target(key, branch, path, main_before, tip)
    if tip is not None and tip != main_before:
        # G5's import first: every fact below is read from the shared store alone
        g5_objects(repo, t, tip)
    with git.shared_store_only():
        return _decide_and_land(repo, t, held, command, timeout, clean, output, tick, sync, live)


def _decide_and_land(
    repo: Repo,
    t: Target,
    held: lock.Held,
    command: str | None,
    timeout: int,
    clean: bool,
    output: gate.Output | None,
    tick: gate.Tick | None,
    sync: bool,
    live: str | None = None,
) -> LandResult | SyncResult:
    """_land_locked once the tip's objects are in the shared store, verified (G5's import):
    ancestry (G3, G5's main-as-landed), what lands (G6's paths, G9's markers, the gate in
    a clean worktree) and the move are read from that store alone (git.shared_store_only:
    no lane's store, no commit-graph), so nothing a lane wrote into its own store can make
    a stale lane look fresh; only the lane's own worktree facts (G2, G4) read its store."""
    key, branch, path, main_before, tip = t.key, t.branch, t.path, t.main_before, t.tip
    configured = clean
    clean = clean or live is not None
    in_lane = command is not None and not clean
    g5_main_as_landed(repo, main_before)
    wts = repo.worktrees()
    _check_worktree(repo, t, git.by_path(wts).get(os.path.realpath(path)))
    _check_branch(repo, t)
    # clean gate worktrees a killed land left behind (by the records land makes of them:
    # never one a lane's admin dir, or a gate's `gitdir`, names, nor an unrecorded one)
    gate.sweep(repo.common_dir)
    hub = repo.hub(wts)

    def main_side() -> tuple[str | None, list[str], set[str], HubFacts, list[str]]:
        # one merge-base answers two questions: it is the tip when the lane has nothing
        # main lacks, and main itself exactly when main is an ancestor of the tip
        base = tip
        if tip is not None and tip != main_before:
            base = git.merge_base(repo.common_dir, main_before, tip) or ""
        if tip is None or base != main_before:
            return base, [], set(), ([], []), []
        (changed, added), markers = git.both(
            lambda: git.changed_and_added(repo.common_dir, main_before, tip),
            lambda: marker_hits(path, main_before, tip, str(repo.common_dir)),
        )
        if any(git.unsafe_entry_name(p) for p in changed):  # no git is given them (G3 tip)
            return base, changed, added, ([], []), markers
        facts = hub_facts(hub.path, changed, added) if hub is not None else ([], [])
        return base, changed, added, facts, markers

    def lane_side() -> tuple[list[str], git.Hidden, git.Content | GitError | OSError]:
        with git.shared_store_only(False):  # its staged objects may be in its store only
            if tip is None:
                return git.dirty_paths(path), git.Hidden(), git.Content([])
            g4_trusted_config(t, git.risky_config(path))
            if not in_lane:
                return (*git.dirty_and_hidden(path, tip), git.Content([]))
            # an in-lane gate reads the worktree: its bytes against the tip's, by content
            (d, h), differs = git.both(lambda: git.dirty_and_hidden(path, tip), content)
            return d, h, differs

    def content() -> git.Content | GitError | OSError:
        # a git that fails here (a tip G3 refuses by its names, say), or a temp dir that
        # cannot be made, is refused in order, at G4 (g4_content), after the gates before it
        try:
            return git.content_differs(path, tip or "", repo.state_dir, repo.common_dir)
        except (GitError, OSError) as e:
            return e

    # The lane's status (G2) is the slow part in a big repository: the facts for G3, G6,
    # G9 and G4's view of the tip are read beside it. Refusals are still decided in order.
    (dirty, hidden, differs), (base, changed, added, hub_hits, markers) = git.both(
        lane_side, main_side
    )
    g2_clean(t, dirty)
    if sync and tip is not None and base not in (main_before, tip):
        with git.shared_store_only(False):  # the lane's rebase, as `git lane sync` runs it
            synced = g3_sync(repo, t)
        if synced["state"] != "fresh":
            return synced  # stopped on conflicts, left exactly as `git lane sync` leaves it
        # everything is read again at the rebased tip, under the same lock hold
        return _land_locked(
            repo, key, branch, path, held, command, timeout, configured, output, tick,
            sync=False, live=live,
        )  # fmt: skip
    g3_fresh(t, base)
    assert tip is not None
    g3_tip_names(t, changed)
    g6_hub(repo, hub, hub_hits, key)
    g9_markers(t, markers)
    g4_exact(repo, t, hidden, gate_in_lane=in_lane)
    why_clean = g4_content(t, differs)
    if why_clean and command is not None:
        # the lane's bytes cannot vouch for the tip's (red team 16D): the gate runs on the
        # tip itself, in a clean worktree
        clean, in_lane, live = True, False, why_clean
    summary: GateSummary = {"command": command, "status": "off", "seconds": 0.0}
    if command is not None:
        where: dict[str, str] = {"worktree": "clean" if clean else "lane"}
        if live is not None:
            where["why"] = live
        elif configured:
            where["why"] = "gate_worktree = clean"
        try:
            summary = g4_gate(repo, t, command, timeout, clean, changed, added, output, tick)
        except Refusal as r:
            g = r.details.get("gate")
            if isinstance(g, dict):  # a gate that failed says where it ran, and why there
                g.update(where)
                if clean and r.code in ("gate_failed", "gate_timeout"):
                    # a gate that passes in the lane and fails here read what the lane
                    # holds beside the tip: say so, or the owner chases a phantom
                    r.message += (
                        f" (it ran in a clean worktree of the tip, not in the lane: "
                        f"{where.get('why', 'gate_worktree = clean')}; files the lane "
                        f"holds beside the tip, such as those it ignores, were not there: "
                        f"`git -C {git.q(t.path)} status --ignored` lists them)"
                    )
            raise
        summary["worktree"] = where["worktree"]
        if "why" in where:
            summary["why"] = where["why"]
    # Only now, with the gate passed and the tip re-checked, does the lock record name the
    # move the reference-transaction hook may let through: no git run earlier under this
    # land (nor anything the gate started) could have made it.
    lock.update(repo, held, main_before=main_before, tip=tip)
    if command is not None:
        hub = repo.hub()  # it may have been switched while the gate ran
    txn = landing.Landing(
        token=held.token,
        pid=os.getpid(),
        lane=key,
        main_ref=repo.main_ref,
        main_before=main_before,
        tip=tip,
        hub=hub.path if hub is not None else None,
        paths=changed[:PATHS_CAP],
        truncated=len(changed) > PATHS_CAP,
        epoch_after=landed.next_epoch(repo),  # past every landed ref, too
        gate=dict(summary),
    )
    txn = landing.stage(repo, txn, "prepared")
    forged = landed.clear_forgeries(repo, key)  # so the landed ref is written, not through one
    g5_move_main(repo, t, tip, txn.epoch_after)
    hub_update = g7_epoch(repo, txn, (changed, added))
    warnings = list(repo.config.warnings)  # a project file's ignored keys, say
    warnings += included_warnings(summary.get("included"))
    if forged:
        warnings.append(
            f"removed {len(forged)} symbolic ref(s) someone put under refs/git-lane/ "
            f"({', '.join(forged[:3])}): git-lane never makes one; see `git lane log`"
        )
    if hub_update is not None and not hub_update["updated"]:
        why = (hub_update.get("stderr") or "").strip().splitlines()[:1]
        warnings.append(
            f"main moved, but git could not bring the hub {hub_update['path']} along"
            f"{' (' + why[0] + ')' if why else ''}; once that is out of the way: "
            + " && ".join(hub_update["next"])
        )
    return {
        "ok": True,
        "code": "landed",
        "lane": key,
        "main_before": main_before,
        "main_after": tip,
        "epoch": repo.store.read_epoch().epoch,
        "paths": changed[:PATHS_CAP],
        "gate": summary,
        "hub": hub_update,
        "warnings": warnings,
    }


# -- the gates, in order ------------------------------------------------------------------
def g1_lock(
    repo: Repo,
    key: str,
    wait: float | None,
    waiting: lock.Waiting | None = None,
    sync: bool = False,
) -> lock.Held:
    """G1: one land at a time. main_before and tip stay empty in the lock record until G4
    passed, so until then the record lets no ref move."""
    retry = f"git lane land {key} --wait" + (" --sync" if sync else "")
    return lock.acquire(repo, key, "", "", wait, waiting, retry=retry)


def _check_worktree(repo: Repo, t: Target, wt: git.Worktree | None) -> None:
    """The lane's worktree is there, not mid-sync, and has the lane's branch checked out."""
    if wt is None or not wt.exists:
        raise lane.missing_worktree_refusal(t.key, t.path, "land")
    if git.rebase_in_progress(t.path):
        from guard.commands.sync import worklist

        raise lane.rebase_refusal(
            t.key, "in the middle of a sync", {"path": t.path, "worklist": worklist(t.path)}
        )
    if wt.branch != f"refs/heads/{t.branch}":
        raise lane.branch_mismatch_refusal(repo, t.key, t.path, t.branch, wt.branch)


def _check_branch(repo: Repo, t: Target) -> None:
    """The lane branch is where its worktree left it: not deleted, not moved by hand
    (else G2 would call the worktree's own commit "uncommitted changes")."""
    facts = recovery.branch_facts(repo, t.path, t.branch, t.tip)
    if facts.state != "ok":
        raise recovery.branch_refusal(t.key, facts, "land")


def g2_clean(t: Target, dirty: list[str]) -> None:
    """G2: nothing uncommitted in the lane: what lands is exactly what is committed."""
    if dirty:
        raise lane.dirty_refusal(t.key, t.path, dirty, "land")


def g3_fresh(t: Target, base: str | None) -> None:
    """G3: the lane has commits main lacks, and main is their base (a fast-forward)."""
    if t.tip is None or base == t.tip:
        raise Refusal(
            "nothing_to_land",
            f"lane {t.key} has no commits that main lacks: commit work in {t.path} and land "
            "again, or release the lane when it is done",
            next=[f"git lane release {t.key}"],
            details={"lane": t.key, "path": t.path},
        )
    if base != t.main_before:
        raise Refusal(
            "stale_lane",
            f"main moved since lane {t.key} was last synced; it must be rebased first",
            next=[f"git lane sync {t.key}", f"git lane land {t.key}"],
            alternatives=[f"git lane land {t.key} --sync"],
            details={"lane": t.key, "main": t.main_before, "tip": t.tip},
        )


def g3_tip_names(t: Target, changed: list[str]) -> None:
    """G3: every path the tip changes is one git accepts as a path it is given. A tree
    naming `../x` or `.git/x` reaches the shared store only from a commit made past the
    hooks and fsck (the owner's git with a hand-written index): landing it would make
    every checkout of main write there, and git itself refuses such names on the command
    line (the hub's status, G6)."""
    bad = [p for p in changed if git.unsafe_entry_name(p)]
    if not bad:
        return
    tip = str(t.tip)
    shown = git.shown_some(bad)
    raise Refusal(
        "lane_index_unsafe",
        f"lane {t.key}'s tip {tip[:12]} holds {len(bad)} path(s) outside the worktree or in "
        f"a git dir ({shown}): git never checks such a tree out, so it is not landed; main "
        "was not moved",
        next=[f"{git.owner_git(t.path)} log --stat --format=%H%x09%s {t.main_before}..{tip}"],
        alternatives=[f"git lane release {t.key} --confirm yes-discard-lane"],
        details={"lane": t.key, "tip": tip, "paths": bad[:100]},
    )


def g3_sync(repo: Repo, t: Target) -> SyncResult:
    """G3 with `land --sync`: a stale lane (clean, G2) is rebased onto the main this land
    read, under the lock, exactly as `git lane sync` rebases it (same rebase, same
    worklist and result when it stops on conflicts)."""
    from guard.commands import sync as sync_cmd

    return sync_cmd.rebase(repo, t.key, t.path, t.main_before, then=[f"git lane land {t.key}"])


HubFacts = tuple[list[str], list[str]]  # G6: (dirty paths that meet the land, in the way)


def hub_facts(hub: str, changed: list[str], added: set[str]) -> HubFacts:
    """What G6 judges: the hub's uncommitted paths that meet `changed`, and its untracked
    (ignored) files the hub's update to the tip would overwrite (landing.hub_in_the_way)."""
    dirty = policy.overlapping(hub_dirty(hub, changed), changed)
    seen = set(dirty)
    return dirty, [p for p in landing.hub_in_the_way(hub, changed, added) if p not in seen]


def g6_hub(repo: Repo, hub: git.Worktree | None, facts: HubFacts, key: str) -> None:
    """G6: the hub's uncommitted paths that meet this land's changes refuse it (unrelated
    edits in the hub never do), and so do its ignored files where the tip tracks files:
    the hub's update after main moved would overwrite them without a word."""
    hits, in_the_way = facts
    if hub is not None and hits:
        raise Refusal(
            "hub_dirty",
            f"the hub {hub.path} has uncommitted changes to paths this land changes: "
            f"{', '.join(map(git.shown, hits[:10]))}",
            next=[
                # untracked ones too (the land's new files), each path taken as it is: a
                # name like `*` or `:(glob)x` is no pattern that would stash other work
                f"{git.owner_git(hub.path)} --literal-pathspecs stash push --include-untracked "
                f"-- {' '.join(git.q(h) for h in hits[:10])}",
                f"git lane land {key}",
            ],
            details={"lane": key, "paths": hits},
        )
    if hub is not None and in_the_way:
        raise Refusal(
            "ignored_in_the_way",
            f"the hub {hub.path} holds untracked (ignored) files where this land's tip tracks "
            f"files ({', '.join(map(git.shown, in_the_way[:5]))}); bringing the hub along would "
            "overwrite them without a word: main was not moved. Move them out of the way (kept "
            "under git-lane's state), then land again",
            next=[*hub_moves(repo, hub.path, in_the_way), f"git lane land {key}"],
            details={"lane": key, "hub": hub.path, "paths": in_the_way[:100]},
        )


def g9_markers(t: Target, markers: list[str]) -> None:
    """G9 at the door: the pre-commit hook refuses a commit that adds a conflict block,
    but `git commit --no-verify` skips it. The blocks main..tip adds (same rules as
    `continue`: the file's conflict-marker-size, text files only) refuse the land."""
    if not markers:
        return
    files = sorted({m.rsplit(":", 1)[0] for m in markers})
    lq = git.owner_git(t.path)  # `git -C LANE`, the lane's repository named
    # G2 held the lane clean, so what is modified now is the marker fix
    stage = (
        f"--literal-pathspecs add -- {' '.join(git.q(f) for f in files)}"
        if len(files) <= PATHS_IN_NEXT
        else "add -u"
    )
    raise Refusal(
        "conflict_markers_present",
        f"lane {t.key} would bring conflict markers into main at {', '.join(map(git.shown, markers[:10]))}"
        f"{' ...' if len(markers) > 10 else ''} (committed past the pre-commit hook); "
        f"remove those blocks in {t.path}, then commit",
        next=[
            f"{lq} {stage} && {lq} commit -m 'Remove conflict markers'",
            f"git lane land {t.key}",
        ],
        details={"lane": t.key, "markers": markers[:100], "files": files},
    )


def g4_trusted_config(t: Target, risky: list[tuple[str, str]]) -> None:
    """G4: what the gate tests and what main gets are the same bytes only while git's
    checkout of a blob is the blob. Filters (and an attributes file that assigns them)
    set in the repository's own config, which anything working in a lane can write, could
    make them differ: refused until the owner moves them to the global config or drops
    them (global and system ones, like `git lfs install`'s, are the owner's choice)."""
    if not risky:
        return
    keys = sorted({k for _, k in risky})
    raise Refusal(
        "untrusted_git_config",
        f"the repository's own git config sets {', '.join(keys[:5])}"
        f"{' ...' if len(keys) > 5 else ''}: a filter there can make the gate test other bytes "
        "than main gets, and any process in a lane can write it",
        next=[
            " && ".join(
                f"{git.owner_git(t.path)} config --{sc} --unset-all {git.q(k)}"
                for sc, k in sorted(set(risky))
            ),
            f"git lane land {t.key}",
        ],
        alternatives=[
            "git config --global filter.NAME.clean ...  (an owner-wide filter you trust, e.g. "
            "`git lfs install`, is not refused)"
        ],
        details={"lane": t.key, "settings": [{"scope": sc, "key": k} for sc, k in risky]},
    )


def g4_exact(repo: Repo, t: Target, hidden: git.Hidden, gate_in_lane: bool) -> None:
    """G4, before the gate runs: the lane's worktree holds nothing that `git status` hides
    and the tip lacks. A file flagged assume-unchanged or skip-worktree is hashed and
    compared with the tip's blob (refused only when it differs: the flags are also a
    plain speed-up, e.g. core.ignoreStat, and then nothing is wrong); a submodule must be
    at the commit the tip records, with no changes of its own. Both are uncommitted work
    as much as what G2 sees, so they refuse whether and wherever a gate runs. Files a
    sparse checkout left out are no one's work: they only matter to a gate in the lane."""
    lq = git.owner_git(t.path)  # `git -C LANE`, the lane's repository named
    missing = hidden.missing if gate_in_lane else []
    if hidden.changed or missing:
        fix: list[str] = []
        au, sw = hidden.assume_unchanged, hidden.skip_worktree
        # never `sparse-checkout disable` for a sparse lane: it turns extensions.worktreeConfig
        # on, and with it every lane's config.worktree is read (git.check_no_worktree_config)
        if sw or missing:
            fix.append(_unflag(lq, "--no-skip-worktree", sorted(set(sw) | set(missing))))
        if au:
            fix.append(_unflag(lq, "--no-assume-unchanged", au))
        if missing:  # checkout-index writes only what is not there
            if len(missing) <= PATHS_IN_NEXT:
                fix.append(f"{lq} checkout-index -- {' '.join(git.q(p) for p in missing)}")
            else:
                fix.append(f"{lq} ls-files -z --deleted | {lq} checkout-index -z --stdin")
        what = []
        if hidden.changed:
            what.append(
                f"{len(hidden.changed)} file(s) flagged assume-unchanged or skip-worktree differ from the tip "
                f"({', '.join(hidden.changed[:5])})"
            )
        if missing:
            what.append(
                f"{len(missing)} skip-worktree file(s) of the tip are not in the worktree"
                f"{' (a sparse checkout)' if hidden.sparse else ''} ({', '.join(missing[:5])})"
            )
        raise Refusal(
            "lane_index_flags",
            f"in lane {t.key}, {' and '.join(what)}; `git status` does not show them, so the gate would "
            "not see the tip. Clear the flags; what then shows as changed is committed or discarded as usual",
            next=[*fix, f"git lane land {t.key}"],
            details={
                "lane": t.key,
                "assume_unchanged": au[:100],
                "skip_worktree": sw[:100],
                "missing": missing[:100],
                "sparse": hidden.sparse,
            },
            alternatives=["git lane config set gate_worktree clean"]
            if missing and not hidden.changed
            else [],
        )
    if hidden.submodules:
        raise recovery.submodule_differs(
            repo,
            t.key,
            hidden.submodules,
            f"git lane land {t.key}",
            "`git status` does not show that (their `ignore` setting hides it), so the gate "
            "would not see the tip",
        )


def g4_content(t: Target, found: git.Content | GitError | OSError) -> str:
    """G4, before an in-lane gate: every tracked file's bytes are the tip's, compared by
    content (git.content_differs: a throwaway index, never the lane's stat data). A file
    whose bytes changed with no stat field moving (a MAP_SHARED write into a page already
    dirty, the lane's index then refreshed: red team 16B F1) is uncommitted work `git
    status` does not show: lane_dirty, as G2's, with the paths. Its `next` makes the
    lane's index hash them again (`add --renormalize` reads the bytes whatever the stat
    says), then commits and lands what the worktree holds, as G2's does. A git that could
    not compare (`differs` its GitError) is never "same": lane_content_unverified.
    Returns why the gate must run in a clean worktree instead ("" when the lane can be
    vouched for): the tip's attributes convert its files on checkout, or the lane has a
    populated submodule (git.content_differs, red team 16D)."""
    if isinstance(found, GitError | OSError):
        if isinstance(found, OSError):
            lines = [f"no private temp dir: {found.strerror}"]
        else:
            lines = found.stderr.strip().splitlines()[-5:] or [f"exit {found.returncode}"]
        why = [json.dumps(lines[-1][:200])[1:-1]]  # git's words, escaped, bounded
        raise Refusal(
            "lane_content_unverified",
            f"lane {t.key}'s gate runs in the lane, and its tracked files could not be "
            f"compared with the tip by content ({why[0]}); unverified, what the gate would "
            "read need not be the tip",
            next=["git lane config set gate_worktree clean", f"git lane land {t.key}"],
            alternatives=[git.owner_status(t.path)],
            details={"lane": t.key, "error": "\n".join(lines)},
        )
    differs = found.differs
    if not differs:
        return found.clean
    base = lane.dirty_refusal(t.key, t.path, differs, "land")
    lq = git.owner_git(t.path)
    if len(differs) <= PATHS_IN_NEXT:
        spec = " ".join(git.q(":(top,literal)" + p) for p in differs)
    else:
        spec = git.q(":(top)")
    raise Refusal(
        "lane_dirty",
        f"{base.message}: their content differs from the tip though their stat data matches "
        "the lane's index, so `git status` shows them as clean; the gate in the lane "
        "would read these bytes, not the tip's",
        next=[f"{lq} add --renormalize -- {spec}", *base.next],
        details={**base.details, "content_differs": differs[:100], "stat_matches": True},
    )


def _unflag(lq: str, flag: str, paths: list[str]) -> str:
    # update-index applies only the first of several flag options: one command per flag
    if len(paths) <= PATHS_IN_NEXT:
        return f"{lq} update-index {flag} -- {' '.join(git.q(p) for p in paths)}"
    return f"{lq} ls-files -z | {lq} update-index -z {flag} --stdin"


def g4_gate(
    repo: Repo,
    t: Target,
    command: str,
    timeout: int,
    clean: bool,
    changed: list[str],
    added: set[str],
    output: gate.Output | None,
    tick: gate.Tick | None,
) -> GateSummary:
    """G4: the gate passes at the exact tip (in the lane, or with gate_worktree = "clean" in
    a fresh worktree of the tip, removed after); after it, the tip is what it was, and in
    the lane so is its worktree (else what passed is not what would land); the hub is
    looked at again."""
    assert t.tip is not None
    with contextlib.ExitStack() as stack:
        before: git.StatView = {}
        watch: dirwatch.DirWatch | None = None
        if not clean:  # the engine's own lstat of the lane's tracked files as the gate starts
            with git.shared_store_only(False):
                names = git.tracked_paths(t.path)
                # a directory renamed away and back keeps its files' lstat: its own
                # identity is watched, from before this view until after the "after" one
                watch = stack.enter_context(_watch_lane(t, names))
                before = git.stat_view(t.path, names)
        return _g4_run(repo, t, command, timeout, changed, added, output, tick, before, watch)


def _watch_lane(t: Target, names: list[str]) -> dirwatch.DirWatch:
    """The watch on the lane's root and every directory of its tracked files; one that
    cannot be set is a refusal (an unwatched in-lane gate could pass a swapped tree). A
    clean gate needs no watch: the `next` switches to it."""
    try:
        return dirwatch.DirWatch(t.path, dirwatch.directories(names))
    except dirwatch.WatchFailed as e:
        raise _watch_failed(t, e) from None


def _watch_failed(t: Target, e: dirwatch.WatchFailed) -> Refusal:
    """gate_watch_failed: `next` gates in a fresh worktree of the tip, which needs none."""
    where = json.dumps(e.rel) if e.rel else "inotify itself"
    why = {
        errno.ENOSPC: " (fs.inotify.max_user_watches reached)",
        errno.EMFILE: " (fs.inotify.max_user_instances reached)",
        errno.ENOENT: " (the directory is gone)",
        errno.ENOTDIR: " (no directory now: a link, or a file)",
        errno.ENOSYS: " (no inotify on this system)",
    }.get(e.errno, "")
    return Refusal(
        "gate_watch_failed",
        f"lane {t.key}'s gate runs in the lane, and the watch that tells a directory of it "
        f"renamed away and back while the gate ran could not be set on {where}: "
        f"{os.strerror(e.errno)}{why}; unwatched, what the gate read need not be the tip",
        next=["git lane config set gate_worktree clean", f"git lane land {t.key}"],
        alternatives=[f"git lane land {t.key}  # once the watch can be set"],
        details={
            "lane": t.key,
            "dir": e.rel or None,
            "errno": errno.errorcode.get(e.errno, str(e.errno)),
            "error": os.strerror(e.errno),
        },
    )


def _g4_run(
    repo: Repo,
    t: Target,
    command: str,
    timeout: int,
    changed: list[str],
    added: set[str],
    output: gate.Output | None,
    tick: gate.Tick | None,
    before: git.StatView,
    watch: dirwatch.DirWatch | None,
) -> GateSummary:
    """g4_gate once the lane's directories are watched and its "before" view taken
    (`watch` None: a clean gate)."""
    assert t.tip is not None
    clean = watch is None
    included: Included | None = None  # an in-lane gate sees the lane's own files
    try:
        if clean:
            with gate.clean_worktree(repo.common_dir, t.tip) as where:
                admin = git.worktree_git_dir(where)
                plain = (str(admin.resolve()),) if admin is not None else ()
                # before the gate starts (confined or not): this process is the owner's
                included = gate_included(repo, t.main_before, where, output)
                g = _run_gate(repo, t.key, command, where, timeout, output, tick, [where], plain)
        else:
            g = _run_gate(repo, t.key, command, t.path, timeout, output, tick, [])
    finally:
        lock.forget_gate(repo)  # gate.run stopped it: no next holder needs to
    if g.status == "timeout":
        raise Refusal(
            "gate_timeout",
            f"the gate `{policy.brief(command)}` ran past {timeout}s and was killed",
            next=[f"git lane land {t.key}"],
            alternatives=[
                f"git lane config set gate_timeout {timeout * 2} && git lane land {t.key}"
            ],
            details={"lane": t.key, "gate": g.to_dict()},
        )
    if g.status != "passed":
        raise Refusal(
            "gate_failed",
            f"the gate `{policy.brief(command)}` failed with exit {g.exit} at {t.tip[:12]}: "
            f"fix the failure in {t.path} and commit, then land again",
            next=[f"git lane land {t.key}"],
            details={"lane": t.key, "gate": g.to_dict(), "tail": g.tail, "included": included},
        )
    after = repo.ref_sha(f"refs/heads/{t.branch}")
    still_dirty: list[str] = []
    hidden = git.Hidden()
    swapped: list[str] = []
    if not clean:  # a clean gate never looked at the lane's worktree
        with git.shared_store_only(False):  # its own worktree: G2's view of it
            # git status reads content, and a file put back with the tip's bytes reads as
            # unchanged to it: the lstat of every tracked file too, never the index's stat
            # data (the lane can refresh its index after the swap); status refreshes
            # nothing, no optional locks, so the two are read side by side
            view, (still_dirty, hidden) = git.both(
                lambda: git.stat_view(t.path), lambda: git.dirty_and_hidden(t.path, t.tip or "")
            )
            swapped = git.rewritten(before, view)
    moved = watch.moved() if watch is not None else []  # read after the "after" view
    unseen = hidden.changed + hidden.missing + [s.path for s in hidden.submodules]
    if after != t.tip or still_dirty or unseen or swapped or moved:
        raise _changed_during_gate(t, after, still_dirty, unseen, swapped, moved)
    # G6 again: the hub may have been edited (or switched) while the gate ran, and an
    # overlapping edit found only after main moved would leave the hub half updated
    hub = repo.hub()
    if hub is not None:
        g6_hub(repo, hub, hub_facts(hub.path, changed, added), t.key)
    summary = g.summary()
    summary["included"] = included
    return summary


def gate_included(repo: Repo, main_sha: str, where: str, output: gate.Output | None) -> Included:
    """Copy into the clean gate worktree `where` what `.worktreeinclude` copies into a
    new lane (guard/commands/setup.py prepare): the hub's ignored files named by MAIN's
    committed `.worktreeinclude` (`main_sha`'s, never the tip's: a lane commits its own),
    never a lane's files (an agent's to plant; nothing at or under any lane or worktree
    when they lie inside the hub: lane.lane_places), links as links, never a hardlink (the gate
    runs the lane's code: it writes its copies, never the hub's files). Nothing when main
    has no `.worktreeinclude` or no worktree has main checked out (a bare hub). What could
    not be copied is in `skipped`, as for create; progress lines go to `output`, the
    gate's own stream (stderr, the land socket's client included)."""
    patterns, ignored = include.committed(repo.committed_file(main_sha, include.FILE))
    if patterns is None:
        none = include.empty()
        if ignored is not None:  # too big to read: the land's warnings say so
            none["ignored"] = ignored
        return none
    hub = repo.hub()
    if hub is None:
        return include.empty()

    def progress(files: int, size: int) -> None:
        if output is not None:
            line = (
                f"git-lane: copying .worktreeinclude files into the gate's worktree: "
                f"{files:,} files, {size // 1_000_000:,} MB\n"
            )
            output(line.encode())

    return include.copy(hub.path, where, patterns, progress, lane.lane_places(repo))


def included_warnings(included: Included | None) -> list[str]:
    """A copy that skipped paths, or a `.worktreeinclude` too big to read, is never silent:
    the land's (or queue's) warnings say so."""
    if not included:
        return []
    ignored = included.get("ignored")
    if ignored:
        return [f"{ignored}; the gate ran without them"]
    if not included["skipped"]:
        return []
    first = included["skipped"][0]
    return [
        f"{include.FILE}: {len(included['skipped'])} path(s) not copied into the gate's "
        f"worktree (first: {first['path']}: {first['reason']}); the gate ran without them"
    ]


def _changed_during_gate(
    t: Target,
    after: str | None,
    dirty: list[str],
    unseen: list[str],
    swapped: list[str],
    moved: list[str] | None = None,
) -> Refusal:
    """lane_changed_during_gate. When all the gate changed is new untracked files (build
    output: `__pycache__`, `.coverage`...), landing again would only make them again, so
    the next ignores them in the lane's .gitignore, committed, and lands; the gate still
    runs at that commit. Tracked files rewritten with the same bytes (a new file, or a new
    ctime: what the gate read may not have been the tip): land again, or gate in a clean
    worktree if the gate itself rewrites them. Anything else (the tip, a tracked file, a
    hidden entry): look. A directory of the lane moved, removed or unmounted while the
    gate ran (`moved`, dirwatch: renamed away and back, its files keep their lstat) is a
    swap too."""
    moved = moved or []
    if (swapped or moved) and after == t.tip and not dirty and not unseen:
        parts = []
        if swapped:
            parts.append(
                f"tracked file(s) {', '.join(json.dumps(x) for x in swapped[:3])}"
                + (f" and {len(swapped) - 3} more" if len(swapped) > 3 else "")
                + " were replaced or rewritten"
            )
        if moved:
            parts.append(
                f"director{'y' if len(moved) == 1 else 'ies'} "
                f"{', '.join(json.dumps(x) for x in moved[:3])}"
                + (f" and {len(moved) - 3} more" if len(moved) > 3 else "")
                + f" {'was' if len(moved) == 1 else 'were'} moved, removed or unmounted"
            )
        return Refusal(
            "lane_changed_during_gate",
            f"lane {t.key}'s {'; its '.join(parts)} while its gate ran, though the bytes "
            "are the tip's again: what the gate read need not have been the tip",
            next=[f"git lane land {t.key}"],
            alternatives=[
                f"git lane config set gate_worktree clean && git lane land {t.key}"
                "  # when the gate itself rewrites them: it then runs in a fresh worktree"
            ],
            details={
                "lane": t.key,
                "tip_before": t.tip,
                "tip_after": after,
                "dirty_paths": [],
                "hidden_paths": [],
                "gate_left": [],
                "rewritten_paths": swapped[:50],
                "moved_dirs": moved[:50],
            },
        )
    unseen = unseen + [p for p in swapped if p not in unseen and p not in dirty]
    left = [] if after != t.tip or unseen or moved else git.untracked_only(t.path, dirty)
    g = git.owner_git(t.path)
    gitignore = git.q(os.path.join(t.path, ".gitignore"))
    # a .gitignore the gate wrote itself is shown and committed as it is (a pattern for
    # it would ignore the file `git add` must then add); the rest is appended to it
    own = ".gitignore" in left
    rest = [x for x in left if x != ".gitignore"]
    patterns = _ignore_patterns(rest) if left and _plain_gitignore(t.path) else None
    if patterns is not None:
        # the engine appends them (through a descriptor on the lane's root): never a
        # shell `>>` into the lane's path, which the lane can make a link meanwhile
        lines = " ".join(f"--ignore {git.q(x)}" for x in patterns)
        next_ = [
            *([f"cat -v -- {gitignore}"] if own else []),  # the lane's bytes: escaped
            *([f"git lane repair {t.key} {lines}"] if patterns else []),
            f"{g} add .gitignore",
            f"{g} commit -m {git.q('Ignore what the gate leaves behind')}",
            f"git lane land {t.key}",
        ]
        alternatives = [
            f"git lane config set gate_worktree clean && git lane land {t.key}"
            "  # the gate runs in a fresh worktree, removed after it"
        ]
        shown = ", ".join(json.dumps(x) for x in left[:3])  # escapes, never raw bytes
        what = f"the gate left {len(left)} untracked path(s) in it ({shown})"
    else:
        next_ = [git.owner_status(t.path), f"git lane land {t.key}"]
        alternatives = []
        what = f"{len(dirty) + len(unseen)} changed path(s)" + (
            f", {len(moved)} directory(ies) moved or removed" if moved else ""
        )
    return Refusal(
        "lane_changed_during_gate",
        f"lane {t.key} changed while its gate ran (tip {str(after)[:12]}, {what}); "
        "what passed is not what would land",
        next=next_,
        alternatives=alternatives,
        details={
            "lane": t.key,
            "tip_before": t.tip,
            "tip_after": after,
            "dirty_paths": dirty[:50],
            "hidden_paths": unseen[:50],
            "gate_left": left[:50],
            "rewritten_paths": swapped[:50],
            "moved_dirs": moved[:50],
        },
    )


def _plain_gitignore(lane_path: str) -> bool:
    """The lane's top .gitignore is absent or a regular file (never a link the printed
    `>>` would follow out of the lane, nor anything else)."""
    try:
        return stat.S_ISREG(os.lstat(os.path.join(lane_path, ".gitignore")).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _ignore_patterns(paths: list[str]) -> list[str] | None:
    """.gitignore lines that match exactly these untracked paths' directories or files:
    a directory git reports whole (`out/`) and a file, each by its path from the lane
    root; `__pycache__/` by its name at any depth. None when a path
    cannot be written as a pattern (a newline, or a name git would read otherwise)."""
    out: list[str] = []
    for p in paths:
        if "\n" in p or "\r" in p or p.endswith(" ") or "\\" in p:
            return None
        if p.endswith("/") and p[:-1].rsplit("/", 1)[-1] == "__pycache__":
            line = "__pycache__/"  # Python makes one per package: by its name, any depth
        elif p.endswith("/"):
            line = "/" + _glob_escape(p)  # this directory only, not every one so named
        else:
            line = "/" + _glob_escape(p)
        if line not in out:
            out.append(line)
    return out[:20] if len(out) <= 20 else None


def _glob_escape(name: str) -> str:
    esc = "".join("\\" + c if c in "*?[" else c for c in name)
    return "\\" + esc if esc.startswith(("#", "!")) else esc


def _run_gate(
    repo: Repo,
    key: str,
    command: str,
    cwd: str,
    timeout: int,
    output: gate.Output | None,
    tick: gate.Tick | None,
    also: list[str],
    plain: tuple[str, ...] = (),
) -> gate.GateRun:
    """The gate, run as is; or, in the land a sandboxed exec runs for its CMD (gate.CONFINE,
    the supervisor's word), under the lane's own sandbox grants plus `also` (a clean gate
    worktree) and `plain` (its admin dir: as the lane's own, without the rights to make a
    link, FIFO, socket or device or to rename in from elsewhere: the land lists the
    worktrees, and git opens files there, red team 13U), a private TMPDIR, and a fresh
    cache dir in it (XDG_CACHE_HOME, PRE_COMMIT_HOME: sandbox.gate_cache; never CMD's,
    which CMD wrote before it asked to land), both removed after the gate. A gate that
    cannot be confined is not run: sandbox_failed."""

    def started(pid: int, token: str) -> None:
        lock.remember_gate(
            repo, key, pid, token
        )  # if this land is killed, the next lock holder stops it

    if not gate.CONFINE:
        return gate.run(command, cwd, timeout, key, output, tick, started=started)
    import dataclasses
    import tempfile

    from guard import reap, sandbox, seccomp

    private = None
    ruleset = None
    try:
        try:
            g = sandbox.grants(repo, lane.get(repo, key))
            g = dataclasses.replace(g, plain=[*g.plain, *plain])
            if g.private_tmp_under is None:  # decide() always names one: never guessed
                raise sandbox.SandboxError("no temp dir to make the gate's private one in")
            try:
                private = tempfile.mkdtemp(prefix=f"git-lane-{key}-", dir=g.private_tmp_under)
            except OSError as exc:
                raise sandbox.SandboxError(f"no private temp dir: {exc.strerror}") from None
            # a fresh cache in it, never CMD's (what CMD left there is not the tip)
            g, cache = sandbox.gate_cache(g, private)
            ruleset = sandbox.prepare(g, [*also, *plain, private])
            seal = seccomp.prepare()  # as CMD's: no TIOCSTI, no capabilities as root
            tmp = {n: private for n in ("TMPDIR", "TMP", "TEMP")}
            env = {"GITLANE_GATE_LANE": key, **tmp, **cache}

            def confine() -> None:
                assert ruleset is not None
                ruleset()
                seal()

            # this land a child subreaper: what the confined gate leaves running (a
            # `setsid` child escapes gate.run's killpg) is re-parented here instead of to
            # exec, which ends it only when CMD ends, and is ended as soon as the gate has
            # ended, before its clean worktree is removed (it kept writing its admin dir:
            # red team 14C). Nothing else of this land runs meanwhile: every process below
            # it is the gate's
            why = reap.hold()
            if why:
                raise sandbox.SandboxError(
                    f"what the gate leaves running could not be ended: {why}"
                )
            try:
                return gate.run(command, cwd, timeout, key, output, tick, env, confine, started)
            finally:
                reap.end_tree()
        except (sandbox.SandboxError, gate.NotConfined) as exc:
            raise Refusal(
                "sandbox_failed",
                f"the gate of lane {key}, landed for a sandboxed `git lane exec`, must run "
                f"under the lane's sandbox, and it could not be confined: {exc}; the gate "
                "was not run, nothing was landed",
                next=["git lane doctor", f"git lane land {key}" + lane.OWNER_NOTE],
                details={"lane": key, "why": str(exc), "gate": command},
            ) from None
    finally:
        if ruleset is not None:
            ruleset.close()
        if private is not None:
            dirfd.remove_tree(private)  # the confined gate's: fds only, bounded depth


def g5_main_as_landed(repo: Repo, main_before: str) -> None:
    """G5: a land starts from where the last land left main. Had something else moved it
    (a reflog rewind, a branch copy, a commit with the hooks off), building on it would
    make that unreviewed state landed history; so the owner puts main back first. A main
    read through a link (Repo.foreign_main_link) is refused whatever it reads as: what the
    link leads to may be written by anyone who may write that file (a gate, a lane); so
    is a hard link at main's file, packed-refs or a landed ref's (Foreign.hard)."""
    link = repo.foreign_main_link()
    if link is not None:
        raise Refusal(
            "main_not_plain",
            f"{link.words()}: {link.writer} moves main with no ref "
            "transaction, so nothing lands until main is plain again",
            next=["git lane restore-main" + lane.OWNER_NOTE],
            details={"ref": link.path, "link": link.text},
        )
    # measured against the landed refs only (landed.last): a land epoch.json or the audit
    # log name with no landed ref is no land (red team 17 hooks F4), so forging one wedges nothing
    last = landed.last(repo)
    if last is None or last.sha == main_before:
        return
    rel = landed.relation(repo, main_before, last.sha)
    details: dict[str, object] = {"main": main_before, "landed": last.sha, "epoch": last.epoch}
    if rel == "behind":
        raise Refusal(
            "main_moved",
            f"{repo.main_ref} ({main_before[:12]}) is behind the last landed tip "
            f"{last.sha[:12]} ({last.what}): something rewound it outside any land",
            # a baseline only epoch.json keeps (the ref disagrees) is no place restore-main
            # goes: doctor names both
            next=["git lane restore-main" + lane.OWNER_NOTE if last.ref else "git lane doctor"],
            details={**details, "relation": rel},
        )
    from guard.commands.restore_main import moved_refusal

    raise moved_refusal(repo, repo.main_ref, main_before, last, rel, details)


def g5_objects(repo: Repo, t: Target, tip: str) -> None:
    """G5: main may only name objects the shared store holds itself, verified: a sandboxed
    lane's own store is re-hashed into it, and the tip checked complete without any
    alternate (objects_corrupt otherwise; guard/objects.py). Run first under the lock,
    before any gate reads the tip: G3's ancestry is then the shared store's, never what a
    lane's store says (a forged commit-graph or pack there would make a stale lane fresh)."""
    objects.import_lane(repo, t.key, t.path, t.main_before, tip)


def g5_move_main(repo: Repo, t: Target, tip: str, epoch: int) -> None:
    """G5: main moves from exactly main_before to exactly the tip, or not at all; in the
    same ref transaction the landed ref of this epoch is created at the tip (never
    through a symbolic ref: --no-deref), so main never moves without its landed ref."""
    try:
        git.run(
            [
                "update-ref",
                "--no-deref",
                "--create-reflog",
                "-m",
                f"git-lane: land {t.key}",
                "--stdin",
            ],
            repo.common_dir,
            input=(
                f"update {repo.main_ref} {tip} {t.main_before}\n"
                f"create {landed.ref_name(epoch)} {tip}\n"
            ),
        )
    except GitError as exc:
        now = repo.ref_sha(repo.main_ref)
        if now != tip:
            # The compare-and-swap failed, so this land did not move main (whoever did,
            # by hand or with hooks off, is not ours to undo): drop the record, or every
            # later land and reconcile would stop on it as ambiguous.
            repo.store.landing_path.unlink(missing_ok=True)
            raise Refusal(
                "main_update_failed",
                f"git refused to move {repo.main_ref} from {t.main_before[:12]} to {tip[:12]} "
                f"(it is now {str(now)[:12]}): {exc.stderr.strip()}",
                next=[
                    f"git reflog -5 {repo.main_ref}",
                    "git lane doctor",
                    f"git lane sync {t.key}",
                    f"git lane land {t.key}",
                ],
                details={
                    "lane": t.key,
                    "main_before": t.main_before,
                    "main": now,
                    "tip": tip,
                    "stderr": exc.stderr,
                },
            ) from None
        # git reported a failure after the ref did move (e.g. a hook's complaint): finish


def g7_epoch(
    repo: Repo, txn: landing.Landing, diff: landing.Diff | None = None
) -> HubUpdate | None:
    """G7: hub carried along, epoch bumped and the land logged, all before the caller
    releases the lock (landing.finish is idempotent: reconcile reruns what a crash left).
    Main has moved by now, so a hub git could not carry along does not undo the land: it
    is reported (with the command that brings it in step) instead of only logged."""
    landing.finish(repo, txn, diff=diff)
    return hub_update(repo, txn, diff)


def hub_update(
    repo: Repo, txn: landing.Landing, diff: landing.Diff | None = None
) -> HubUpdate | None:
    """Was the hub carried from main_before to the tip? Its index still holding main_before's
    entries at the paths this land changed says it was not (G6 made sure the hub had no
    edits of its own there). Then the hub is carried once more, so the answer carries
    git's own reason (and a lock another git process held for a moment is over by then),
    or what of the hub's is in the way. None when there is no hub, or it has switched
    away from main."""
    hub = txn.hub
    if hub is None or not txn.paths or not _on_main(hub, txn.main_ref):
        return None
    if not git.index_matches(hub, txn.main_before, txn.paths):
        return {"path": hub, "updated": True}
    state, stderr = landing.carry_hub(hub, txn.main_ref, txn.main_before, txn.tip, diff)
    if state == "updated":
        return {"path": hub, "updated": True, "retried": True}
    if state == "not_hub":
        return None
    try:
        blockers = landing.hub_blockers(hub, txn.main_before, txn.tip, diff)
    except GitError:
        blockers = []
    return {
        "path": hub,
        "updated": False,
        "stderr": stderr,
        "next": [*hub_moves(repo, hub, blockers), hub_next(hub, txn.main_before, txn.tip)],
    }


def hub_moves(repo: Repo, hub: str, paths: list[str]) -> list[str]:
    """`mkdir -p` + `mv` of each of the hub's paths into a directory of git-lane's kept/
    made for this refusal (never one a lane's files or an earlier move are in)."""
    return repo.kept_moves("hub", hub, paths)[1]


def hub_next(hub: str, before: str, after: str) -> str:
    """What brings a hub whose update failed in step: the two-tree merge land runs (a
    `reset --keep` would not do: HEAD is main, which already names the tip). read-tree
    overwrites an ignored file without a word, and has no option against it: first, the
    ignored files at the paths the tip adds, and at their parent directories that are no
    directory in the hub (an ignored file `logs` where the tip adds `logs/x`), are listed,
    and any there stops it."""
    h = git.q(hub)
    added = f"git -C {h} diff --name-only --no-renames -z --diff-filter=A {before} {after}"
    ignored = (
        f"xargs -0 -r git -C {h} --literal-pathspecs ls-files --others --ignored"
        " --exclude-standard --directory --"
    )
    # each parent of an added path that is not a real directory in the hub (a directory
    # itself would list the ignored files inside it, which read-tree leaves alone)
    parents = (
        'xargs -0 -r sh -c \'cd "$0" || exit 1; for f; do p=$f; while :; do case $p in'
        ' */*) p=${p%/*} ;; *) break ;; esac; if [ -L "$p" ] || [ ! -d "$p" ]; then'
        f' printf "%s\\0" "$p"; fi; done; done\' {h}'
    )
    # the refresh first: a file only touched (same content, new mtime) makes read-tree
    # refuse as "not uptodate" until git has looked at it again
    check = (
        f"! {{ {added} | {ignored}; {added} | {parents} | {ignored}; }}"
        " | sed 's/^/git-lane: ignored, would be overwritten (move it aside): /' | grep ."
    )
    return (
        f"git -C {h} update-index -q --refresh && {check}"
        f" && git -C {h} read-tree -m -u {before} {after}"
    )


def _on_main(hub: str, main_ref: str) -> bool:
    gd = git.worktree_git_dir(hub)
    try:
        return gd is not None and git.read_admin(gd / "HEAD").strip() == f"ref: {main_ref}"
    except OSError:
        return False


# -- facts --------------------------------------------------------------------------------
def marker_hits(path: str, base: str, tip: str, common: str) -> list[str]:
    """`file:line` of each conflict block in the tip's blobs that has a marker line
    base..tip adds. The -G pre-filter makes the common case one diff that prints nothing.
    Nothing outside the tip's tree decides what is checked: every file is diffed as text
    (an attribute could call any file binary) and only a NUL byte in the tip's blob (git's
    own test of content) makes a file binary; the marker size is the conflict-marker-size
    the tip's own .gitattributes give, else git's 7 (never from info/attributes or
    core.attributesFile, which a process in a lane can write). Nothing is held whole: the
    pre-filter names files (no patch text), each blob streams through the scan and its
    diff is read alongside it (_blob_hits)."""
    # a submodule's "blob" is a commit: its diff is a `Subproject commit` line, never a block
    touched = [f for f in git.pickaxe_files(path, base, tip, MARKER_PICKAXE) if f.mode != "160000"]
    if not touched:
        return []
    sizes = _tree_marker_sizes(path, common, tip, sorted({f.path for f in touched}))
    hits: list[str] = []
    for f in sorted(touched, key=lambda f: f.path):
        size = sizes.get(f.path, policy.MARKER_SIZE)
        hits.extend(f"{f.path}:{n}" for n in _blob_hits(path, base, tip, f, size))
    return hits


class _Binary(Exception):
    """The blob has a NUL byte in its first BINARY_PROBE bytes: no more of it is read."""


BINARY_PROBE = 8000  # git's buffer_is_binary looks this far
MARKERS_KEPT = 1000  # blocks listed per file (the refusal shows 100)


def _blob_hits(path: str, base: str, tip: str, f: git.Touched, size: int) -> list[int]:
    """The blocks of `f`'s new blob with a marker line base..tip adds
    (hookcheck.added_blocks' rule): the blob streams from `cat-file` into
    policy.AddedMarkerScan in chunks of SCAN_CHUNK; which lines were added is read from
    the file's -U0 patch as the scan asks (hookcheck.AddedLines), both never held whole.
    A file with no old side of its type (added, or a link that became a file: git's patch
    shows it created) has every line added, with no diff to read. A blob or a diff git
    cannot give raises GitError: never a pass."""
    if f.status == "M":
        patch = [
            "--literal-pathspecs",
            "diff",
            "--text",
            *git.PATCH_ARGS,
            base,
            tip,
            "--",
            f.path,
        ]
        with git.stream(patch, path, chunk=policy.SCAN_CHUNK) as diff:
            added = AddedLines(diff)
            found = _scan_blob(path, f.blob, size, added)
            if found is None:
                return []  # binary: the diff is left unread (its git is killed)
            added.drain()  # to its end: git's exit status says the hunks were all there
        return found
    return _scan_blob(path, f.blob, size, lambda n: True) or []


def _scan_blob(path: str, blob: str, size: int, added: Callable[[int], bool]) -> list[int] | None:
    """policy.AddedMarkerScan over the blob, streamed; None when it is binary by content."""
    scan = policy.AddedMarkerScan(added, size, keep=MARKERS_KEPT)
    seen = 0
    try:
        with git.stream(["cat-file", "blob", blob], path, chunk=policy.SCAN_CHUNK) as out:
            for chunk in out:
                if seen < BINARY_PROBE and b"\0" in chunk[: BINARY_PROBE - seen]:
                    raise _Binary  # as git's merge sees it: it never writes markers there
                seen += len(chunk)
                scan.feed(chunk)
    except _Binary:
        return None
    return scan.close()


def _tree_marker_sizes(path: str, common: str, tip: str, names: list[str]) -> dict[str, int]:
    """conflict-marker-size of `names` from the .gitattributes files of `tip`'s tree alone:
    asked of a throwaway bare repository that borrows the objects and holds nothing but an
    index of the tip (no info/attributes, no attributes file, no system file)."""
    import tempfile

    objects = os.path.join(common, "objects")
    with tempfile.TemporaryDirectory(prefix="git-lane-attr-") as tmp:
        git.run(["init", "-q", "--bare", tmp], tmp)  # not in the lane: its GIT_DIR is pinned
        with open(os.path.join(tmp, "objects", "info", "alternates"), "w") as f:
            f.write(objects + "\n")
        env = {
            "GIT_DIR": tmp,
            "GIT_INDEX_FILE": os.path.join(tmp, "index"),
            "GIT_ATTR_NOSYSTEM": "1",
        }
        git.run(["read-tree", tip], tmp, env=env)
        attr = git.run(
            [
                "-c",
                "core.attributesFile=/dev/null",
                "check-attr",
                "--cached",
                "-z",
                "conflict-marker-size",
                "--",
                *names,
            ],
            tmp,
            env=env,
        )
    return policy.marker_sizes(attr.stdout)


def hub_dirty(hub: str, changed: list[str]) -> list[str]:
    """The hub's uncommitted paths that can meet `changed`. A whole-worktree `git status`
    costs a stat of every file (tens of ms in a big repository, for each land); a status
    limited to the changed paths (literal pathspecs: a changed path also covers what lies
    under it) stats only those. A file in the hub where the land needs a directory (an
    untracked `d` when `d/x` arrives) is outside those pathspecs, so the parent
    directories are looked at directly."""
    if not changed or len(changed) > PATHSPEC_MAX:
        return git.dirty_paths(hub)
    paths = git.dirty_paths(hub, changed)
    changed_set = set(changed)
    parents = {p.rsplit("/", i)[0] for p in changed for i in range(1, p.count("/") + 1)}
    odd: list[str] = []
    for d in sorted(parents - changed_set):
        full = os.path.join(hub, d)
        if os.path.lexists(full) and (os.path.islink(full) or not os.path.isdir(full)):
            odd.append(d)  # untracked (a tracked one would be among the changed paths)
    if odd:  # an ignored one is no stash's to take: hub_in_the_way reports it
        res = git.run(
            ["check-ignore", "-z", "--stdin"],
            hub,
            check=False,
            input="".join(f"{d}\0" for d in odd),
        )
        ignored = set(res.z()) if res.returncode in (0, 1) else set()
        paths.extend(d for d in odd if d not in ignored)
    return paths


def _main_and_tip(repo: Repo, branch: str) -> tuple[str, str | None]:
    """main's sha (refusing when main is gone) and the lane tip, in one git call."""
    main_ref, lane_ref = repo.main_ref, f"refs/heads/{branch}"
    found = git.refs(repo.common_dir, main_ref, lane_ref)
    if main_ref not in found:
        return repo.main_sha(), found.get(lane_ref)  # raises no_main_branch
    return found[main_ref], found.get(lane_ref)
