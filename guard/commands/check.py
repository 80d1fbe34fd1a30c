"""`git lane check git -- ARGV`: would the git shim let this lane run `git ARGV`? The
same facts (guard.shim.gather_git) and the same decision (guard.shimpolicy.decide_git)
as the shim, without running anything: for agent adapters whose tools do not go through
PATH (a Claude Code PreToolUse hook asks it before each git command)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from guard import binding, git, lane, shim, shimpolicy
from guard.errors import Refusal
from guard.repo import Repo
from guard.results import CheckGitResult


def git_(repo: Repo, argv: Sequence[str], cwd: str | None = None) -> CheckGitResult:
    """allowed, or the shim's refusal. The lane: GITLANE_LANE's, else the cwd's."""
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
