"""`git lane check write|git`: the shims' decisions as commands, for the agent adapters
(a Claude Code PreToolUse hook asks before each of its own file and shell tool calls).
Each subcommand runs the very decision function its shim runs."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

from guard import git
from guard.errors import Refusal

if TYPE_CHECKING:  # not imported at run time: `check write` in a bound process needs neither
    from collections.abc import Sequence

    from guard.files import Lane, Target
    from guard.repo import Repo
    from guard.results import CheckGitResult, CheckWriteResult


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
    from guard import lane
    from guard.repo import Repo

    if repo is None:
        repo = Repo.discover(cwd)
    found = repo.packed_refs_blocks()  # before any git reads a ref (it would wait there)
    if found is not None:
        raise lane.packed_refs_refusal(repo, found)
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


def git_(repo: Repo, argv: Sequence[str], cwd: str | None = None) -> CheckGitResult:
    """allowed, or the shim's refusal. The lane: GITLANE_LANE's, else the cwd's. The same
    facts (guard.shim.gather_git) and decision (guard.shimpolicy.decide_git) as the git shim."""
    from guard import binding, lane, shim, shimpolicy

    here = os.path.realpath(cwd or os.getcwd())
    shown = " ".join(git.q(a) for a in argv)
    try:
        key = lane.current(repo, None, "check git")
    except Refusal as r:
        if r.code != "unknown_lane":
            raise
        raise Refusal(
            "unknown_lane",
            r.message,
            next=r.next,
            alternatives=[
                f'cd "$(git lane path {k})" && git lane check git -- {shown}'
                for k in r.details.get("active", [])
            ],
            details=r.details,
        ) from None
    b = binding.from_env(os.environ)
    if b is None or b.lane != key:
        rec = lane.get(repo, key)
        b = binding.Binding(
            lane=key,
            lane_path=os.path.realpath(rec.path),
            common=os.path.realpath(repo.common_dir),
            real_git=git.real_git(),
            shims_dir="",
            home=os.environ.get("HOME", ""),
            xdg_config_home=os.environ.get("XDG_CONFIG_HOME", ""),
        )
    shim.check_binding(b)
    cfg = shim.owner_config(key, b)
    enabled = cfg["enabled"] != "false"
    if enabled:
        facts = shim.gather_git(b, argv, os.environ, here, cfg)
        refusal = shimpolicy.decide_git(argv, os.environ, facts)
        if refusal is not None:
            raise refusal
    return {"ok": True, "code": "allowed", "lane": key, "argv": list(argv), "enabled": enabled}
