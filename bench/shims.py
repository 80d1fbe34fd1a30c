"""Benchmark the git shim against floors measured in the same run.

  status:   `git status` in a lane through shims/git, bound (GITLANE_LANE and the rest
            of the binding set as `git lane exec` sets them) and unbound, against a
            shim that is only `exec git "$@"` (target <= 1.10x each);
  commit:   a one-file `git commit` in a bound lane (our hooks installed) through
            shims/git, against the same commit run with the real git directly
            (target <= 1.3x).

Runs alternate between the two sides of each pair so drift hits both; the figures are
medians of --runs runs of wall time, and beside them the mean CPU time (user + system)
the runs' processes used, which a busy machine disturbs less. Nothing is asserted: it
prints the ratios.

  write, check: bench/shims_files.py (run after the above, or alone): `write` of a 1 MB
            file against `cat > file`, and `git lane check write PATH` in ms (target < 50 ms).

    python bench/shims.py
    python bench/shims.py --runs 41
"""

from __future__ import annotations

import argparse
import os
import resource
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

from benchlib import hermetic_env, sh, turns  # noqa: E402
from guard.commands import create as create_cmd  # noqa: E402
from guard.commands import install as hookinstall  # noqa: E402
from guard.repo import Repo  # noqa: E402

SHIM = ROOT / "shims" / "git"


def make_lane(base: Path, env: dict[str, str], files: int) -> tuple[Path, Path]:
    hub = base / "hub"
    hub.mkdir()
    sh(["git", "init", "-q", "-b", "main"], hub, env)
    for i in range(files):
        (hub / f"f{i:04d}.txt").write_text(f"file {i}\n")
    sh(["git", "add", "-A"], hub, env)
    sh(["git", "commit", "-q", "-m", "init"], hub, env)
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # lanes live under the bench's XDG_CACHE_HOME
    try:
        hookinstall.run(Repo.discover(hub))
        lane = Path(create_cmd.run(Repo.discover(hub), "work")["lane"]["path"])
    finally:
        os.environ.clear()
        os.environ.update(old)
    return hub, lane


def bound_env(base: Path, env: dict[str, str], lane: Path, real: str) -> dict[str, str]:
    """The environment `git lane exec work -- CMD` gives CMD, started through git as a
    user starts it (git sets GIT_EXEC_PATH and puts its own directory on PATH for an
    external command; a binding built by hand once hid that every bound call went to
    the shim's Python)."""
    bindir = base / "bin"
    bindir.mkdir()
    (bindir / "git-lane").write_text(
        f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m guard "$@"\n'
    )
    (bindir / "git-lane").chmod(0o755)
    e = dict(env, PATH=f"{bindir}{os.pathsep}{env['PATH']}")
    out = sh([real, "lane", "exec", "work", "--", "env", "-0"], lane, e).stdout
    pairs = [x.split("=", 1) for x in out.decode("utf-8", "surrogateescape").split("\0")]
    return {p[0]: p[1] for p in pairs if len(p) == 2}


Timing = tuple[float, float]  # wall, CPU of the children


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> Callable[[], Timing]:
    def one() -> Timing:
        c = _cpu()
        t = time.perf_counter()
        res = subprocess.run(
            argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        took = time.perf_counter() - t
        if res.returncode != 0:
            sys.exit(f"failed: {argv}\n{res.stderr.decode(errors='replace')}")
        return took, _cpu() - c

    return one


def compare(a: Callable[[], Timing], b: Callable[[], Timing], runs: int) -> tuple[Timing, Timing]:
    xs, ys = turns(a, b, runs)

    def summary(v: list[Timing]) -> Timing:
        return statistics.median(w for w, _ in v), statistics.mean(c for _, c in v)

    return summary(xs), summary(ys)


def report(name: str, ours: Timing, floor: Timing, target: float, what: tuple[str, str]) -> None:
    ratio = ours[0] / floor[0]
    verdict = "  ok" if ratio <= target else "  OVER TARGET"
    print(
        f"{name:<15} {what[0]} {ours[0] * 1000:6.2f} ms  {what[1]} {floor[0] * 1000:6.2f} ms  "
        f"ratio {ratio:4.2f}x (target <= {target:.2f}x){verdict}  "
        f"cpu {ours[1] * 1000:5.2f}/{floor[1] * 1000:5.2f} ms = {ours[1] / floor[1]:4.2f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=61)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="leave the repository behind")
    ns = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="shimbench-"))
    env = hermetic_env(base)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    real = os.path.realpath(shutil.which("git", path=env["PATH"]) or "/usr/bin/git")
    try:
        _hub, lane = make_lane(base, env, ns.files)
        floor_dir = base / "floor-shim"
        floor_dir.mkdir()
        floor = floor_dir / "git"
        floor.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
        floor.chmod(0o755)
        bound = bound_env(base, env, lane, real)
        print(
            f"git {sh([real, '--version'], base, env).stdout.decode().split()[-1]}, "
            f"/bin/sh -> {os.path.realpath('/bin/sh')}, {os.cpu_count()} cpu(s), "
            f"{ns.files} files, median of {ns.runs} runs"
        )
        status_floor = timed([str(floor), "status"], lane, bound)
        a, b = compare(timed([str(SHIM), "status"], lane, bound), status_floor, ns.runs)
        report("status bound", a, b, 1.10, ("shims/git", "exec-only shim"))
        unbound = {k: v for k, v in env.items()}
        unbound["PATH"] = f"{SHIM.parent}{os.pathsep}{env['PATH']}"
        a, b = compare(
            timed([str(SHIM), "status"], lane, unbound),
            timed([str(floor), "status"], lane, unbound),
            ns.runs,
        )
        report("status unbound", a, b, 1.10, ("shims/git", "exec-only shim"))

        counter = [0]

        def commit_with(git: str) -> Callable[[], Timing]:
            def one() -> Timing:
                counter[0] += 1
                (lane / "f0001.txt").write_text(f"edit {counter[0]}\n")
                sh([real, "add", "f0001.txt"], lane, env)  # not timed
                return timed([git, "commit", "-q", "-m", f"edit {counter[0]}"], lane, bound)()

            return one

        a, b = compare(commit_with(str(SHIM)), commit_with(real), ns.runs)
        report("commit bound", a, b, 1.30, ("shims/git", "real git"))
        from shims_files import bench_check, bench_write

        bench_write(base, min(ns.runs, 11))
        bench_check(base, min(ns.runs, 11))
    finally:
        if ns.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
