"""What the benchmark scripts share: a command runner that stops the bench on failure,
a hermetic environment (own HOME and XDG dirs, no system git config), and the two sides
of a figure run alternately."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import TypeVar
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIMS = ROOT / "shims"


def sh(
    argv: list[str], cwd: Path, env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    if check and res.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)} in {cwd}\n{res.stderr.decode(errors='replace')}")
    return res


def hermetic_env(
    base: Path, gitconfig: str = "", reuse: bool = False, **extra: str
) -> dict[str, str]:
    """`base`/home as HOME and XDG dirs, with a .gitconfig naming the bench's user (plus
    `gitconfig`); `reuse` for a HOME kept between runs (a cached repository's lanes live
    under its cache)."""
    # PYTHONDONTWRITEBYTECODE off: an installed git-lane runs from cached bytecode
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "GITLANE_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    home = base / "home"
    home.mkdir(parents=reuse, exist_ok=reuse)
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Bench\n\temail = bench@example.com\n"
        + gitconfig
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


T = TypeVar("T")


def turns(
    ours: Callable[[], T], floor: Callable[[], T], runs: int, warm: bool = True
) -> tuple[list[T], list[T]]:
    """`runs` results of each side, the two taking turns to go first so drift in the
    machine's load hits both; with `warm` (and more than one run: a single run is a check,
    not a figure), one untimed run of each first."""
    a: list[T] = []
    b: list[T] = []
    if warm and runs > 1:
        ours()
        floor()
    for i in range(runs):
        if i % 2:
            b.append(floor())
            a.append(ours())
        else:
            a.append(ours())
            b.append(floor())
    return a, b


def alternate(
    ours: Callable[[], float], floor: Callable[[], float], runs: int, warm: bool = True
) -> tuple[float, float]:
    """The medians of turns(...)."""
    a, b = turns(ours, floor, runs, warm)
    return statistics.median(a), statistics.median(b)


def bound_env(env: dict[str, str], key: str, lane: Path, common: Path, git: str) -> dict[str, str]:
    """`env` as `git lane exec KEY` gives it to CMD in `lane` (shims first on PATH, `git`
    the real git behind them)."""
    from guard import binding

    out = {
        **env,
        binding.LANE: key,
        binding.ROLE: "worker",
        binding.REAL_GIT: git,
        binding.SHIMS_DIR: str(SHIMS),
        binding.LANE_PATH: str(lane),
        binding.COMMON: os.path.realpath(common),
        binding.PYTHON: sys.executable,
        binding.PYPATH: str(ROOT),
        binding.HOME_AT_EXEC: env["HOME"],
        binding.XDG_AT_EXEC: env["XDG_CONFIG_HOME"],
        binding.PORT: "20000",
        "PATH": f"{SHIMS}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
    }
    out[binding.PATH_AT_EXEC] = out["PATH"]
    return out
