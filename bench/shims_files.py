"""Benchmark the write/edit shims and `git lane check write` against floors measured in the same run.

  write:  `write PATH` of a 1 MB file through the shim in a bound lane (path checks,
          freshness from git, temp file + fsync + rename) against `cat > PATH` (printed,
          no target);
  check:  `git lane check write PATH` in a bound lane, the adapter's cost per tool call
          (target < 50 ms): as `git lane ...` (git finding git-lane on PATH), as the
          console script itself, the floor of starting that Python (`-c pass`), and
          `write --check PATH`, the same answer through the shim (no site-packages).

Runs alternate between the sides of each pair so drift hits both; figures are medians of
--runs runs. Nothing is asserted: it prints.

    python bench/shims_files.py
    python bench/shims_files.py --runs 21 --only write
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import bound_env, hermetic_env, sh  # noqa: E402
from guard.commands import create as create_cmd  # noqa: E402
from guard.repo import Repo  # noqa: E402


def timed(argv: list[str], cwd: Path, env: dict[str, str], stdin: Path | None = None) -> float:
    with open(stdin or os.devnull, "rb") as f:
        t = time.perf_counter()
        res = subprocess.run(argv, cwd=cwd, env=env, stdin=f, capture_output=True)
        took = time.perf_counter() - t
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{res.stderr.decode(errors='replace')}")
    return took


def medians(sides: dict[str, Callable[[], float]], runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(runs):
        for k, f in sides.items():
            times[k].append(f())
    return {k: statistics.median(v) for k, v in times.items()}


def bound_lane(base: Path) -> tuple[Path, dict[str, str]]:
    """A repository with lane `bench`, and the environment `git lane exec bench` gives."""
    base.mkdir()
    env = hermetic_env(base)
    hub = base / "hub"
    hub.mkdir()
    sh(["git", "init", "-q", "-b", "main"], hub, env)
    (hub / "README.md").write_text("bench\n")
    sh(["git", "add", "-A"], hub, env)
    sh(["git", "commit", "-q", "-m", "init"], hub, env)
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the lane lives under the bench's XDG_CACHE_HOME
    try:
        lane = Path(os.path.realpath(create_cmd.run(Repo.discover(hub), "bench")["lane"]["path"]))
    finally:
        os.environ.clear()
        os.environ.update(old)
    git = os.path.realpath(shutil.which("git") or "/usr/bin/git")
    env = bound_env(env, "bench", lane, hub / ".git", git)
    return lane, env


def bench_write(base: Path, runs: int) -> None:
    """`write` of a 1 MB file through the shim vs `cat > file` (printed)."""
    lane, env = bound_lane(base / "write")
    data = base / "one-mb.bin"
    data.write_bytes(os.urandom(1 << 20))
    m = medians(
        {
            "write": lambda: timed(["write", "big.bin"], lane, env, data),
            "cat": lambda: timed(["sh", "-c", "cat > big-cat.bin"], lane, env, data),
        },
        runs,
    )
    assert (lane / "big.bin").read_bytes() == data.read_bytes()
    print(
        f"write    write 1 MB {m['write'] * 1000:8.1f} ms   cat > file {m['cat'] * 1000:8.1f} ms   "
        f"ratio {m['write'] / m['cat']:5.2f}x (printed; write adds fsync and the lane checks)"
    )


def bench_check(base: Path, runs: int) -> None:
    """`git lane check write PATH` in a bound lane: ms per call (target < 50 ms)."""
    lane, env = bound_lane(base / "check")
    script = Path(sys.executable).parent / "git-lane"
    # an install made before guard.entry was the console script would measure click
    fast = script.exists() and "guard.entry" in script.read_text(errors="replace")
    entry = [str(script)] if fast else [sys.executable, "-m", "guard"]
    sides = {
        "git lane": lambda: timed(["git", "lane", "check", "write", "src/a.py"], lane, env),
        "script": lambda: timed([*entry, "check", "write", "src/a.py"], lane, env),
        "python": lambda: timed([sys.executable, "-c", "pass"], lane, env),
        "shim": lambda: timed(["write", "--check", "src/a.py"], lane, env),
    }
    m = medians(sides, runs)
    ours = m["script"]
    verdict = "ok" if ours < 0.050 else "OVER TARGET"
    print(
        f"check    git lane check write {m['git lane'] * 1000:6.1f} ms   "
        f"{' '.join(Path(a).name for a in entry)} check write {ours * 1000:6.1f} ms (target < 50 ms: {verdict})   "
        f"python -c pass {m['python'] * 1000:6.1f} ms   "
        f"above interpreter start {(ours - m['python']) * 1000:6.1f} ms"
    )
    shim = m["shim"]
    print(
        f"check    write --check (the same answer through the shim, python -I -S) "
        f"{shim * 1000:6.1f} ms ({'ok' if shim < 0.050 else 'OVER TARGET'})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--only", choices=["write", "check"], default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitlane-bench-shims-") as tmp:
        base = Path(tmp)
        if args.only in (None, "write"):
            bench_write(base, args.runs)
        if args.only in (None, "check"):
            bench_check(base, args.runs)


if __name__ == "__main__":
    main()
