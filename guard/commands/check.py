"""`git lane check write|git`: the shims' decisions as commands, for the agent adapters
(a Claude Code PreToolUse hook asks before each of its own file and shell tool calls).
Each subcommand runs the very decision function its shim runs."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

from guard import git
from guard.errors import Refusal

if TYPE_CHECKING:  # not imported at run time: `check write` in a bound process needs neither
    from guard.files import Lane, Target
    from guard.repo import Repo
    from guard.results import CheckWriteResult


def write(repo: Repo | None, path: str, cwd: str) -> CheckWriteResult:
    """May this process's lane write PATH? The same facts and decision as the write and
    edit shims (guard.files.decide_write). The lane: an exec binding (GITLANE_LANE with
    GITLANE_LANE_PATH: checked as the shims check it, exec-time user config), else
    GITLANE_LANE or the lane worktree the cwd is in (facts from the repository). Exit 0
    with `allowed`, or the refusal. Answered without click (guard.entry): <= 50 ms."""
    from guard import files

    b = files.exec_bound(os.environ)
    if b is not None:
        return cast("CheckWriteResult", files.check_bound(b, path, cwd))
    if repo is None:
        from guard.repo import Repo

        repo = Repo.discover(cwd)
    t = files.target_facts(path, cwd)
    return cast("CheckWriteResult", files.allowed(t, _repo_lane(repo, t, path)))


def _repo_lane(repo: Repo, t: Target, path: str) -> Lane:
    from guard import files, lane as lanes

    try:
        key = lanes.current(repo, None, "check write")
    except Refusal as r:
        if r.code != "unknown_lane":
            raise
        active = list(r.details.get("active") or [])
        raise Refusal(  # its alternatives name the lane as check write takes it
            "unknown_lane",
            r.message,
            next=r.next,
            alternatives=[
                f'cd "$(git lane path {k})" && git lane check write {git.q(path)}' for k in active
            ],
            details=r.details,
        ) from None
    rec = lanes.get(repo, key)
    real = os.path.realpath(rec.path)
    if rec.status != "active":
        raise lanes.not_active_refusal(repo, rec, f"is {rec.status}")
    if not os.path.isdir(real):
        raise lanes.missing_worktree_refusal(key, rec.path, "status")
    common = os.path.realpath(repo.common_dir)
    return files.lane_facts(key, real, common, repo.owner_config.values, t)
