"""Benchmark a land's extra cost for a sandboxed lane's private object store.

  land:  `git lane land` of a lane whose COMMITS commits were made inside
         `git lane exec --sandbox` (objects in the lane's own store: land re-hashes them
         into the shared store with `index-pack --strict` and checks the tip complete
         there alone) vs the same land of a lane whose commits were made outside
         (objects already shared; no lane store in the repository: nothing to import).

Each round makes one fresh lane per side in its own repository (a land moves main) and
times the land alone (gate "true"); the sides alternate so drift hits both. Figures are
medians of wall time. Nothing is asserted: it prints the ratio. The 20-commit rebase
inside the sandbox vs outside (which now writes into the private store) is
bench/sandbox.py's `rebase` line.

    python bench/objects.py
    python bench/objects.py --rounds 9 --commits 50
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import hermetic_env, sh  # noqa: E402
from guard import sandbox  # noqa: E402

COMMITS = r"""
set -e
n=$1 key=$2
i=0
while [ "$i" -lt "$n" ]; do
	printf 'lane %s %s\n' "$key" "$i" > "$key-$i.txt"
	git add "$key-$i.txt"
	git commit -q -m "$key $i"
	i=$((i + 1))
done
"""


def lane_cmd() -> list[str]:
    return [sys.executable, "-m", "guard"]


def setup(base: Path, env: dict[str, str], files: int) -> Path:
    hub = base
    hub.mkdir()
    sh(["git", "init", "-q", "-b", "main"], hub, env)
    for i in range(files):
        (hub / f"f{i:04d}.txt").write_text(f"file {i}\n")
    sh(["git", "add", "-A"], hub, env)
    sh(["git", "commit", "-q", "-m", "init"], hub, env)
    sh([*lane_cmd(), "install"], hub, env)
    sh([*lane_cmd(), "config", "set", "gate_command", "true"], hub, env)
    sh([*lane_cmd(), "config", "set", "max_lanes", "100"], hub, env)
    return hub


def one_land(
    hub: Path, env: dict[str, str], key: str, script: Path, commits: int, confined: bool
) -> float:
    sh([*lane_cmd(), "create", key], hub, env)
    flags = ["--sandbox"] if confined else []
    sh([*lane_cmd(), "exec", *flags, key, "--", "sh", str(script), str(commits), key], hub, env)
    t = time.perf_counter()
    res = sh([*lane_cmd(), "--json", "land", key], hub, env)
    took = time.perf_counter() - t
    assert json.loads(res.stdout)["code"] == "landed", res.stdout
    sh([*lane_cmd(), "release", key], hub, env)
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=20)
    args = ap.parse_args()
    why = sandbox.usable(sandbox.abi())
    if why:
        sys.exit(f"no sandbox here: {why}")
    base = Path(tempfile.mkdtemp(prefix="gitlane-bench-objects-"))
    try:
        env = hermetic_env(base)
        script = base / "commits.sh"
        script.write_text(COMMITS)
        private = setup(base / "private", env, args.files)
        shared = setup(base / "shared", env, args.files)
        inside: list[float] = []
        outside: list[float] = []
        for r in range(args.rounds):
            outside.append(one_land(shared, env, f"s{r}", script, args.commits, False))
            inside.append(one_land(private, env, f"p{r}", script, args.commits, True))
        a, b = statistics.median(inside), statistics.median(outside)
        print(
            f"land     private store {a * 1000:8.1f} ms  shared store {b * 1000:8.1f} ms  "
            f"ratio {a / b:.3f}x  (+{(a - b) * 1000:.1f} ms; {args.commits} commits, "
            f"{args.files} files, {args.rounds} rounds)"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
