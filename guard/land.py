"""The land pipeline (G1-G7): the only door to main. Under the integration lock it
re-derives cleanliness and freshness from git, runs the gate at the exact tip, records a
staged landing transaction, moves main by compare-and-swap, brings the hub along, bumps
the epoch. `recover` finishes or rolls back a land that died part way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from guard import gitrun, lock, procs
from guard.errors import GitError, Refusal
from guard.lanes import dirty_paths, dirty_refusal, get_lane, owner_conflict, parse_status_z, rebase_in_progress, wt_index
from guard.repo import Repo, Worktree
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
    kill the whole group at the timeout, when the gate's shell exits (nothing it started
    outlives it), and when this process is interrupted (the group is in its own session,
    so a terminal's Ctrl-C never reaches it: only we can stop it)."""
    import selectors

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
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    reading = True
    old_term = _term_as_interrupt()
    try:
        while True:
            if time.monotonic() - start > timeout:
                timed_out = True
                _kill_group(proc)
                break
            for _ in sel.select(timeout=0.2) if reading else ():
                chunk = proc.stdout.read(65536)
                if chunk:
                    sys.stderr.buffer.write(chunk)
                    sys.stderr.flush()
                    buf += chunk
                    *done, buf = buf.split(b"\n")
                    tail.extend(d.decode("utf-8", "replace") for d in done)
                elif chunk == b"":  # EOF: the gate closed its output but may still run
                    sel.unregister(proc.stdout)
                    reading = False
            if not reading:
                try:
                    proc.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is not None:
                rest = proc.stdout.read() or b""
                if rest:
                    sys.stderr.buffer.write(rest)
                    buf += rest
                break
            if tty and time.monotonic() - last_tick >= 5:
                last_tick = time.monotonic()
                sys.stderr.write(f"git-lane: gate running for {int(last_tick - start)}s\n")
    finally:
        _restore_term(old_term)
        sel.close()
        if proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM, a bug): stop the gate too
            _kill_group(proc)
        else:
            _killpg(proc.pid, signal.SIGKILL)  # whatever the gate left running in its group
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


def _term_as_interrupt() -> Any:
    """While the gate runs, SIGTERM unwinds like Ctrl-C (so the gate is killed and the
    lock released) instead of ending this process on the spot."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)


def _restore_term(old: Any) -> None:
    if old is not None:
        signal.signal(signal.SIGTERM, old)


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        if not _killpg(proc.pid, sig):
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    _killpg(proc.pid, signal.SIGKILL)  # the leader is gone; its children may linger in the group
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass


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
    # main_before and tip are filled in by lock.update once read under the lock (G3);
    # until then the record lets no ref move
    held = lock.acquire(repo, key, "", "", wait)
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
    main_before, tip = _main_and_tip(repo, branch)
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
    hub = repo.hub(wts)

    def main_side() -> tuple[str | None, list[str], list[str]]:
        # one merge-base answers two questions: it is the tip when the lane has nothing
        # main lacks, and main itself exactly when main is an ancestor of the tip
        base = tip
        if tip is not None and tip != main_before:
            base = repo.git(["merge-base", main_before, tip], check=False).stdout.strip()
        if tip is None or base != main_before:
            return base, [], []
        changed = repo.git(["diff", "--name-only", "--no-renames", "-z", main_before, tip]).z()
        hits = _overlaps(_hub_dirty(repo, hub.path, changed), changed) if hub is not None else []
        return base, changed, hits

    # The lane's status (G2) is the slow part in a big repository: the facts for G3 and G6
    # are read beside it. Refusals are still decided in the order G2, G3, G6.
    facts: list[Any] = gitrun.parallel(_call, [lambda: dirty_paths(path), main_side])
    dirty: list[str] = facts[0]
    base: str | None = facts[1][0]
    changed: list[str] = facts[1][1]
    hub_hits: list[str] = facts[1][2]
    if dirty:
        raise dirty_refusal(key, path, dirty, "land")
    if tip is None or base == tip:
        raise Refusal(
            "nothing_to_land",
            f"lane {key} has no commits that main lacks",
            next=[f"commit work in {path}", f"git lane release {key}"],
            details={"lane": key},
        )
    if base != main_before:
        raise Refusal(
            "stale_lane",
            f"main moved since lane {key} was last synced; it must be rebased first",
            next=[f"git lane sync {key}", f"git lane land {key}"],
            details={"lane": key, "main": main_before, "tip": tip},
        )
    if hub is not None and hub_hits:
        raise _hub_refusal(hub, hub_hits, key)
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
        # G6 again: the hub may have been edited (or switched) while the gate ran, and an
        # overlapping edit found only after main moved would leave the hub half updated
        hub = repo.hub()
        _check_hub(repo, hub, changed, key)
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
    # Only now, with the gate passed and the tip re-checked, does the lock record name the
    # move the reference-transaction hook may let through: no git run earlier under this
    # land (nor anything the gate started) could have made it.
    lock.update(repo, held, main_before=main_before, tip=tip)
    _stage(repo, txn, "prepared")
    try:
        repo.git(["update-ref", "-m", f"git-lane: land {key}", repo.main_ref, tip, main_before])
    except GitError as exc:
        now = repo.ref_sha(repo.main_ref)
        if now != tip:
            # The compare-and-swap failed, so this land did not move main (whoever did,
            # by hand or with hooks off, is not ours to undo): drop the record, or every
            # later land and reconcile would stop on it as ambiguous.
            repo.store.landing_path.unlink(missing_ok=True)
            raise Refusal(
                "main_update_failed",
                f"git refused to move {repo.main_ref} from {main_before[:12]} to {tip[:12]} "
                f"(it is now {str(now)[:12]}): {exc.stderr.strip()}",
                next=[f"git reflog -5 {repo.main_ref}", "git lane doctor", f"git lane sync {key}", f"git lane land {key}"],
                details={"lane": key, "main_before": main_before, "main": now, "tip": tip, "stderr": exc.stderr},
            ) from None
        # git reported a failure after the ref did move (e.g. a hook's complaint): finish
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


def _check_hub(repo: Repo, hub: Worktree | None, changed: list[str], key: str) -> None:
    """G6: refuse only when the hub's own uncommitted paths meet the paths this land changes."""
    if hub is None:
        return
    hits = _overlaps(_hub_dirty(repo, hub.path, changed), changed)
    if hits:
        raise _hub_refusal(hub, hits, key)


def _call(f: Callable[[], Any]) -> Any:
    return f()


def _hub_refusal(hub: Worktree, hits: list[str], key: str) -> Refusal:
    return Refusal(
        "hub_dirty",
        f"the hub {hub.path} has uncommitted changes to paths this land changes: {', '.join(hits[:10])}",
        next=[f"git -C '{hub.path}' stash push -- {' '.join(hits[:10])}", f"git lane land {key}"],
        details={"lane": key, "paths": hits},
    )


PATHSPEC_MAX = 1000


def _hub_dirty(repo: Repo, hub: str, changed: list[str]) -> list[str]:
    """The hub's uncommitted paths that can meet `changed`. A whole-worktree `git status`
    costs a stat of every file (tens of ms in a big repository, for each land); a status
    limited to the changed paths (literal pathspecs: a changed path also covers what lies
    under it) stats only those. A file in the hub where the land needs a directory (an
    untracked `d` when `d/x` arrives) is outside those pathspecs, so the parent
    directories are looked at directly."""
    if not changed or len(changed) > PATHSPEC_MAX:
        return dirty_paths(hub)
    res = gitrun.run(
        ["--literal-pathspecs", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *changed],
        hub,
        env={"GIT_OPTIONAL_LOCKS": "0"},
    )
    paths = parse_status_z(res.stdout)
    changed_set = set(changed)
    parents = {p.rsplit("/", i)[0] for p in changed for i in range(1, p.count("/") + 1)}
    for d in sorted(parents - changed_set):
        full = os.path.join(hub, d)
        if os.path.lexists(full) and (os.path.islink(full) or not os.path.isdir(full)):
            paths.append(d)  # untracked (a tracked one would be among the changed paths)
    return paths


def _main_and_tip(repo: Repo, branch: str) -> tuple[str, str | None]:
    """main's sha (refusing when main is gone) and the lane tip, in one git call."""
    main_ref, lane_ref = repo.main_ref, f"refs/heads/{branch}"
    res = repo.git(["for-each-ref", "--format=%(objectname) %(refname)", main_ref, lane_ref], check=False)
    found = {}
    for ln in res.lines():
        sha, _, ref = ln.partition(" ")
        found[ref] = sha
    if main_ref not in found:
        return repo.main_sha(), found.get(lane_ref)  # raises no_main_branch
    return found[main_ref], found.get(lane_ref)


def _crash_point(name: str) -> None:
    # The crash tests SIGKILL a real land at each stage through this variable.
    if os.environ.get("GITLANE_TEST_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _stage(repo: Repo, txn: dict[str, Any], stage: str) -> None:
    txn["stage"] = stage
    if stage == "prepared":
        atomic_write_json(repo.store.landing_path, txn)  # durable before main may move
    else:
        # Later stages only save recovery a step it would redo anyway (every step after
        # main moved is idempotent), so a rename without fsync is enough: a process
        # crash keeps it, a power loss at worst rolls the record back a stage.
        tmp = repo.store.landing_path.with_name(f".landing.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(txn, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, repo.store.landing_path)
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
    # still the hub (main checked out there)? Its HEAD file says, without a git call
    gd = repo.worktree_git_dir(hub)
    try:
        head = (gd / "HEAD").read_text().strip() if gd is not None else ""
    except OSError:
        head = ""
    if head != f"ref: {txn['main_ref']}":
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
