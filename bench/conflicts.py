"""Benchmark `git lane conflicts` against the same merges run by hand, in one run.

Builds a repository of --files files (default 20,000) with --lanes lanes (default 20, so
190 lane pairs and 20 lane/main pairs): each lane commits edits to a few files, some
shared with other lanes on the same line (conflicts), some on other lines (clean
overlaps); a few lanes have uncommitted edits; main moves once. Then times

  conflicts: `python -m guard conflicts --json` in the hub (a whole process, import included);
  floor:     the same merges by hand, one after another: for every pair the command
             reported, `git merge-tree --write-tree --name-only --messages -z A B`;

and prints best and median of --runs runs of each and the ratio (target < 10 s and
<= 1.2x the floor). The command answers the same merges with `merge-tree --stdin`, one
process per core, so it is expected well under the floor.

It also measures what pruning by changed paths would cost: the per-lane path sets
(`git diff --name-only main...LANE`, one per lane, the least any pruning needs) against
all the merges in one `merge-tree --stdin`, and how many pairs share no path (the ones
pruning could skip). And `conflicts --include-dirty` (a temporary index per lane).

    python bench/conflicts.py                    # the full size, a minute or two to set up
    python bench/conflicts.py --files 2000 --lanes 6 --runs 3
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
sys.path.insert(0, str(ROOT / "bench"))

from benchlib import hermetic_env, sh  # noqa: E402

TARGET_RATIO = 1.2
TARGET_SECONDS = 10.0


def edit(path: Path, rel: str, line: int, text: str) -> None:
    f = path / rel
    lines = f.read_text().splitlines(keepends=True)
    lines[line] = text + "\n"
    f.write_text("".join(lines))


def build(base: Path, env: dict[str, str], files: int, lanes: int) -> tuple[Path, list[str]]:
    hub = base / "hub"
    hub.mkdir()
    sh(["git", "init", "-q", "-b", "main"], hub, env)
    per_dir = 100
    for i in range(files):
        d = hub / f"pkg{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir()
        body = "".join(f"line {j} of file {i}\n" for j in range(12))
        (d / f"mod{i % per_dir:03d}.py").write_text(body)
    sh(["git", "add", "-A"], hub, env)
    sh(["git", "commit", "-q", "-m", "init"], hub, env)
    lane = [sys.executable, "-m", "guard"]
    sh([*lane, "config", "set", "max_lanes", str(lanes + 5)], hub, env)
    ndirs = max(1, files // per_dir)
    keys = []
    for n in range(lanes):
        key = f"lane-{n:02d}"
        out = sh([*lane, "create", key, "--json"], hub, env).stdout.decode()
        path = Path(json.loads(out)["lane"]["path"])
        keys.append(key)
        # own files, a file shared with the lane before (same line every 4th lane: a
        # conflict; else another line: a clean overlap), and one file main also changes
        for k in range(3):
            edit(path, f"pkg{(n * 7 + k * 13) % ndirs:04d}/mod{n % 50:03d}.py", 2, f"lane {n}")
        shared = f"pkg{(n // 2) % ndirs:04d}/mod099.py"
        edit(path, shared, 4 if n % 4 == 0 else 4 + n % 6, f"shared by lane {n}")
        if n % 5 == 0:
            edit(path, "pkg0000/mod098.py", 1, f"lane {n} against main")
        sh(["git", "commit", "-q", "-am", f"work in {key}"], path, env)
        if n % 6 == 1:  # uncommitted work too
            edit(path, "pkg0000/mod097.py", 3, f"dirty in {key}")
            (path / f"untracked-{n}.txt").write_text("new\n")
    edit(hub, "pkg0000/mod098.py", 1, "main moved")
    sh(["git", "commit", "-q", "-am", "main moves"], hub, env)
    return hub, keys


def run_conflicts(hub: Path, env: dict[str, str], *extra: str) -> tuple[float, dict[str, object]]:
    t = time.perf_counter()
    out = sh([sys.executable, "-m", "guard", "conflicts", "--json", *extra], hub, env).stdout
    return time.perf_counter() - t, json.loads(out)


MERGE = ["git", "merge-tree", "--write-tree", "--name-only", "--messages", "-z"]


def hand_floor(hub: Path, env: dict[str, str], pairs: list[tuple[str, str]]) -> float:
    t = time.perf_counter()
    for a, b in pairs:
        res = sh([*MERGE, a, b], hub, env, check=False)
        if res.returncode not in (0, 1):
            sys.exit(f"merge-tree {a} {b} failed: {res.stderr.decode(errors='replace')}")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--lanes", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the benchmark repository")
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="git-lane-bench-"))
    try:
        env = hermetic_env(base)
        t0 = time.perf_counter()
        hub, keys = build(base, env, args.files, args.lanes)
        print(f"setup: {args.files} files, {len(keys)} lanes in {time.perf_counter() - t0:.1f} s")

        _t, res = run_conflicts(hub, env)  # warm the page cache
        lanes = {v["key"]: v["merged"] for v in res["lanes"]}  # type: ignore[attr-defined]
        main_sha = res["main"]["sha"]  # type: ignore[index]
        pairs = [
            (main_sha if p["main"] else lanes[p["lanes"][0]], lanes[p["lanes"][1]])
            for p in res["pairs"]  # type: ignore[attr-defined]
        ]
        c = res["counts"]
        print(
            f"pairs: {c['pairs']} ({c['conflict']} conflict, {c['overlap']} overlap, "  # type: ignore[index]
            f"{c['clean']} clean)"  # type: ignore[index]
        )
        hand_floor(hub, env, pairs)
        cmd_t, floor_t = [], []
        for _ in range(args.runs):  # interleaved, so drift hits both alike
            floor_t.append(hand_floor(hub, env, pairs))
            cmd_t.append(run_conflicts(hub, env)[0])
        cb, cm = min(cmd_t), statistics.median(cmd_t)
        fb, fm = min(floor_t), statistics.median(floor_t)
        print(f"\n{'':10}{'best':>9}{'median':>9}   ({args.runs} runs)")
        print(
            f"{'conflicts':10}{cb * 1000:7.0f}ms{cm * 1000:7.0f}ms   python -m guard conflicts --json"
        )
        print(
            f"{'floor':10}{fb * 1000:7.0f}ms{fm * 1000:7.0f}ms   "
            f"{len(pairs)} x git merge-tree --write-tree, one after another"
        )
        ratio = cb / fb
        ok = ratio <= TARGET_RATIO and cb < TARGET_SECONDS
        print(
            f"ratio (best): {ratio:.2f}x   median: {cm / fm:.2f}x   "
            f"target < {TARGET_SECONDS:.0f} s and <= {TARGET_RATIO}x: {'ok' if ok else 'OVER'}"
        )

        # pruning: what the path sets cost against the merges they could spare
        t = time.perf_counter()
        own = {}
        for k, sha in lanes.items():
            out = sh(["git", "diff", "--name-only", "-z", f"{main_sha}...{sha}"], hub, env).stdout
            own[k] = {p for p in out.decode().split("\0") if p}
        sets_t = time.perf_counter() - t
        ks = sorted(own)
        disjoint = sum(1 for i, a in enumerate(ks) for b in ks[i + 1 :] if not own[a] & own[b])
        batch_in = "".join(f"{a} {b}\n" for a, b in pairs).encode()
        t = time.perf_counter()
        import subprocess

        subprocess.run([*MERGE, "--stdin"], cwd=hub, env=env, input=batch_in, capture_output=True)
        batch_t = time.perf_counter() - t
        print(
            f"\npruning: the path sets ({len(ks)} x git diff A...B) take {sets_t * 1000:.0f} ms; "
            f"all {len(pairs)} merges in one merge-tree --stdin take {batch_t * 1000:.0f} ms; "
            f"{disjoint} of {len(ks) * (len(ks) - 1) // 2} lane pairs share no path "
            "(all that pruning could skip, were it exact)"
        )
        dirty_t = min(run_conflicts(hub, env, "--include-dirty")[0] for _ in range(args.runs))
        print(f"conflicts --include-dirty: {dirty_t * 1000:.0f} ms (best of {args.runs})")
        if args.files < 20_000 or args.lanes < 20:
            print("(a reduced size: the targets are for 20k files / 20 lanes)")
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
