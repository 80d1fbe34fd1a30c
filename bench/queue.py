#!/usr/bin/env python3
"""Benchmark `git lane queue` against landing the same lanes one by one, in one run.

Each round makes a fresh repository with N lanes (one commit each, all off the same main,
so every lane but the first is stale when its turn comes) and marks them ready. Then:

  one by one   `git lane sync KEY` + `git lane land KEY` for each lane (2N processes)
  queue        `git lane queue` (one process)
  batch        `git lane queue --batch B`

first with the gate off (the cost of the machinery), then with a gate that sleeps
(`--gate-seconds`, 2 s): gate runs and wall time against one by one.

    python3 bench/queue.py [--lanes 10] [--batch 5] [--gate-seconds 2] [--files 2000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import hermetic_env, sh


class Round:
    def __init__(self, root: Path, lanes: int, files: int, gate: str | None) -> None:
        self.hub = root / "hub"
        self.hub.mkdir(parents=True)
        self.env = hermetic_env(root)
        self.keys = [f"l{i:02d}" for i in range(lanes)]
        self.git("init", "-q", "-b", "main")
        for i in range(files):
            d = self.hub / f"d{i % 50}"
            d.mkdir(exist_ok=True)
            (d / f"f{i}.txt").write_text(f"{i}\n")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "init")
        self.lane("install")
        self.lane("config", "set", "max_lanes", str(lanes + 1))
        if gate is None:
            self.lane("config", "set", "gate", "off")
        else:
            self.lane("config", "set", "gate_command", gate)
        for k in self.keys:
            path = Path(str(self.lane("create", k)["lane"]["path"]))  # type: ignore[index]
            (path / f"{k}.txt").write_text(f"{k}\n")
            self.git("add", "-A", cwd=path)
            self.git("commit", "-q", "-m", f"lane {k}", cwd=path)
            self.lane("ready", k)

    def git(self, *args: str, cwd: Path | None = None) -> None:
        sh(["git", *args], cwd or self.hub, self.env)

    def lane(self, *args: str) -> dict[str, object]:
        res = sh([sys.executable, "-m", "guard", *args, "--json"], self.hub, self.env)
        out: dict[str, object] = json.loads(res.stdout)
        return out

    def one_by_one(self) -> tuple[float, int]:
        t = time.perf_counter()
        runs = 0
        for k in self.keys:
            self.lane("sync", k)
            res = self.lane("land", k)
            runs += res["gate"]["status"] != "off"  # type: ignore[index]
        return time.perf_counter() - t, runs

    def queue(self, batch: int) -> tuple[float, int, int]:
        t = time.perf_counter()
        res = self.lane("queue", "--batch", str(batch))
        took = time.perf_counter() - t
        if len(res["landed"]) != len(self.keys):  # type: ignore[arg-type]
            sys.exit(f"the queue did not land every lane: {json.dumps(res)[:2000]}")
        return took, int(res["gate_runs"]), int(res["gate_runs_saved"])  # type: ignore[call-overload]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lanes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=5)
    ap.add_argument("--gate-seconds", type=float, default=2.0)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--keep", action="store_true", help="leave the repositories behind")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="git-lane-bench-queue-"))
    n = 0

    def fresh(gate: str | None) -> Round:
        nonlocal n
        n += 1
        return Round(root / f"r{n}", a.lanes, a.files, gate)

    try:
        print(f"{a.lanes} ready lanes, {a.files} files, one commit each, all off the same main")
        base, _ = fresh(None).one_by_one()
        q, _, _ = fresh(None).queue(1)
        print(f"gate off   one by one (sync + land) {base:6.2f} s")
        print(f"gate off   queue                    {q:6.2f} s   ratio {q / base:.2f}x")
        gate = f"sleep {a.gate_seconds}"
        base, runs = fresh(gate).one_by_one()
        q, qruns, _ = fresh(gate).queue(1)
        b, bruns, saved = fresh(gate).queue(a.batch)
        print(
            f"gate {a.gate_seconds:g} s  one by one (sync + land) {base:6.2f} s   {runs} gate runs"
        )
        print(
            f"gate {a.gate_seconds:g} s  queue                    {q:6.2f} s   {qruns} gate runs   ratio {q / base:.2f}x"
        )
        print(
            f"gate {a.gate_seconds:g} s  queue --batch {a.batch:<2}         {b:6.2f} s   {bruns} gate runs "
            f"({saved} saved)   ratio {b / base:.2f}x"
        )
    finally:
        if a.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
