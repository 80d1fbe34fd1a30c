"""bench/large.py runs end to end at a small size and prints every figure it promises, so CI
proves the bench works; the real figures (100k files, 30 lanes) are in bench/README.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow

# every figure the bench reports: a ratio against its floor, or a measured value
RATIOS = (
    "status",
    "status --json",
    "conflicts",
    "hook rebase",
    "hook lane commit",
    "hook lane (floor)",
    "hook hub ref",
    "shim status bound",
    "shim status unbound",
    "shim write",
    "create",
    "land gate off",
    "land gate true",
)
VALUES = (
    "conflicts pairs",
    "hook lane vs exit0",
    "hook main refused",
    "create include",
    "disk per lane",
    "disk shared",
)


def test_large_bench_quick_mode_prints_every_figure(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "large.py"),
            "--files",
            "1500",
            "--lanes",
            "3",
            "--rounds",
            "1",
            "--commits",
            "3",
            "--dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()

    def line_of(name: str) -> str:
        found = [ln for ln in lines if ln[:19].rstrip() == name]
        assert len(found) == 1, (name, res.stdout)
        return found[0]

    for name in RATIOS:
        assert re.search(r"ratio +\d+\.\d\dx", line_of(name)), (name, res.stdout)
    assert re.search(r"\d+ pairs \(\d+ conflict", line_of("conflicts pairs"))
    # 3 lanes: 3 lane pairs and 3 with main
    assert re.search(r"^conflicts pairs +6 pairs", line_of("conflicts pairs"))
    assert re.search(r"refused by our hooks in \d+\.\d ms", line_of("hook main refused"))
    assert re.search(
        r"\(\d+ files, \d+ bytes\): \d+\.\d ms, of which the copies \d+\.\d ms",
        line_of("create include"),
    )
    m = re.search(
        r"([\d.]+) MiB: worktree ([\d.]+) MiB \+ admin dir ([\d.]+) MiB", line_of("disk per lane")
    )
    assert m and float(m[2]) > 0 and float(m[3]) > 0, line_of("disk per lane")
    assert re.search(r"objects [\d.]+ MiB shared", line_of("disk shared"))
    # the include bench copied what .worktreeinclude names (41 = .env + cache/*)
    assert "(41 files," in line_of("create include")
