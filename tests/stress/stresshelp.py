"""Helpers of the stress tests: many real `git lane` processes at once, each outcome held
to the CLI contract (exit 0 with a result, or exit 1 with a registered refusal code; never
exit 3, never a traceback), and the repository invariants every round must keep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import Repo, git
from enginehelp import assert_linear, epoch, events, is_ancestor, landing_file, owner_file

from guard.errors import CODES


@dataclass
class Outcome:
    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def json(self) -> dict[str, Any]:
        return dict(json.loads(self.stdout))

    @property
    def code(self) -> str:
        return str(self.json["code"])


def lane_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "guard", *args]


def start_at(t0: float, argv: list[str], cwd: Path | str) -> Outcome:
    """Run argv once the clock reaches t0 (so every thread's process starts together)."""
    while (d := t0 - time.monotonic()) > 0:
        time.sleep(min(d, 0.005))
    s = time.monotonic()
    p = subprocess.run(
        argv, cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=300
    )
    return Outcome(tuple(argv[3:]), p.returncode, p.stdout, p.stderr, time.monotonic() - s)


Job = list[list[str]]  # commands run one after the other (a sync, then its land)


def run_together(
    jobs: dict[str, Job],
    cwd: Path | str,
    retry: dict[str, frozenset[str]] | None = None,
    tries: int = 20,
) -> dict[str, list[Outcome]]:
    """Each job on its own thread, all starting at the same moment; a job's later command
    runs only when the one before it succeeded. A command of job J refused with a code in
    `retry[J]` is run again after a pause (what an agent does with a retryable code), `tries` times."""
    out: dict[str, list[Outcome]] = {k: [] for k in jobs}
    errors: list[BaseException] = []
    t0 = time.monotonic() + 0.05

    def one(name: str, job: Job) -> None:
        again = (retry or {}).get(name, frozenset())
        try:
            for i, argv in enumerate(job):
                o = start_at(t0 if i == 0 else 0.0, argv, cwd)
                out[name].append(o)
                for _ in range(tries):
                    if o.rc != 1 or "Traceback" in o.stderr or o.code not in again:
                        break
                    time.sleep(0.25)
                    o = start_at(0.0, argv, cwd)
                    out[name].append(o)
                if o.rc != 0:
                    return
        except BaseException as exc:  # said in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(k, j)) for k, j in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors
    return out


@dataclass
class Tally:
    """Every outcome's code, counted per command, for the report."""

    codes: Counter[tuple[str, str]] = field(default_factory=Counter)

    def check(self, o: Outcome) -> None:
        assert_contract(o)
        self.codes[(o.argv[0], o.code)] += 1

    def __str__(self) -> str:
        return ", ".join(f"{c}:{k}={n}" for (c, k), n in sorted(self.codes.items()))


def assert_contract(o: Outcome) -> None:
    """Exit 0 (a result) or 1 (a refusal with a registered code), one JSON object, no
    traceback: never exit 3, never a bug."""
    what = f"git lane {' '.join(o.argv)} -> {o.rc}\n{o.stdout}\n{o.stderr}"
    assert "Traceback" not in o.stderr, what
    assert o.rc in (0, 1), what
    doc = o.json
    assert isinstance(doc, dict) and isinstance(doc.get("code"), str), what
    if o.rc == 1:
        assert doc["ok"] is False and doc["code"] in CODES, what
    else:
        assert doc["ok"] is True, what


def assert_invariants(repo: Repo, landed_tips: list[str], expected_lanes: set[str]) -> None:
    """What every round must leave: main linear; every landed tip on main; epoch = lands
    = land events (the same tips); no lock, owner record or landing left; every lane
    created and not released still registered and active."""
    assert_linear(repo)
    for tip in landed_tips:
        assert is_ancestor(repo.path, tip, "refs/heads/main"), tip
    lands = [e for e in events(repo, "land") if e.get("code") == "landed"]
    assert sorted(e["main_after"] for e in lands) == sorted(landed_tips)
    assert epoch(repo) == len(landed_tips)
    assert not owner_file(repo).exists()
    assert not landing_file(repo).exists()
    st = repo.jlane("status")
    assert st.rc == 0, st.stdout + st.stderr
    doc = st.json
    assert doc["lock"] is None and doc["epoch"] == len(landed_tips)
    assert doc.get("landing") in (False, None)
    active = {ln["key"] for ln in doc["lanes"] if ln["state"] == "active"}
    assert active == expected_lanes, (sorted(active ^ expected_lanes), doc["lanes"])


def tip(repo: Repo, key: str) -> str:
    return git(repo.path, "rev-parse", f"refs/heads/lane/{key}").stdout.strip()
