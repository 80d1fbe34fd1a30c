"""What the benchmark scripts share: a command runner that stops the bench on failure,
and a hermetic environment (own HOME and XDG dirs, no system git config)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sh(
    argv: list[str], cwd: Path, env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    if check and res.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)} in {cwd}\n{res.stderr.decode(errors='replace')}")
    return res


def hermetic_env(base: Path, **extra: str) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE off: an installed git-lane runs from cached bytecode
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "GITLANE_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Bench\n\temail = bench@example.com\n"
    )
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        GIT_CONFIG_NOSYSTEM="1",
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.update(extra)
    return env
