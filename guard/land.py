"""The land pipeline (G1-G7): the only door to main. Under the integration lock it
re-derives cleanliness and freshness from git, runs the gate at the exact tip, records a
staged landing transaction, moves main by compare-and-swap, brings the hub along, bumps
the epoch. `recover` finishes or rolls back a land that died part way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import deque
from typing import Any

from guard import lock, procs
from guard.errors import GitError, Refusal
from guard.lanes import dirty_paths, get_lane, owner_conflict, rebase_in_progress, wt_index
from guard.repo import Repo, is_ancestor
from guard.store import Epoch, FileLock, atomic_write_json, now_iso

PATHS_CAP = 500
TAIL_LINES = 40
STAGES = ("prepared", "main_moved", "hub_updated", "epoch_bumped")


def _lane_tip(repo: Repo, branch: str) -> str | None:
    return repo.ref_sha(f"refs/heads/{branch}")


def _overlaps(a: list[str], b: list[str]) -> list[str]:
    """Paths in `a` that meet `b`: equal, or one a directory of the other."""
    bset = set(b)
    prefixes = {p.rstrip("/") + "/" for p in b}
    hits = []
    for p in a:
        if p in bset or any(p.startswith(x) for x in prefixes) or any(q.startswith(p.rstrip("/") + "/") for q in bset):
            hits.append(p)
    return hits


def run_gate(command: str, cwd: str, timeout: int, lane: str) -> dict[str, Any]:
    """Run the gate with sh -c in its own process group, streaming its output to stderr;
    kill the whole group at the timeout."""
    env = dict(os.environ)
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GITLANE_INTERNAL"):
        env.pop(k, None)
    env["GITLANE_GATE"] = "1"
    env["GITLANE_GATE_LANE"] = lane
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    start = time.monotonic()
    proc = subprocess.Popen(
        ["sh", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    tty = sys.stderr.isatty()
    timed_out = False
    buf = b""
    last_tick = start
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    while True:
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            timed_out = True
            _kill_group(proc)
            break
        for _ in sel.select(timeout=0.2):
            chunk = proc.stdout.read(65536) or b""
            if chunk:
                sys.stderr.buffer.write(chunk)
                sys.stderr.flush()
                buf += chunk
                *done, buf = buf.split(b"\n")
                tail.extend(d.decode("utf-8", "replace") for d in done)
            elif proc.poll() is not None:
                break
        if proc.poll() is not None:
            rest = proc.stdout.read() or b""
            if rest:
                sys.stderr.buffer.write(rest)
                buf += rest
            break
        if tty and time.monotonic() - last_tick >= 5:
            last_tick = time.monotonic()
            sys.stderr.write(f"git-lane: gate running for {int(last_tick - start)}s\n")
    sel.close()
    if buf:
        tail.extend(buf.decode("utf-8", "replace").splitlines())
    rc = proc.wait()
    seconds = round(time.monotonic() - start, 3)
    if tty:
        sys.stderr.write(f"git-lane: gate finished in {seconds:.1f}s (exit {rc})\n")
    return {
        "command": command,
        "status": "timeout" if timed_out else ("passed" if rc == 0 else "failed"),
        "exit": rc,
        "seconds": seconds,
        "tail": list(tail),
    }


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            try:  # the leader is gone; children may linger in the group
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        except subprocess.TimeoutExpired:
            continue


def land(repo: Repo, key: str | None, wait: float | None = None) -> dict[str, Any]:
    key = procs.resolve_lane_key(key, "land")
    if procs.is_worker() and repo.config["worker_land"] != "allow":
        raise Refusal(
            "role_forbidden",
            "workers may not land (worker_land = \"deny\")",
            next=["ask the owner to run: git lane land " + (key or "<KEY>"), "git lane config set worker_land allow  (owner)"],
            details={"lane": key},
        )
    if key is None:
        raise Refusal("unknown_lane", "land needs a lane key", next=["git lane status", "git lane land <KEY>"])
    rec = get_lane(repo, key)
    if rec.status != "active":
        raise Refusal(
            "lane_not_active",
            f"lane {key} is {rec.status}",
            next=["git lane reconcile", "git lane status"],
            details={"lane": key, "state": rec.status},
        )
    owner_conflict(repo, rec, "land")
    cfg = repo.config
    gate_on = cfg["gate"] == "on"
    command = cfg.get("gate_command")
    if gate_on and not command:
        raise Refusal(
            "gate_command_unset",
            "the gate is on but no gate_command is set",
            next=['git lane config set gate_command "pytest -q"', "git lane config set gate off  (land without a check)"],
        )
    tip0 = _lane_tip(repo, rec.branch) or ""
    held = lock.acquire(repo, key, repo.main_sha(), tip0, wait)
    try:
        _crash_point("locked")
        if repo.store.landing_path.exists():
            _recover_locked(repo)
        return _land_locked(repo, rec.key, rec.branch, rec.path, held, gate_on, command, cfg["gate_timeout"])
    finally:
        lock.release(repo, held)


def _land_locked(
    repo: Repo, key: str, branch: str, path: str, held: lock.Held, gate_on: bool, command: str | None, timeout: int
) -> dict[str, Any]:
    main_before = repo.main_sha()
    wts = repo.worktrees()
    wt = wt_index(wts).get(os.path.realpath(path))
    if wt is None or not wt.exists:
        raise Refusal(
            "lane_not_active",
            f"the worktree of lane {key} is missing ({path})",
            next=["git lane reconcile", "git lane status"],
            details={"lane": key},
        )
    if rebase_in_progress(repo, path):
        raise Refusal(
            "rebase_in_progress",
            f"lane {key} is in the middle of a sync",
            next=[f"git lane continue {key}", f"git lane abort {key}"],
            details={"lane": key},
        )
    if wt.branch != f"refs/heads/{branch}":
        raise Refusal(
            "lane_branch_mismatch",
            f"the worktree of lane {key} has {wt.branch or 'a detached HEAD'} checked out, not {branch}",
            next=[f"git -C '{path}' switch {branch}"],
            details={"lane": key, "head": wt.branch},
        )
    dirty = dirty_paths(path)
    if dirty:
        raise Refusal(
            "lane_dirty",
            f"lane {key} has {len(dirty)} uncommitted path(s): {', '.join(dirty[:5])}",
            next=[f"git -C '{path}' add -A && git -C '{path}' commit", f"git lane land {key}"],
            details={"lane": key, "dirty_paths": dirty[:100]},
        )
    tip = _lane_tip(repo, branch)
    if tip is None or is_ancestor(repo, tip, main_before):
        raise Refusal(
            "nothing_to_land",
            f"lane {key} has no commits that main lacks",
            next=[f"commit work in {path}", f"git lane release {key}"],
            details={"lane": key},
        )
    if not is_ancestor(repo, main_before, tip):
        raise Refusal(
            "stale_lane",
            f"main moved since lane {key} was last synced; it must be rebased first",
            next=[f"git lane sync {key}", f"git lane land {key}"],
            details={"lane": key, "main": main_before, "tip": tip},
        )
    changed = repo.git(["diff", "--name-only", "--no-renames", "-z", main_before, tip]).z()
    hub = repo.hub(wts)
    if hub is not None:
        hits = _overlaps(dirty_paths(hub.path), changed)
        if hits:
            raise Refusal(
                "hub_dirty",
                f"the hub {hub.path} has uncommitted changes to paths this land changes: {', '.join(hits[:10])}",
                next=[f"git -C '{hub.path}' stash push -- {' '.join(hits[:10])}", f"git lane land {key}"],
                details={"lane": key, "paths": hits},
            )
    lock.update(repo, held, main_before=main_before, tip=tip)
    gate: dict[str, Any] = {"command": command, "status": "off", "seconds": 0.0}
    if gate_on:
        assert command
        gate = run_gate(command, path, timeout, key)
        if gate["status"] == "timeout":
            raise Refusal(
                "gate_timeout",
                f"the gate `{command}` ran past {timeout}s and was killed",
                next=[f"git lane land {key}", "git lane config set gate_timeout <seconds>"],
                details={"lane": key, "gate": gate},
            )
        if gate["status"] != "passed":
            raise Refusal(
                "gate_failed",
                f"the gate `{command}` failed with exit {gate['exit']} at {tip[:12]}",
                next=[f"fix the failure in {path}, commit, then: git lane land {key}"],
                details={"lane": key, "gate": gate, "tail": gate["tail"]},
            )
        after = _lane_tip(repo, branch)
        still_dirty = dirty_paths(path)
        if after != tip or still_dirty:
            raise Refusal(
                "lane_changed_during_gate",
                f"lane {key} changed while its gate ran (tip {str(after)[:12]}, {len(still_dirty)} dirty path(s)); "
                "what passed is not what would land",
                next=[f"git -C '{path}' status", f"git lane land {key}"],
                details={"lane": key, "tip_before": tip, "tip_after": after, "dirty_paths": still_dirty[:50]},
            )
    ep = repo.store.read_epoch()
    txn = {
        "schema": 1,
        "token": held.token,
        "pid": os.getpid(),
        "lane": key,
        "main_ref": repo.main_ref,
        "main_before": main_before,
        "tip": tip,
        "hub": hub.path if hub is not None else None,
        "paths": changed[:PATHS_CAP],
        "truncated": len(changed) > PATHS_CAP,
        "epoch_after": ep.epoch + 1,
        "gate": {k: gate.get(k) for k in ("command", "status", "seconds")},
        "stage": "prepared",
        "at": now_iso(),
    }
    _stage(repo, txn, "prepared")
    try:
        repo.git(["update-ref", "-m", f"git-lane: land {key}", repo.main_ref, tip, main_before])
    except GitError as exc:
        now = repo.ref_sha(repo.main_ref)
        if now == main_before:
            repo.store.landing_path.unlink(missing_ok=True)
        raise Refusal(
            "main_update_failed",
            f"git refused to move {repo.main_ref} from {main_before[:12]} to {tip[:12]}: {exc.stderr.strip()}",
            next=["git lane doctor", "git lane reconcile"],
            details={"lane": key, "stderr": exc.stderr},
        ) from None
    _finish(repo, txn)
    epoch = repo.store.read_epoch().epoch
    return {
        "ok": True,
        "code": "landed",
        "lane": key,
        "main_before": main_before,
        "main_after": tip,
        "epoch": epoch,
        "paths": changed[:PATHS_CAP],
        "gate": {k: gate.get(k) for k in ("command", "status", "seconds")},
    }


def _crash_point(name: str) -> None:
    # The crash tests SIGKILL a real land at each stage through this variable.
    if os.environ.get("GITLANE_TEST_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _stage(repo: Repo, txn: dict[str, Any], stage: str) -> None:
    txn["stage"] = stage
    atomic_write_json(repo.store.landing_path, txn)
    _crash_point(stage)


def _finish(repo: Repo, txn: dict[str, Any], recovered: bool = False) -> None:
    """Everything after main moved: hub, epoch, log. Idempotent, so recovery can rerun it."""
    if STAGES.index(txn["stage"]) < STAGES.index("main_moved"):
        _stage(repo, txn, "main_moved")
    if STAGES.index(txn["stage"]) < STAGES.index("hub_updated"):
        _update_hub(repo, txn)
        _stage(repo, txn, "hub_updated")
    if STAGES.index(txn["stage"]) < STAGES.index("epoch_bumped"):
        ep = repo.store.read_epoch()
        if ep.epoch < txn["epoch_after"]:
            repo.store.write_epoch(
                Epoch(
                    epoch=txn["epoch_after"],
                    lane=txn["lane"],
                    main_before=txn["main_before"],
                    main_after=txn["tip"],
                    paths=txn["paths"],
                    truncated=txn["truncated"],
                    at=now_iso(),
                )
            )
        _stage(repo, txn, "epoch_bumped")
    repo.store.event(
        "land",
        lane=txn["lane"],
        code="landed",
        main_before=txn["main_before"],
        main_after=txn["tip"],
        epoch=txn["epoch_after"],
        paths=txn["paths"],
        truncated=txn["truncated"],
        gate=txn["gate"],
        gate_off=txn["gate"].get("status") == "off",
        recovered=recovered,
    )
    repo.store.landing_path.unlink(missing_ok=True)


def _update_hub(repo: Repo, txn: dict[str, Any]) -> None:
    """Carry the hub's index and worktree from main_before to the tip, keeping its own
    unrelated edits (a two-tree read-tree merge, as checkout does)."""
    hub = txn.get("hub")
    if not hub or not os.path.isdir(hub):
        return
    cur = repo.hub()
    if cur is None or os.path.realpath(cur.path) != os.path.realpath(hub):
        return
    res = repo.git(["read-tree", "-m", "-u", txn["main_before"], txn["tip"]], hub, check=False)
    if not res.ok:
        repo.store.event("warning", lane=txn["lane"], code="hub_update_failed", stderr=res.stderr)


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
        out = _recover_locked(repo)
        if owner is not None:
            lock.owner_path(repo).unlink(missing_ok=True)
        return out
    finally:
        fl.release()


def _recover_locked(repo: Repo) -> list[dict[str, Any]]:
    txn = repo.store.read_json(repo.store.landing_path)
    if txn is None or not all(k in txn for k in ("lane", "main_before", "tip", "stage", "epoch_after", "main_ref")):
        repo.store.landing_path.unlink(missing_ok=True)
        return [{"action": "landing_discarded", "reason": "unreadable landing record"}]
    now = repo.ref_sha(txn["main_ref"])
    if now == txn["tip"]:
        _finish(repo, txn, recovered=True)
        return [{"action": "landing_completed", "lane": txn["lane"], "main_after": txn["tip"]}]
    if now == txn["main_before"]:
        repo.store.landing_path.unlink(missing_ok=True)
        repo.store.event("landing_rolled_back", lane=txn["lane"], code="rolled_back", main=now)
        return [{"action": "landing_rolled_back", "lane": txn["lane"]}]
    raise Refusal(
        "reconcile_ambiguous",
        f"a land of lane {txn['lane']} died, and {txn['main_ref']} is now {str(now)[:12]}: neither the "
        f"recorded old value {txn['main_before'][:12]} nor the tip {txn['tip'][:12]}; nothing was changed",
        next=[
            f"git log --oneline -5 {txn['main_ref']}",
            f"git reflog {txn['main_ref']}",
            f"cat '{repo.store.landing_path}'  (then remove it once main is as it should be)",
        ],
        details={"landing": txn, "main": now},
    )


def repair_epoch(repo: Repo) -> None:
    """Rebuild epoch.json from the newest land event (reconcile, after corruption)."""
    last: dict[str, Any] | None = None
    for ev in repo.store.events():
        if (
            ev.get("kind") == "land"
            and isinstance(ev.get("epoch"), int)
            and (last is None or ev["epoch"] >= last["epoch"])
        ):
            last = ev
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
