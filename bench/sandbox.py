"""Benchmark the kernel sandbox (`git lane exec --sandbox`, Landlock).

  status:  `git status` in a lane (1000 files), inside the sandbox vs outside it;
  rebase:  a 20-commit `git rebase main` of the lane (hooks installed), inside vs outside
           (target <= 1.05x each);
  startup: `git lane exec KEY -- sh -c true` (and with --sandbox) over a bare `sh -c true`.

Both sides of status and rebase run the same driver under `git lane exec`, once with
--sandbox and once without, in interleaved rounds (ABBA order, a warm-up round first) so
drift and bursts of load on a shared machine hit both; the driver calls the real git by
its path (the shim's cost is bench/shims.py's). Each round gives one ratio of medians;
printed are the median ratio and the min (and max) over rounds. Start-up samples
interleave `sh -c true`, plain exec and exec --sandbox. Nothing is asserted.

    python bench/sandbox.py
    python bench/sandbox.py --runs 15 --rounds 20 --starts 60
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import hermetic_env, sh  # noqa: E402
from guard import sandbox  # noqa: E402

DRIVER = r"""
import json, os, subprocess, sys, time
git, what, runs, main, tip = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
gd = subprocess.run([git, "rev-parse", "--absolute-git-dir"], capture_output=True, text=True).stdout.strip()
out = []
for _ in range(runs):
    if what == "rebase":
        subprocess.run([git, "reset", "-q", "--hard", tip], check=True)
        try:
            os.unlink(os.path.join(gd, "CHERRY_PICK_HEAD"))
        except FileNotFoundError:
            pass
        argv = [git, "rebase", "-q", main]
    else:
        argv = [git, "status", "--porcelain"]
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out.append(time.perf_counter() - t)
subprocess.run([git, "reset", "-q", "--hard", tip], check=True)
print(json.dumps({"sandbox": os.environ.get("GITLANE_SANDBOX", ""), "times": out}))
"""


def lane_cmd(_env: dict[str, str]) -> list[str]:
    return [sys.executable, "-m", "guard"]


def setup(base: Path, env: dict[str, str], files: int, commits: int) -> tuple[Path, Path, str, str]:
    hub = base / "hub"
    hub.mkdir()
    sh(["git", "init", "-q", "-b", "main"], hub, env)
    for i in range(files):
        (hub / f"f{i:04d}.txt").write_text(f"file {i}\n")
    sh(["git", "add", "-A"], hub, env)
    sh(["git", "commit", "-q", "-m", "init"], hub, env)
    sh([*lane_cmd(env), "install"], hub, env)
    sh([*lane_cmd(env), "config", "set", "gate_command", "true"], hub, env)
    res = sh([*lane_cmd(env), "--json", "create", "work"], hub, env)
    lane = Path(json.loads(res.stdout)["lane"]["path"])
    for i in range(commits):
        (lane / f"lane{i:02d}.txt").write_text(f"lane {i}\n")
        sh(["git", "add", "-A"], lane, env)
        sh(["git", "commit", "-q", "-m", f"lane {i}"], lane, env)
    tip = sh(["git", "rev-parse", "HEAD"], lane, env).stdout.decode().strip()
    (hub / "moved.txt").write_text("main moved\n")
    sh(["git", "add", "moved.txt"], hub, env)
    sh(["git", "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "main moves"], hub, env)
    main = sh(["git", "rev-parse", "HEAD"], hub, env).stdout.decode().strip()
    return hub, lane, main, tip


def driver_times(
    lane: Path,
    env: dict[str, str],
    driver: Path,
    what: str,
    runs: int,
    main: str,
    tip: str,
    confined: bool,
) -> list[float]:
    real = os.path.realpath(shutil.which("git") or "git")
    flags = ["--sandbox"] if confined else []
    argv = [*lane_cmd(env), "exec", *flags, "work", "--", sys.executable, str(driver)]
    res = sh([*argv, real, what, str(runs), main, tip], lane, env)
    got = json.loads(res.stdout.decode().strip().splitlines()[-1])
    assert bool(got["sandbox"]) == confined, got
    return list(got["times"])


def ratios(pairs: list[tuple[float, float]]) -> str:
    """'median M ms vs N ms, ratio median R (min r, max x)' of (inside, outside) pairs: one
    ratio per round, so a burst of load on this shared machine spoils one ratio, not all."""
    rs = sorted(a / b for a, b in pairs)
    a = statistics.median(p[0] for p in pairs)
    b = statistics.median(p[1] for p in pairs)
    return (
        f"{a * 1000:8.1f} ms vs {b * 1000:8.1f} ms  ratio median {statistics.median(rs):.3f}x "
        f"(min {rs[0]:.3f}x, max {rs[-1]:.3f}x; {len(rs)} rounds)"
    )


def once(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--runs",
        type=int,
        default=9,
        help="per side and round: 3x this many statuses, this/3 (>= 3) rebases",
    )
    ap.add_argument("--rounds", type=int, default=12, help="interleaved rounds (after warm-up)")
    ap.add_argument("--starts", type=int, default=40, help="start-up samples per variant")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=20)
    args = ap.parse_args()
    abi = sandbox.abi()
    why = sandbox.usable(abi)
    if why:
        sys.exit(f"no sandbox here: {why}")
    base = Path(tempfile.mkdtemp(prefix="gitlane-bench-sandbox-"))
    try:
        env = hermetic_env(base)
        _hub, lane, main_sha, tip = setup(base, env, args.files, args.commits)
        driver = base / "driver.py"
        driver.write_text(DRIVER)
        print(f"Landlock ABI {abi}; lane with {args.files} files, {args.commits}-commit rebase")
        for what, runs in (("status", args.runs * 3), ("rebase", max(3, args.runs // 3))):
            pairs: list[tuple[float, float]] = []
            for r in range(args.rounds + 1):  # round 0 warms the caches up, not counted
                order = (True, False) if r % 2 else (False, True)  # ABBA: drift hits both
                got = {
                    c: statistics.median(
                        driver_times(lane, env, driver, what, runs, main_sha, tip, c)
                    )
                    for c in order
                }
                if r:
                    pairs.append((got[True], got[False]))
            print(f"{what:8} inside vs outside {ratios(pairs)}  (target <= 1.05x)")
        bare = ["sh", "-c", "true"]
        plain = [*lane_cmd(env), "exec", "work", "--", *bare]
        boxed = [*lane_cmd(env), "exec", "--sandbox", "work", "--", *bare]
        t: dict[str, list[float]] = {"bare": [], "plain": [], "boxed": []}
        for i in range(args.starts + 2):  # two warm-up rounds
            variants = [("bare", bare), ("plain", plain), ("boxed", boxed)]
            for name, argv in variants if i % 2 else reversed(variants):
                d = once(argv, lane, env)
                if i >= 2:
                    t[name].append(d)
        b, pl, bx = (statistics.median(t[k]) for k in ("bare", "plain", "boxed"))
        print(
            f"startup  sh -c true {b * 1000:.1f} ms; `git lane exec` {pl * 1000:.1f} ms "
            f"(+{(pl - b) * 1000:.1f} ms, min +{(min(t['plain']) - min(t['bare'])) * 1000:.1f}); "
            f"--sandbox {bx * 1000:.1f} ms"
        )
        print(
            f"         --sandbox over plain exec: median {(bx - pl) * 1000:+.1f} ms "
            f"({bx / pl:.3f}x), min {(min(t['boxed']) - min(t['plain'])) * 1000:+.1f} ms "
            f"({args.starts} interleaved samples each)"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
