"""Benchmark exec's start-up cost of guard/linked.py: the walk of the git dirs the sandbox
grants for hard links planted there (exec --sandbox and --own-objects run it before CMD).

  walk:  linked.split() of a lane whose own store holds OBJECTS loose objects, beside
         LANES lanes' loose refs and reflogs under refs/heads/lane/ and
         logs/refs/heads/lane/, nothing to split (every exec's case), in-process, warm
         dentry cache; against a floor of the same lstat of every file by os.walk
         (no directory fds, no link counting), alternated.
  split: the one-time cost when every object of that store has a name outside (a local
         submodule clone's hard-linked objects): each copied, fsynced, renamed.

Nothing is asserted: it prints medians.

    python bench/links.py
    python bench/links.py --objects 50000 --lanes 200
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import hermetic_env, sh  # noqa: E402
from guard import linked, sandbox  # noqa: E402


def floor(dirs: list[str]) -> None:
    for d in dirs:
        for top, _, files in os.walk(d):
            for f in files:
                os.lstat(os.path.join(top, f))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--lanes", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=21)
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-links-"))
    try:
        env = hermetic_env(base)
        hub = base / "hub"
        hub.mkdir()
        sh(["git", "init", "-q", "-b", "main"], hub, env)
        sh(["git", "commit", "-q", "--allow-empty", "-m", "init"], hub, env)
        for i in range(a.lanes):
            sh(["git", "branch", f"lane/k{i}"], hub, env)
        sh(["git", "worktree", "add", "-q", str(base / "alpha"), "lane/k0"], hub, env)
        common = os.path.realpath(hub / ".git")
        admin = os.path.join(common, "worktrees", "alpha")
        store = os.path.join(admin, "objects")
        os.makedirs(store)
        blobs = base / "blobs"
        blobs.mkdir()
        paths = []
        for i in range(a.objects):
            (blobs / str(i)).write_text(f"blob {i}\n")
            paths.append(str(blobs / str(i)))
        subprocess.run(
            ["git", "hash-object", "-w", "--stdin-paths"],
            cwd=hub,
            input="\n".join(paths).encode(),
            env={**env, "GIT_OBJECT_DIRECTORY": store},
            check=True,
            capture_output=True,
        )
        dirs = sandbox.lane_git_dirs(common, admin)
        files = sum(len(fs) for d in dirs[1:] for _, _, fs in os.walk(d))
        linked.split(common, dirs)  # warm, as a second exec finds it
        ours, raw = [], []
        for _ in range(a.rounds):
            t = time.perf_counter()
            assert linked.split(common, dirs) == []
            ours.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            floor([admin, *dirs[2:]])
            raw.append((time.perf_counter() - t) * 1000)
        m, f = statistics.median(ours), statistics.median(raw)
        print(f"{files} files (lane store, {a.lanes} lane refs and reflogs), {a.rounds} rounds")
        print(f"walk: median {m:.1f} ms (min {min(ours):.1f}), floor os.walk+lstat {f:.1f} ms")
        outside = base / "outside"
        outside.mkdir()
        k = 0
        for top, _, fs in os.walk(store):
            for name in fs:
                os.link(os.path.join(top, name), outside / str(k))
                k += 1
        t = time.perf_counter()
        done = linked.split(common, dirs)
        print(
            f"split: {len(done)} hard-linked objects in {(time.perf_counter() - t) * 1000:.0f} ms"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
