#!/usr/bin/env python3
"""Benchmark `git lane land` (gate = "off") against the raw git floor, in one run.

The floor is what a land must do at the least, done by hand with git in the same
repository: `merge-base --is-ancestor` (is main an ancestor of the tip), a compare-and-swap
`update-ref` of main, and `read-tree -m -u old new` to carry the hub along. Our land does
all that plus its checks (lane clean, hub overlap), the lock, the landing record and the
epoch, in a fresh Python process, as a user runs it.

    python3 bench/land.py [--files 20000] [--reps 5] [--lanes 10] [--keep]

Prints the median of each, the ratio (target <= 2x), then two costs no land can avoid,
measured in the same run for context: starting the interpreter, and the `git status` of
the lane that G2 (lane clean) needs. Then 10 lanes synced and landed back to back against
the same done by hand (rebase + floor), with the per-land overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
GIT = shutil.which("git") or "/usr/bin/git"


def env_for(home: Path) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE off: an installed git-lane runs from cached bytecode
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "GITLANE_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
        PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    return env


class Bench:
    def __init__(self, root: Path, files: int) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        (self.home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
        self.env = env_for(self.home)
        self.hub = root / "hub"
        self.n = 0
        self._make_repo(files)

    def git(self, *args: str, cwd: Path | None = None) -> str:
        res = subprocess.run(
            [GIT, *args], cwd=cwd or self.hub, env=self.env, capture_output=True, text=True
        )
        if res.returncode != 0:
            raise SystemExit(f"git {' '.join(args)} failed:\n{res.stderr}")
        return res.stdout.strip()

    def lane(self, *args: str) -> dict[str, object]:
        res = subprocess.run(
            [sys.executable, "-m", "guard", *args, "--json"],
            cwd=self.hub,
            env=self.env,
            capture_output=True,
            text=True,
        )
        out: dict[str, object] = json.loads(res.stdout)
        if not out.get("ok"):
            raise SystemExit(f"git lane {' '.join(args)} refused: {res.stdout}{res.stderr}")
        return out

    def _make_repo(self, files: int) -> None:
        self.hub.mkdir()
        self.git("init", "-q", "-b", "main")
        self.git("config", "gc.auto", "0")  # no background gc racing the timings
        per_dir = 100
        for i in range(files):
            d = self.hub / f"d{i // per_dir:03d}"
            if i % per_dir == 0:
                d.mkdir()
            (d / f"f{i % per_dir:03d}.txt").write_text(f"file {i}\n")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "20k files")
        self.git("gc", "-q")
        self.lane("config", "set", "gate", "off")
        self.lane("config", "set", "max_lanes", "100")
        self.git("status", "--porcelain")  # warm the index stat data like a real hub

    def commit_in(self, where: Path, tag: str) -> str:
        f = where / f"d{self.n % 100:03d}" / f"bench-{tag}.txt"
        self.n += 1
        f.write_text(f"{tag}\n")
        self.git("add", "--", str(f.relative_to(where)), cwd=where)
        self.git("commit", "-q", "-m", f"bench {tag}", cwd=where)
        # A lane just checked out has every index entry "racily clean" (written in the
        # same second as its files), so a status re-reads all 20,000 files until one
        # refreshes the index. A lane that lived a while has had that from its agent's own
        # `git status`; do the same here, so the timing is of a land, not of a fresh clone.
        time.sleep(1.1)
        self.git("status", "--porcelain", cwd=where)
        return self.git("rev-parse", "HEAD", cwd=where)

    # -- one land --------------------------------------------------------------------
    def ours_once(self, key: str) -> float:
        path = Path(str(self.lane("create", key)["lane"]["path"]))  # type: ignore[index]
        self.commit_in(path, key)
        t0 = time.perf_counter()
        self.lane("land", key)
        return time.perf_counter() - t0

    def floor_once(self, tag: str) -> float:
        # the commit to land is made with plumbing (no checkout): only the floor is timed
        old = self.git("rev-parse", "refs/heads/main")
        idx = self.root / f"floor-{tag}.index"
        env = {**self.env, "GIT_INDEX_FILE": str(idx)}
        blob = subprocess.run(
            [GIT, "hash-object", "-w", "--stdin"],
            cwd=self.hub,
            env=env,
            input=f"{tag}\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for args in (
            ["read-tree", old],
            [
                "update-index",
                "--add",
                "--cacheinfo",
                f"100644,{blob},d{self.n % 100:03d}/floor-{tag}.txt",
            ],
        ):
            subprocess.run([GIT, *args], cwd=self.hub, env=env, check=True)
        self.n += 1
        tree = subprocess.run(
            [GIT, "write-tree"], cwd=self.hub, env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        tip = self.git("commit-tree", "-p", old, "-m", f"floor {tag}", tree)
        idx.unlink()
        t0 = time.perf_counter()
        self.git("merge-base", "--is-ancestor", old, tip)
        self.git("update-ref", "-m", f"floor {tag}", "refs/heads/main", tip, old)
        self.git("read-tree", "-m", "-u", old, tip)
        took = time.perf_counter() - t0
        # main put back (untimed): land refuses a main that moved past its last landed tip
        # by other means (main_ahead), which is what this floor did
        self.git("update-ref", "-m", f"floor {tag} undone", "refs/heads/main", old, tip)
        self.git("read-tree", "-m", "-u", tip, old)
        return took

    def context(self, reps: int) -> tuple[float, float]:
        """What no land can avoid, measured here too: starting the interpreter, and the
        `git status` of a lane that G2 (lane clean) needs."""
        py, st = [], []
        lane = Path(str(self.lane("create", "ctx")["lane"]["path"]))  # type: ignore[index]
        for _ in range(reps):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=self.env, check=True)
            py.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            self.git("status", "--porcelain=v1", "-z", "--untracked-files=all", cwd=lane)
            st.append(time.perf_counter() - t0)
        self.lane("release", "ctx")
        return statistics.median(py), statistics.median(st)

    # -- lanes back to back ----------------------------------------------------------
    def ours_lanes(self, n: int) -> float:
        keys = [f"row-{i}" for i in range(n)]
        for k in keys:
            path = Path(str(self.lane("create", k)["lane"]["path"]))  # type: ignore[index]
            self.commit_in(path, k)
        t0 = time.perf_counter()
        for k in keys:
            self.lane("sync", k)
            self.lane("land", k)
        return time.perf_counter() - t0

    def floor_lanes(self, n: int) -> float:
        wts = []
        base = self.git("rev-parse", "refs/heads/main")
        for i in range(n):
            wt = self.root / f"floor-row-{i}"
            self.git("worktree", "add", "-q", "-b", f"floor-row-{i}", str(wt), base)
            self.commit_in(wt, f"floor-row-{i}")
            wts.append(wt)
        t0 = time.perf_counter()
        for wt in wts:
            self.git("-c", "core.editor=true", "rebase", "-q", "refs/heads/main", cwd=wt)
            old = self.git("rev-parse", "refs/heads/main")
            tip = self.git("rev-parse", "HEAD", cwd=wt)
            self.git("merge-base", "--is-ancestor", old, tip)
            self.git("update-ref", "-m", "floor row", "refs/heads/main", tip, old)
            self.git("read-tree", "-m", "-u", old, tip)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--lanes", type=int, default=10)
    ap.add_argument("--keep", action="store_true", help="leave the repository behind")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="gitlane-bench-"))
    try:
        t = time.perf_counter()
        b = Bench(root, args.files)
        print(f"repository: {args.files} files, built in {time.perf_counter() - t:.1f}s ({root})")
        ours, floor = [], []
        b.ours_once("warmup")
        b.floor_once("warmup")
        for i in range(args.reps):  # interleaved, so drift hits both alike
            ours.append(b.ours_once(f"one-{i}"))
            floor.append(b.floor_once(f"one-{i}"))
        mo, mf = statistics.median(ours), statistics.median(floor)
        print(f"land (gate off), median of {args.reps}: {mo * 1000:7.1f} ms")
        print(f"floor (is-ancestor + update-ref CAS + read-tree -m -u): {mf * 1000:7.1f} ms")
        print(f"ratio: {mo / mf:.2f}x (target <= 2x)")
        py, st = b.context(args.reps)
        print(
            f"  context, same run: interpreter start {py * 1000:.1f} ms; lane `git status` (G2) "
            f"{st * 1000:.1f} ms; floor + both {(mf + py + st) * 1000:.1f} ms -> ratio to that "
            f"{mo / (mf + py + st):.2f}x"
        )

        if args.lanes <= 0:
            return
        total = b.ours_lanes(args.lanes)
        ftotal = b.floor_lanes(args.lanes)
        print(
            f"{args.lanes} lanes synced + landed back to back: {total:.2f}s "
            f"({total / args.lanes * 1000:.0f} ms per lane)"
        )
        print(
            f"{args.lanes} by hand (rebase + floor): {ftotal:.2f}s "
            f"({ftotal / args.lanes * 1000:.0f} ms per lane)"
        )
        print(
            f"overhead per land over the floor: {(total - ftotal) / args.lanes * 1000:.0f} ms "
            f"(ratio {total / ftotal:.2f}x)"
        )
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
