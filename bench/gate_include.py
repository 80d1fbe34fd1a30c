"""Benchmark what `.worktreeinclude` adds to a land whose gate runs in a clean worktree.

  land:  `git lane land` with `gate_worktree = "clean"` (gate "true") in a hub whose
         main commits a `.worktreeinclude` naming its ignored files (FILES files,
         MB megabytes in all, in nested directories: copied into the gate's worktree
         before the gate, copy-on-write where the filesystem allows) vs the same land in a
         hub with the same ignored files and no `.worktreeinclude` (nothing to copy).

Each round makes one fresh lane per side (a land moves main) and times the land alone;
the sides alternate so drift hits both. Figures are medians of wall time. Nothing is
asserted: it prints the ratio.

    python bench/gate_include.py
    python bench/gate_include.py --rounds 9 --files 1000 --mb 50
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import hermetic_env, sh  # noqa: E402


def lane_cmd() -> list[str]:
    return [sys.executable, "-m", "guard"]


def setup(hub: Path, env: dict[str, str], files: int, mb: int, named: bool) -> Path:
    hub.mkdir()
    sh(["git", "init", "-q", "-b", "main"], hub, env)
    (hub / "README.md").write_text("bench\n")
    (hub / ".gitignore").write_text(".env\nnode_modules/\n")
    tracked = ["README.md", ".gitignore"]
    if named:
        (hub / ".worktreeinclude").write_text(".env\nnode_modules/\n")
        tracked.append(".worktreeinclude")
    sh(["git", "add", "--", *tracked], hub, env)
    sh(["git", "commit", "-q", "-m", "init"], hub, env)
    (hub / ".env").write_text("SECRET=1\n")
    size = mb * 1_000_000 // max(files - 1, 1)
    for i in range(files - 1):  # 20 packages of nested files, like node_modules
        d = hub / "node_modules" / f"pkg{i % 20:02d}" / "lib"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"m{i:05d}.js").write_bytes(os.urandom(size))
    sh([*lane_cmd(), "install"], hub, env)
    for k, v in (("gate_command", "true"), ("gate_worktree", "clean"), ("max_lanes", "100")):
        sh([*lane_cmd(), "config", "set", k, v], hub, env)
    return hub


def one_land(hub: Path, env: dict[str, str], key: str) -> tuple[float, int]:
    res = sh([*lane_cmd(), "--json", "create", key], hub, env)
    path = Path(json.loads(res.stdout)["lane"]["path"])
    (path / f"{key}.txt").write_text(f"{key}\n")
    sh(["git", "add", f"{key}.txt"], path, env)
    sh(["git", "commit", "-q", "-m", key], path, env)
    t = time.perf_counter()
    res = sh([*lane_cmd(), "--json", "land", key], hub, env)
    took = time.perf_counter() - t
    out = json.loads(res.stdout)
    assert out["code"] == "landed", res.stdout
    sh([*lane_cmd(), "release", key], hub, env)
    return took, out["gate"]["included"]["bytes"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--mb", type=int, default=50)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="gitlane-bench-gateinc-"))
    try:
        env = hermetic_env(base, TMPDIR=str(base))  # the gate worktrees beside the hubs
        with_inc = setup(base / "with", env, args.files, args.mb, True)
        without = setup(base / "without", env, args.files, args.mb, False)
        copying: list[float] = []
        bare: list[float] = []
        copied = 0
        for r in range(args.rounds):
            sides = [(with_inc, copying), (without, bare)]
            for hub, out in sides if r % 2 == 0 else sides[::-1]:
                took, n = one_land(hub, env, f"l{r}")
                out.append(took)
                copied = max(copied, n)
        a, b = statistics.median(copying), statistics.median(bare)
        print(
            f"land clean gate  .worktreeinclude {a * 1000:8.1f} ms  nothing to copy "
            f"{b * 1000:8.1f} ms  ratio {a / b:.3f}x  (+{(a - b) * 1000:.1f} ms; "
            f"{args.files} files, {copied:,} bytes copied, {args.rounds} rounds, "
            f"load {os.getloadavg()[0]:.1f})"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
