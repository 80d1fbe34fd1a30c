"""The land queue: ready lanes landed one after another (`git lane queue`), or in batches
(`--batch N`) that run the gate once for several lanes.

One lane: under the integration lock, a stale lane is synced onto main when its rebase is
clean (a conflicting rebase is aborted: the lane is exactly as it was), then land's own
pipeline (guard/commands/land.py `_land_locked`, G2-G9) lands it. When anything after
the sync refuses, the lane is put back at its tip from before: a skipped lane is left
as it was found.

A batch: under one lock hold, each lane's commits are stacked onto the one before in a
temporary worktree (the lanes themselves are not touched; a lane that does not stack
cleanly is skipped), the gate runs once at the stacked tip, and main moves through the
whole stack in one compare-and-swap (landing.json records the stack, so reconcile
finishes or rolls back a batch like a land). Each lane then points at its own stacked
tip, and gets its own epoch, landed ref and land event. When the gate fails, the stack
is bisected for the first failing lane: the prefix before it lands, it is skipped
(`gate_failed`, with the gate's output), and the rest go on."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from guard import gate, git, landed, landing, lane, lock, objects, policy, procs, ready
from guard.commands import land as land_cmd
from guard.commands import sync as sync_cmd
from guard.errors import GitError, Refusal
from guard.repo import Repo
from guard.results import GateSummary, Included, LandResult, QueueResult

Progress = Callable[[str], None]
STACK_CFG = [
    "-c",
    "rerere.enabled=false",
    "-c",
    "core.editor=true",
    "-c",
    "advice.mergeConflict=false",
    # git's one-line todo whatever a config says (%B: a message line `exec PROG` runs)
    "-c",
    "rebase.instructionFormat=",
]
STACK_ENV = {"GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true"}
GATE_CODES = ("gate_failed", "gate_timeout", "lane_changed_during_gate")


@dataclass
class Cand:
    key: str
    branch: str
    path: str
    tip: str


@dataclass
class Run:
    """What the queue did so far: the JSON result is made from it."""

    command: str | None
    timeout: int
    clean: bool
    tick: gate.Tick | None
    progress: Progress | None
    total: int
    landed: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    lanes: list[dict[str, Any]] = field(default_factory=list)
    gate_runs: int = 0
    gated: set[str] = field(default_factory=set)  # lanes a gate judged: one run each, one by one
    warnings: list[str] = field(default_factory=list)
    auto_sync: list[dict[str, Any]] = field(default_factory=list)
    pending: list[Cand] = field(default_factory=list)  # still to be tried, in order

    def say(self, key: str, what: str, done: bool = True) -> None:
        """`git-lane: queue 2/5 beta: ...`: the lane's place in the queue (a lane that is
        done is counted already, one still under way not yet)."""
        if self.progress is not None:
            n = len(self.landed) + len(self.skipped) + (0 if done else 1)
            self.progress(f"git-lane: queue {n}/{self.total} {key}: {what}")

    def skip(self, key: str, r: Refusal) -> None:
        nxt = list(r.next)
        if r.code in GATE_CODES:  # land's `git lane land KEY`: here, the queue's way round
            nxt = [f"git lane ready {key}", f"git lane queue {key}"]
        entry: dict[str, Any] = {"lane": key, "code": r.code, "message": r.message, "next": nxt}
        g = r.details.get("gate")
        if isinstance(g, dict):
            entry["gate"] = g  # command, status, exit, seconds, tail (the output's last lines)
        self.skipped.append(entry)
        self.say(key, f"skipped [{r.code}]")


# -- what may be queued -------------------------------------------------------------------
@git.in_own_context
def candidate(repo: Repo, key: str) -> Cand:
    """A lane the queue may try: active, marked ready at its current tip, and not owned by
    a live process that did not mark it. Raises the refusal the lane is skipped with."""
    rec = lane.get(repo, key)
    objects.use(repo, rec.path)  # its commits may be in its own store only
    if rec.status == "orphaned":
        raise lane.missing_worktree_refusal(key, rec.path, "land")
    if rec.status != "active":
        raise lane.not_active_refusal(repo, rec, f"is {rec.status}")
    mark = ready.read(repo.state_dir, key)
    if mark is None:
        raise Refusal(
            "not_ready",
            f"lane {key} is not marked ready; the queue lands only lanes marked ready",
            next=[f"git lane ready {key}", f"git lane queue {key}"],
            alternatives=[f"git lane land {key}"],
            details={"lane": key},
        )
    tip = repo.ref_sha(f"refs/heads/{rec.branch}")
    if tip != mark.tip:
        raise Refusal(
            "ready_stale",
            f"lane {key} moved since it was marked ready (marked at {mark.tip[:12]}, now at "
            f"{str(tip)[:12]}): its new state has not been said to be ready",
            next=[f"git lane ready {key}", f"git lane queue {key}"],
            alternatives=[f"git lane ready {key} --unset"],
            details={"lane": key, "marked": mark.tip, "tip": tip},
        )
    live = bool(rec.owner_pid) and procs.alive(rec.owner_pid or 0, rec.owner_start)
    if live and (mark.owner_pid, mark.owner_start) != (rec.owner_pid, rec.owner_start):
        raise Refusal(
            "lane_owner_conflict",
            f"lane {key} belongs to live process {rec.owner_pid}, which did not mark it ready",
            next=[
                f"git lane ready {key}  # from process {rec.owner_pid} or a process it started",
                f"git lane queue {key}",
            ],
            details={"lane": key, "owner_pid": rec.owner_pid},
        )
    return Cand(key, rec.branch, rec.path, tip)


def _checks(repo: Repo, c: Cand, main_before: str) -> land_cmd.Target:
    """Under the lock, right before the lane is touched: the queue's own look again (the
    ready mark read anew, a live owner that started meanwhile: `candidate`), then land's
    checks: its worktree there and on its branch, no sync in progress, the branch where
    the worktree left it, nothing uncommitted."""
    again = candidate(repo, c.key)
    if again.tip != c.tip:  # moved, and marked ready again, since the queue looked
        raise candidate_moved(c, again.tip)
    t = land_cmd.Target(c.key, c.branch, c.path, main_before, c.tip)
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(c.path))
    land_cmd._check_worktree(repo, t, wt)
    land_cmd._check_branch(repo, t)
    land_cmd.g2_clean(t, git.dirty_paths(c.path))
    now = repo.ref_sha(f"refs/heads/{c.branch}")
    if now != c.tip:  # moved between the look and the lock
        raise candidate_moved(c, now)
    return t


def candidate_moved(c: Cand, now: str | None) -> Refusal:
    return Refusal(
        "ready_stale",
        f"lane {c.key} moved while the queue ran (from {c.tip[:12]} to {str(now)[:12]})",
        next=[f"git lane ready {c.key}", f"git lane queue {c.key}"],
        details={"lane": c.key, "marked": c.tip, "tip": now},
    )


def conflicts_refusal(key: str, main: str, stacked_on: str | None = None) -> Refusal:
    onto = (
        f"the lanes stacked before it ({stacked_on[:12]})" if stacked_on else f"main ({main[:12]})"
    )
    return Refusal(
        "sync_conflicts",
        f"lane {key} does not rebase cleanly onto {onto}; the rebase was aborted and the lane "
        "left as it was: sync it and resolve the conflicts, then mark it ready again",
        next=[f"git lane sync {key}"],
        alternatives=[f"git lane ready {key} --unset"],
        details={"lane": key, "main": main, "stacked_on": stacked_on},
    )


# -- one lane at a time -------------------------------------------------------------------
@git.in_own_context
def land_one(repo: Repo, run: Run, c: Cand) -> None:
    objects.use(repo, c.path)  # its commits may be in its own store only (G5 imports them)
    objects.catch_up(repo, c.key, c.path, c.branch)  # so the gate's git reads them
    held = lock.acquire(repo, c.key, "", "", None, retry="git lane queue " + c.key)
    try:
        landing.crash_point("locked")
        if repo.store.landing_path.exists():
            landing.recover_locked(repo, held)
        main_before = repo.main_sha()
        with git.shared_store_only():  # main's history: the shared store's alone
            land_cmd.g5_main_as_landed(repo, main_before)
        _checks(repo, c, main_before)
        before: str | None = None
        # the lane's objects go into the shared store first, re-hashed (objects_corrupt):
        # whether it must be synced is that store's answer, never what the lane's own
        # store says (a commit-graph or pack planted there: git.shared_store_only)
        objects.import_lane(repo, c.key, c.path, main_before, c.tip)
        with git.shared_store_only():
            fresh = git.is_ancestor(repo.common_dir, main_before, c.tip)
        if not fresh and landing._owner_runs(repo, c.key):
            # the rebase is the owner's git writing the lane's worktree, which its live
            # owner (an exec's CMD, who marked it ready) writes too: a directory swapped
            # for a link mid-rebase takes those writes outside the lane (red team 16A F2,
            # 16B F2). Its owner syncs it, confined as it runs.
            raise _owner_syncs(repo, c.key, main_before)
        if not fresh:
            run.say(c.key, f"syncing onto {main_before[:12]}", done=False)
            # an exec records itself as a lane's owner only under the registry lock: the
            # last look and the rebase hold it, as auto_sync's do (guard/crossrebase.py)
            with lane.registry_lock(repo):
                _checks(repo, c, main_before)
                res = sync_cmd.rebase(
                    repo, c.key, c.path, main_before, c.tip, _again(c.key), branch=c.branch
                )
            if res["state"] != "fresh":
                ab = sync_cmd.abort_rebase(repo, c.key, c.path, c.branch)
                if not ab.ok:
                    raise GitError(ab.argv, ab.returncode, ab.stdout, ab.stderr)
                raise conflicts_refusal(c.key, main_before)
            before = c.tip
        try:
            res2 = land_cmd._land_locked(
                repo,
                c.key,
                c.branch,
                c.path,
                held,
                run.command,
                run.timeout,
                run.clean,
                None,
                run.tick,
                # a live owner (the exec that marked it ready) may write the lane while
                # the gate runs (red team 16B F1), or an exec ran in it and left what the
                # tip ignores: the gate then runs in a clean worktree
                live=land_cmd.why_clean_gate(repo, c.key),
            )
        except Refusal as r:
            if r.code in GATE_CODES:
                run.gate_runs += 1
                run.gated.add(c.key)
            if before is not None:
                failed = _put_back(repo, c, before)
                if failed is not None:  # the same refusal, saying where the lane is now
                    run.warnings.append(failed)
                    r.message = f"{r.message}; {failed}"
                    r.details = {**r.details, "put_back": False, "old_tip": before}
            raise
    finally:
        lock.release(repo, held)
    done = cast(LandResult, res2)
    if done["gate"]["status"] != "off":
        run.gate_runs += 1
        run.gated.add(c.key)
    ready.remove(repo.state_dir, c.key)
    run.landed.append(c.key)
    run.warnings.extend(done["warnings"])
    run.lanes.append(
        {
            "lane": c.key,
            "code": "landed",
            "main_before": done["main_before"],
            "main_after": done["main_after"],
            "epoch": done["epoch"],
            "gate": done["gate"],
            "synced": before is not None,
        }
    )
    run.say(c.key, f"landed at {done['main_after'][:12]} (epoch {done['epoch']})")
    after_land(repo, run, c.key)


def _owner_syncs(repo: Repo, key: str, main: str) -> Refusal:
    """lane_owner_conflict for a stale lane whose live owner runs: the queue never rebases
    it; the owner (or a process it started) syncs, marks it ready again, and queues."""
    rec = repo.store.read_lane(key)
    pid = rec.owner_pid if rec is not None else None
    who = f"  # from process {pid} or a process it started" if pid else ""
    return Refusal(
        "lane_owner_conflict",
        f"lane {key} is behind main ({main[:12]}) and belongs to live process {pid}: the "
        "queue does not rebase a worktree a live process of the lane writes",
        next=[f"git lane sync {key}{who}", f"git lane ready {key}{who}", f"git lane queue {key}"],
        details={"lane": key, "owner_pid": pid, "main": main},
    )


def _again(key: str) -> list[str]:
    return [f"git lane ready {key}", f"git lane queue {key}"]


def _put_back(repo: Repo, c: Cand, before: str) -> str | None:
    """A lane the queue synced and then could not land goes back to its tip from before
    (index and worktree with it; `--keep` never drops an uncommitted change). When that
    fails (the gate, run in the lane, left a tracked file changed), nothing is discarded:
    what happened is said (the warning returned), with the commands that go back."""
    res = git.run(["reset", "-q", "--keep", before], c.path, check=False)
    if res.ok:
        return None
    repo.store.event("warning", lane=c.key, code="queue_put_back_failed", stderr=res.stderr)
    now = git.run(["rev-parse", "HEAD"], c.path, check=False).stdout.strip()
    g = git.owner_git(c.path)
    return (
        f"lane {c.key} was synced by the queue to {now[:12]} and could not be put back at its "
        f"old tip {before[:12]} (uncommitted changes the gate left in it are in the way); "
        f"nothing is lost: {before[:12]} is in the lane's reflog. To go back: "
        f"{g} stash push -m {git.q('gate leftovers')} && {g} reset --keep {before}"
    )


def after_land(repo: Repo, run: Run, key: str, waiting: list[Cand] | None = None) -> None:
    """Cross-rebase of idle lanes after each land, when auto_sync is on (guard/crossrebase.py,
    which may not be in this build). A lane still waiting in this queue that it synced
    keeps its ready mark, moved to the synced tip: the queue would have made the same
    clean rebase itself (a conflicting one is never made)."""
    try:
        on = bool(repo.config.get("auto_sync"))
    except Exception:  # a config without the key
        on = False
    if not on:
        return
    import importlib

    try:
        mod = importlib.import_module("guard.crossrebase")
    except ImportError:
        return
    pending = [*run.pending, *(waiting or [])]
    out = mod.after_land(repo, key)
    run.auto_sync.append({"after": key, **out})
    synced = set(out.get("synced") or [])
    for c in pending:
        if c.key not in synced:
            continue
        m = ready.read(repo.state_dir, c.key)
        now = repo.ref_sha(f"refs/heads/{c.branch}")
        if m is not None and m.tip == c.tip and now is not None:
            ready.write(repo.state_dir, replace(m, tip=now))
            repo.store.event("ready", lane=c.key, code="ready_carried", tip=now, was=c.tip)
            c.tip = now


# -- batches ------------------------------------------------------------------------------
@dataclass
class Stacked:
    c: Cand
    t: land_cmd.Target
    before: str  # the stacked tip below it (main for the first)
    tip: str  # its own stacked tip


def _stack_one(repo: Repo, where: str, c: Cand, main0: str, base: str) -> str:
    """Replay the lane's commits (main0's merge-base with its tip .. its tip) onto `base` in
    the temporary worktree; the stacked tip, or sync_conflicts (the rebase aborted)."""
    fork = git.merge_base(repo.common_dir, main0, c.tip) or main0
    git.run([*STACK_CFG, "checkout", "-q", "--detach", "-f", c.tip], where)
    res = git.run(
        [*STACK_CFG, "rebase", "-q", "--onto", base, fork], where, check=False, env=STACK_ENV
    )
    if not res.ok or git.rebase_in_progress(where):
        git.run(["rebase", "--abort"], where, check=False)
        raise conflicts_refusal(c.key, main0, base if base != main0 else None)
    return git.run(["rev-parse", "HEAD"], where).stdout.strip()


def _gate_at(
    repo: Repo, run: Run, where: str, main0: str, sha: str, key: str
) -> tuple[gate.GateRun, Included]:
    """The gate at `sha` in the batch's worktree, cleaned first, and what
    `.worktreeinclude` copied into it (main's patterns, the hub's files) after the clean:
    once per run, since the clean removes them with what an earlier run built."""
    git.run(["checkout", "-q", "--detach", "-f", sha], where)
    git.run(["clean", "-q", "-ffdx"], where)  # what an earlier gate run built is not the tip's
    included = land_cmd.gate_included(repo, main0, where, None)
    assert run.command is not None
    run.gate_runs += 1

    def started(pid: int, token: str) -> None:
        # a queue killed while this gate runs: the next holder of the lock stops it
        lock.remember_gate(repo, key, pid, token)

    try:
        g = gate.run(run.command, where, run.timeout, key, None, run.tick, started=started)
    finally:
        lock.forget_gate(repo)
    return g, included


def _gate_refusal(g: gate.GateRun, key: str, sha: str, stack: list[str]) -> Refusal:
    where = f"at {sha[:12]}, lane {key} stacked on {', '.join(stack) or 'main'}"
    nxt = [f"git lane ready {key}", f"git lane queue {key}"]
    details = {"lane": key, "gate": g.to_dict(), "tail": g.tail, "stacked_on": stack}
    if g.status == "timeout":
        return Refusal(
            "gate_timeout",
            f"the gate `{policy.brief(g.command)}` ran past its timeout {where}",
            next=nxt,
            details=details,
        )
    return Refusal(
        "gate_failed",
        f"the gate `{policy.brief(g.command)}` failed with exit {g.exit} {where}: fix it in the "
        "lane and commit, then mark it ready again",
        next=nxt,
        details=details,
    )


def land_batch(repo: Repo, run: Run, cands: list[Cand]) -> list[Cand]:
    """Stack, gate once, bisect on failure, land the passing prefix in one compare-and-swap.
    Returns the lanes after a culprit, to be tried again on the new main."""
    held = lock.acquire(repo, cands[0].key, "", "", None, retry="git lane queue --batch")
    rest: list[Cand] = []
    try:
        landing.crash_point("locked")
        if repo.store.landing_path.exists():
            landing.recover_locked(repo, held)
        main0 = repo.main_sha()
        land_cmd.g5_main_as_landed(repo, main0)
        gate.sweep(repo.common_dir)
        with gate.clean_worktree(repo.common_dir, main0) as where:
            stack: list[Stacked] = []
            base = main0
            for c in cands:
                try:
                    # the stack is built on main's behalf, in the shared store alone: a
                    # sandboxed lane's commits go in first, re-hashed (objects_corrupt)
                    with objects.reading(repo, c.path):
                        objects.import_lane(repo, c.key, c.path, main0, c.tip)
                    t = _checks(repo, c, main0)
                    land_cmd.g4_trusted_config(t, git.risky_config(c.path))
                    land_cmd.g4_exact(
                        repo, t, git.hidden_differences(c.path, c.tip), gate_in_lane=False
                    )
                    # the lane itself is moved to its stacked tip if it lands (reset --keep)
                    sync_cmd.check_merges(repo, c.key, c.path, main0, c.tip, _again(c.key))
                    sync_cmd.check_ignored(repo, c.key, c.path, base, c.tip, _again(c.key))
                    # where it forks from main, what it adds: the shared store's answer
                    with git.shared_store_only():
                        s = _stack_one(repo, where, c, main0, base)
                        if s == base:  # every commit of it is on main already (by hand?)
                            land_cmd.g3_fresh(
                                land_cmd.Target(c.key, c.branch, c.path, base, base), base
                            )
                        st = land_cmd.Target(c.key, c.branch, c.path, base, s)
                        land_cmd.g9_markers(
                            st, land_cmd.marker_hits(where, base, s, str(repo.common_dir))
                        )
                except Refusal as r:
                    run.skip(c.key, r)
                    continue
                run.say(c.key, f"stacked at {s[:12]}", done=False)
                stack.append(Stacked(c, t, base, s))
                base = s
            if not stack:
                return []
            good, failed = len(stack), None
            summary: GateSummary = {"command": run.command, "status": "off", "seconds": 0.0}
            if run.command is not None:
                run.gated.update(x.c.key for x in stack)
                keys = [x.c.key for x in stack]
                g, inc = _gate_at(repo, run, where, main0, stack[-1].tip, keys[-1])
                if g.status == "passed":
                    summary = {**g.summary(), "included": inc}
                else:
                    # the first failing lane: the gate passed at main (lo) and failed at hi
                    lo, hi, fail = 0, len(stack), g
                    while hi - lo > 1:
                        mid = (lo + hi) // 2
                        gm, inc = _gate_at(
                            repo, run, where, main0, stack[mid - 1].tip, keys[mid - 1]
                        )
                        if gm.status == "passed":
                            lo, summary = mid, {**gm.summary(), "included": inc}
                        else:
                            hi, fail = mid, gm
                    good = lo
                    failed = (stack[hi - 1], fail)
                    rest = [x.c for x in stack[hi:]]
            if failed is not None:
                x, fail = failed
                run.skip(
                    x.c.key, _gate_refusal(fail, x.c.key, x.tip, [y.c.key for y in stack[: hi - 1]])
                )
            if good:
                run.warnings += land_cmd.included_warnings(summary.get("included"))
                _move(repo, run, held, main0, stack[:good], summary, rest)
    finally:
        lock.release(repo, held)
    return rest


def _move(
    repo: Repo,
    run: Run,
    held: lock.Held,
    main0: str,
    stack: list[Stacked],
    summary: GateSummary,
    rest: list[Cand],
) -> None:
    """The passing prefix lands, then auto_sync. The last look at each lane and the move
    of its branch (reset --keep in its worktree) hold the registry lock, under which alone
    an exec records itself as a lane's owner: no lane is moved under a live owner."""
    with lane.registry_lock(repo):
        moved = _move_locked(repo, run, held, main0, stack, summary, rest)
    if moved:
        for x in stack:
            after_land(repo, run, x.c.key, rest)


def _move_locked(
    repo: Repo,
    run: Run,
    held: lock.Held,
    main0: str,
    stack: list[Stacked],
    summary: GateSummary,
    rest: list[Cand],
) -> bool:
    """Each lane still where it was stacked from, still marked ready, no live owner that
    did not mark it, nothing ignored in the way of its move, the hub not in the way; then
    main from main0 to the prefix's tip in one compare-and-swap. False: nothing landed."""
    moved: list[tuple[Stacked, Refusal]] = []
    for x in stack:
        now = repo.ref_sha(f"refs/heads/{x.c.branch}")
        if now != x.c.tip or git.dirty_paths(x.c.path):
            m = candidate_moved(x.c, now)
            moved.append(
                (x, Refusal("lane_changed_during_gate", m.message, next=m.next, details=m.details))
            )
            continue
        try:
            candidate(repo, x.c.key)  # the mark withdrawn, an owner started during the gate
            sync_cmd.check_ignored(repo, x.c.key, x.c.path, x.before, x.c.tip, _again(x.c.key))
        except Refusal as r:
            moved.append((x, r))
    if moved:
        # what the gate passed is not what those lanes hold now (or may not move them):
        # they are skipped, and the others go round again (their stack without them was
        # never gated)
        for x, why in moved:
            run.skip(x.c.key, why)
        out = {x.c.key for x, _ in moved}
        rest[:0] = [x.c for x in stack if x.c.key not in out]
        return False
    tip = stack[-1].tip
    changed, added = git.changed_and_added(repo.common_dir, main0, tip)
    hub = repo.hub()
    if hub is not None:
        facts = land_cmd.hub_facts(hub.path, changed, added)
        try:
            land_cmd.g6_hub(repo, hub, facts, stack[-1].c.key)
        except Refusal as r:
            # only the lanes whose own changes meet the hub's paths are skipped, each with
            # its own refusal (its next lands it); the others go round again, as above.
            # None found on its own (the stack's changes together): every lane, as before
            hit: list[tuple[Stacked, Refusal]] = []
            for x in stack:
                c, a = git.changed_and_added(repo.common_dir, x.before, x.tip)
                try:
                    land_cmd.g6_hub(repo, hub, land_cmd.hub_facts(hub.path, c, a), x.c.key)
                except Refusal as own:  # its next: again through the queue (main moves)
                    own.next = [*own.next[:-1], *_again(x.c.key)]
                    hit.append((x, own))
            for x, why in hit or [(x, r) for x in stack]:
                run.skip(x.c.key, why)
            out = {x.c.key for x, _ in hit}
            if hit:
                rest[:0] = [x.c for x in stack if x.c.key not in out]
            return False
    lock.update(repo, held, main_before=main0, tip=tip)
    first = landed.next_epoch(repo)
    entries = []
    for i, x in enumerate(stack):
        paths = git.changed_paths(repo.common_dir, x.before, x.tip)
        entries.append(
            {
                "lane": x.c.key,
                "branch": x.c.branch,
                "path": x.c.path,
                "old_tip": x.c.tip,
                "before": x.before,
                "tip": x.tip,
                "epoch": first + i,
                "paths": paths[: land_cmd.PATHS_CAP],
                "truncated": len(paths) > land_cmd.PATHS_CAP,
            }
        )
    last = stack[-1]
    txn = landing.Landing(
        token=held.token,
        pid=os.getpid(),
        lane=last.c.key,
        main_ref=repo.main_ref,
        main_before=main0,
        tip=tip,
        hub=hub.path if hub is not None else None,
        paths=changed[: land_cmd.PATHS_CAP],
        truncated=len(changed) > land_cmd.PATHS_CAP,
        epoch_after=first + len(stack) - 1,
        gate={**summary, "batch": [x.c.key for x in stack]},
        stack=entries,
    )
    txn = landing.stage(repo, txn, "prepared")
    landed.clear_forgeries(repo, last.c.key)
    land_cmd.g5_move_main(
        repo,
        land_cmd.Target(last.c.key, last.c.branch, last.c.path, main0, tip),
        tip,
        txn.epoch_after,
    )
    landing.finish(repo, txn, held=held, diff=(changed, added))
    for e, x in zip(entries, stack, strict=True):
        ready.remove(repo.state_dir, x.c.key)
        run.landed.append(x.c.key)
        run.lanes.append(
            {
                "lane": x.c.key,
                "code": "landed",
                "main_before": e["before"],
                "main_after": e["tip"],
                "epoch": e["epoch"],
                "gate": landing.batch_gate(summary, x.tip, tip),
                "batch": [y.c.key for y in stack],
            }
        )
        run.say(x.c.key, f"landed at {x.tip[:12]} (epoch {e['epoch']}, batch of {len(stack)})")
    return True


# -- the queue ----------------------------------------------------------------------------
def run_queue(
    repo: Repo,
    keys: list[str],
    command: str | None,
    batch: int,
    tick: gate.Tick | None,
    progress: Progress | None,
) -> QueueResult:
    cfg = repo.config
    run = Run(
        command, cfg["gate_timeout"], cfg["gate_worktree"] == "clean", tick, progress, len(keys)
    )
    main_start = repo.main_sha()
    cands = run.pending
    for key in keys:
        try:
            cands.append(candidate(repo, key))
        except Refusal as r:
            run.skip(key, r)
    while cands:  # changed in place only: after_land sees what still waits
        if batch <= 1:
            c = cands.pop(0)
            try:
                land_one(repo, run, c)
            except Refusal as r:
                run.skip(c.key, r)
            continue
        group = cands[:batch]
        del cands[:batch]
        try:
            cands[:0] = land_batch(repo, run, group)
        except Refusal as r:  # the lock, or main not where the last land left it
            done = {*run.landed, *(x["lane"] for x in run.skipped)}
            for c in group:
                if c.key not in done:
                    run.skip(c.key, r)
    main_end = repo.main_sha()
    made_stale = [
        k for k in land_cmd.made_stale(repo, "", main_start, main_end) if k not in run.landed
    ]
    out: QueueResult = {
        "ok": True,
        "code": "ok",
        "landed": run.landed,
        "skipped": run.skipped,
        "lanes": run.lanes,
        "main_before": main_start,
        "main_after": main_end,
        "batch": batch,
        "gate_runs": run.gate_runs,
        "gate_runs_saved": len(run.gated) - run.gate_runs,
        "made_stale": made_stale,
        "next": [f"git lane sync {k}" for k in made_stale],
        "warnings": sorted(set(run.warnings)),
    }
    if run.auto_sync:
        out["auto_sync"] = run.auto_sync
    return out
