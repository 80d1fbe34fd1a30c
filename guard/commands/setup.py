"""`git lane setup [KEY]`: make a lane ready to work in, as `create` does after it made
the worktree: the `.worktreeinclude` files of main's tree copied from the hub (those the
lane lacks), then `setup_command` run with `sh -c` in the lane (through the gate's runner:
a session of its own, output streamed, the whole group killed at `setup_timeout` or on
Ctrl-C), with GITLANE_LANE and GITLANE_PORT set. The outcome is kept in the lane's record
(`setup`: running, ok, failed, timeout); a failure leaves the lane as it is and refuses
`setup_failed`, whose `next` runs the setup again."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from guard import gate, git, include, lane, policy, procs
from guard.errors import Refusal
from guard.repo import Repo
from guard.results import Included, LaneView, SetupResult, SetupRun

INTERRUPTED = -2  # the exit recorded for a setup stopped by Ctrl-C or SIGTERM


def run(
    repo: Repo,
    key: str | None,
    progress: include.Progress | None = None,
    output: gate.Output | None = None,
    tick: gate.Tick | None = None,
) -> SetupResult:
    key = lane.current(repo, key, "setup")
    rec = lane.get(repo, key)
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    if rec.status != "active" or wt is None or not wt.exists:
        raise lane.not_active_refusal(
            repo, rec, f"is {rec.status}" if rec.status != "active" else "has no worktree"
        )
    main_sha = repo.main_sha()
    included, ran, warnings = prepare(repo, key, rec.path, main_sha, progress, output, tick)
    view = lane.view(repo, lane.get(repo, key), main_sha, git.by_path(repo.worktrees()))
    if ran is not None and ran["status"] != "ok":
        raise failed_refusal(repo, key, rec.path, ran, included, view, warnings)
    return {
        "ok": True,
        "code": "ok",
        "lane": view,
        "included": included,
        "setup": ran,
        "warnings": warnings,
    }


def prepare(
    repo: Repo,
    key: str,
    path: str,
    main_sha: str,
    progress: include.Progress | None,
    output: gate.Output | None,
    tick: gate.Tick | None,
) -> tuple[Included, SetupRun | None, list[str]]:
    """The copy, then the setup command; the outcome recorded in the lane's record, and
    what they left among the lane's ignored files in its setup manifest (release does not
    count those as work)."""
    warnings = list(repo.config.warnings)
    included = include.empty()
    patterns, ignored = include.committed(repo.committed_file(main_sha, include.FILE))
    if ignored is not None:  # too big to read: nothing copied, and said
        warnings.append(ignored)
    command = repo.config.get("setup_command")
    # what was there before, to tell what setup left: a walk of the whole worktree, so
    # only when something will run (at 100k files it is most of create's extra cost)
    before = (
        include.stamps(path, include.ignored_files(path)) if patterns is not None or command else {}
    )
    if patterns is not None:
        hub = repo.hub()
        if hub is None:
            warnings.append(
                f"{include.FILE}: main is checked out in no worktree, so there is no hub to copy from"
            )
        else:
            included = include.copy(hub.path, path, patterns, progress, lane.lane_places(repo))
            if included["skipped"]:
                warnings.append(
                    f"{include.FILE}: {len(included['skipped'])} path(s) not copied "
                    f"(first: {included['skipped'][0]['path']}: {included['skipped'][0]['reason']})"
                )
    ran: SetupRun | None = None
    if command:
        ran = _run_command(repo, key, path, command, output, tick)
    else:
        warnings += _forget_failure(repo, key, path)
    if patterns is None and ran is None:
        return included, ran, warnings  # nothing to set up: nothing to log
    _remember_what_setup_left(repo, key, path, before)
    repo.store.event(
        "setup",
        lane=key,
        code="ok" if ran is None or ran["status"] == "ok" else "setup_failed",
        included={k: v for k, v in included.items() if k != "skipped"},
        setup=None if ran is None else {k: v for k, v in ran.items() if k != "tail"},
    )
    return included, ran, warnings


def _run_command(
    repo: Repo,
    key: str,
    path: str,
    command: str,
    output: gate.Output | None,
    tick: gate.Tick | None,
) -> SetupRun:
    timeout = repo.config["setup_timeout"]
    _record(
        repo,
        key,
        path,
        setup="running",
        setup_pid=os.getpid(),
        setup_start=procs.start_time(os.getpid()),
    )
    env = {"GITLANE_LANE": key, "GITLANE_PORT": str(policy.lane_port(key))}
    try:
        g = gate.run(command, path, timeout, key, output, tick, extra_env=env)
    except BaseException:  # Ctrl-C, SIGTERM: the group is killed; the lane says so
        _record(repo, key, path, setup="failed", setup_pid=None, setup_start=None)
        raise
    status = {"passed": "ok", "failed": "failed", "timeout": "timeout"}[g.status]
    _record(repo, key, path, setup=status, setup_pid=None, setup_start=None)
    return {
        "command": command,
        "status": status,
        "exit": g.exit,
        "seconds": g.seconds,
        "tail": g.tail,
    }


def _forget_failure(repo: Repo, key: str, path: str) -> list[str]:
    """No setup_command is configured (any more): a failure recorded by an earlier one no
    longer says anything about the lane, so the mark is cleared, and the caller says so."""
    rec = repo.store.read_lane(key)
    if rec is None or lane.setup_state(rec) not in ("failed", "timeout"):
        return []
    _record(repo, key, path, setup=None, setup_pid=None, setup_start=None)
    return [
        f"setup_command is unset: the earlier setup {lane.setup_state(rec)} of lane {key} "
        "no longer applies, and the lane is no longer marked so"
    ]


def _remember_what_setup_left(repo: Repo, key: str, path: str, before: include.Manifest) -> None:
    """The lane's setup manifest: the ignored files this setup (and earlier ones, where
    untouched since) left, so release does not take a venv or node_modules it made for
    someone's work."""
    after = include.stamps(path, include.ignored_files(path))
    with lane.registry_lock(repo):
        rec = repo.store.read_lane(key)
        if rec is None or rec.path != path or rec.status != "active":
            return
        old = repo.store.read_setup_manifest(rec)
        repo.store.write_setup_manifest(rec, include.setup_left(before, after, old))


def done_without_command(repo: Repo, key: str, path: str) -> None:
    """create marks a lane's setup running before the copy (so a create killed meanwhile
    leaves a lane whose setup reads failed); with no setup_command the mark is lifted."""
    _record(repo, key, path, setup=None, setup_pid=None, setup_start=None)


def _record(repo: Repo, key: str, path: str, **changes: Any) -> None:
    """Update the lane's record under the registry lock, if it is still this lane's."""
    with lane.registry_lock(repo):
        rec = repo.store.read_lane(key)
        if rec is not None and rec.path == path and rec.status == "active":
            repo.store.write_lane(replace(rec, **changes))


def failed_refusal(
    repo: Repo,
    key: str,
    path: str,
    ran: SetupRun,
    included: Included,
    view: LaneView,
    warnings: list[str],
) -> Refusal:
    timeout = repo.config["setup_timeout"]
    if ran["status"] == "timeout":
        what = f"ran past setup_timeout ({timeout}s) and was killed"
        alternatives = [f"git lane config set setup_timeout {timeout * 2} && git lane setup {key}"]
    else:
        what = f"failed with exit {ran['exit']}"
        alternatives = []
    return Refusal(
        "setup_failed",
        f"lane {key} is created at {path}, but its setup `{policy.brief(ran['command'])}` {what}; "
        "fix the cause, then run the setup again",
        next=[f"git lane setup {key}"],
        alternatives=alternatives,
        details={
            "lane": key,
            "path": path,
            "setup": ran,
            "included": included,
            "view": view,
            "warnings": warnings,
        },
    )
