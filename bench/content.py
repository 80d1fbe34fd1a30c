"""Land's added cost of the content check before an in-lane gate (red team 16B F1): the
lane side of land's parallel reads as it was (G2's status and G4's hidden check) against
the same with git.content_differs beside it, and the content check alone. Read-only on
the repository named (a committed, clean worktree), made first when the path does not
exist: 100,000 files of 20 short lines in 5,000 directories, 411 MB, one commit.

    python3 bench/content.py /tmp/hash100k [ROUNDS]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from guard import git


def make(repo: str) -> None:
    """The bench's repository: 100,000 files in 5,000 directories, committed."""
    import subprocess

    os.makedirs(repo)
    for d in range(5000):
        where = os.path.join(repo, f"d{d // 100}", f"s{d}")
        os.makedirs(where, exist_ok=True)
        for i in range(20):
            with open(os.path.join(where, f"f{i}.py"), "w") as f:
                f.write(f"line {d} {i}\n" * 20)
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    for argv in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-q", "-m", "bench"]):
        subprocess.run(["git", *argv], cwd=repo, check=True)


def main() -> None:
    repo = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    if not os.path.exists(repo):
        make(repo)
    tip = git.run(["rev-parse", "HEAD"], repo).stdout.strip()
    common = git.run(["rev-parse", "--path-format=absolute", "--git-common-dir"], repo)
    common_dir = common.stdout.strip()
    tmp = tempfile.mkdtemp()
    try:

        def before() -> object:
            return git.dirty_and_hidden(repo, tip)

        def alone() -> object:
            return git.content_differs(repo, tip, tmp, common_dir)

        def after() -> object:
            return git.both(before, alone)

        assert git.content_differs(repo, tip, tmp, common_dir) == git.Content([]), (
            "the worktree is not the tip"
        )
        runs: dict[str, Callable[[], object]] = {"before": before, "after": after, "alone": alone}
        t: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(rounds):  # alternated: the same load for each
            for name, fn in runs.items():
                s = time.perf_counter()
                fn()
                t[name].append(time.perf_counter() - s)
        m = {k: statistics.median(v) * 1000 for k, v in t.items()}
        print(
            f"lane side before {m['before']:.0f} ms, with the content check beside it "
            f"{m['after']:.0f} ms (+{m['after'] - m['before']:.0f} ms); the content check "
            f"alone {m['alone']:.0f} ms; {rounds} rounds, medians"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
