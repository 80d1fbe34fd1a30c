"""A lane any `git lane exec` ever ran in gates in a clean worktree of the tip: what its
processes left in files the tip ignores (a forged `__pycache__/*.pyc`, a flag file), or
still run after exec ended, an in-lane gate would read. The lane record remembers the exec
(`exec_seen`); a record that cannot say (an older git-lane's) counts as exec'd."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from conftest import Repo, git

GOOD = "def add(a, b):\n    return a + b\n"
BROKEN = "def add(a, b):\n    return a - b\n"  # the same size as GOOD
GATE = shlex.join([sys.executable, "-c", "import calc, sys; sys.exit(calc.add(2, 2) != 4)"])

# What the "agent" does under exec: commits a broken calc.py, then plants the bytecode of
# the good one where Python looks first, its header naming the broken source's mtime and
# size, so an import in the lane runs the good code (PEP 552 timestamp pycs: magic, flags
# 0, mtime, size; a `__pycache__` the tip's .gitignore ignores).
PLANT_PYC = f"""
import importlib.util, marshal, os, subprocess, sys
open("calc.py", "w").write({BROKEN!r})
subprocess.run(["git", "commit", "-q", "-am", "calc: subtract"], check=True)
st = os.stat("calc.py")
code = compile({GOOD!r}, os.path.abspath("calc.py"), "exec")
os.makedirs("__pycache__", exist_ok=True)
name = os.path.join("__pycache__", f"calc.{{sys.implementation.cache_tag}}.pyc")
with open(name, "wb") as f:
    f.write(importlib.util.MAGIC_NUMBER)
    f.write((0).to_bytes(4, "little"))
    f.write((int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little"))
    f.write((st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    f.write(marshal.dumps(code))
"""


def _hub(repo: Repo, gate: str, files: dict[str, str] | None = None) -> Repo:
    """main with `files` committed (before the hooks are in: they refuse commits on main),
    git-lane installed, `gate` the gate (needs gitlane_on_path for `git lane exec`)."""
    for name, content in (files or {"a.txt": "base\n"}).items():
        repo.commit(repo.path, name, content)
    assert repo.lane("install").rc == 0
    repo.config("gate_command", gate)
    return repo


def _calc_hub(repo: Repo) -> Repo:
    """main has a tracked calc.py (correct) and ignores __pycache__/ and *.flag; the gate
    imports calc and checks it."""
    return _hub(repo, GATE, {".gitignore": "__pycache__/\n*.flag\n", "calc.py": GOOD})


def _exec(lane: Path, key: str, *argv: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        ["git", "lane", "exec", key, "--", *argv],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def _record(hub: Repo, key: str) -> dict[str, object]:
    d = json.loads((hub.state_dir / "lanes" / f"{key}.json").read_text())
    assert isinstance(d, dict)
    return d


def _write_record(hub: Repo, key: str, d: dict[str, object]) -> None:
    (hub.state_dir / "lanes" / f"{key}.json").write_text(json.dumps(d))


def _lane_status(hub: Repo, key: str) -> dict[str, object]:
    r = hub.jlane("status")
    assert r.rc == 0, r.stderr
    (v,) = [x for x in r.json["lanes"] if x["key"] == key]
    assert isinstance(v, dict)
    return v


def test_a_forged_pyc_an_exec_left_in_the_lane_is_never_what_the_gate_imports(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """The attack: under `git lane exec`, the agent commits a broken calc.py and leaves a
    pyc (ignored) whose header matches it and whose code is the good one; the exec ends and
    the owner lands from the hub. In the lane the gate imports the pyc and passes; the
    land gates in a clean worktree of the tip instead, where it fails."""
    hub = _calc_hub(repo)
    lane = hub.create("alpha")
    created = _record(hub, "alpha").get("exec_seen")
    script = tmp_path / "plant.py"
    script.write_text(PLANT_PYC)
    _exec(lane, "alpha", sys.executable, str(script))
    assert git(lane, "status", "--porcelain", "-uall").stdout == ""  # G2 sees nothing
    # the plant works: the gate run in the lane itself passes on the broken tip
    assert subprocess.run(GATE, shell=True, cwd=lane).returncode == 0
    before = hub.sha()
    r = hub.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "gate_failed", r.stdout + r.stderr
    assert hub.sha() == before
    g = r.json["details"]["gate"]
    assert g["worktree"] == "clean", g
    assert "git lane exec" in g["why"] and "alpha" in g["why"], g
    # create wrote False; exec's claim wrote True, and nothing set it back
    assert created is False and _record(hub, "alpha")["exec_seen"] is True
    assert _lane_status(hub, "alpha")["exec_seen"] is True


def test_an_ignored_flag_an_exec_left_in_the_lane_is_never_what_the_gate_reads(
    repo: Repo,
    gitlane_on_path: Path,
) -> None:
    """The same with a gate that reads an ignored file: the tip commits `.broken`, the
    agent leaves `ok.flag` (ignored); in the lane the gate passes, at the tip it fails."""
    hub = _hub(repo, "test ! -f .broken || test -f ok.flag", {".gitignore": "*.flag\n"})
    lane = hub.create("alpha")
    _exec(
        lane, "alpha", "sh", "-c",
        ": > .broken && git add .broken && git commit -q -m broken && : > ok.flag",
    )  # fmt: skip
    assert git(lane, "status", "--porcelain", "-uall").stdout == ""
    before = hub.sha()
    r = hub.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "gate_failed", r.stdout + r.stderr
    assert hub.sha() == before
    assert r.json["details"]["gate"]["worktree"] == "clean"


def test_an_exec_that_only_ran_still_sends_the_land_to_a_clean_worktree(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """A successful land of a lane exec ran in: the gate ran in a fresh worktree of the tip
    (its `pwd`), the result says why; the record still says so after the land."""
    out = tmp_path / "gate-pwd"
    hub = _hub(repo, f"pwd > {shlex.quote(str(out))}")
    lane = hub.create("alpha")
    _exec(lane, "alpha", "true")
    hub.commit(lane, "b.txt", "b\n")  # the owner's own commit, after the exec ended
    r = hub.jlane("land", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert os.path.realpath(out.read_text().strip()) != os.path.realpath(lane)
    assert r.json["gate"]["worktree"] == "clean" and "git lane exec" in r.json["gate"]["why"]
    assert _record(hub, "alpha")["exec_seen"] is True


def test_a_lane_never_execd_still_gates_in_the_lane(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """No exec ever ran in the lane: the gate runs in the lane (its `pwd`), no `why`."""
    out = tmp_path / "gate-pwd"
    hub = _hub(repo, f"pwd > {shlex.quote(str(out))}")
    lane = hub.create("alpha")
    assert _lane_status(hub, "alpha")["exec_seen"] is False
    hub.commit(lane, "b.txt", "b\n")
    r = hub.jlane("land", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert os.path.realpath(out.read_text().strip()) == os.path.realpath(lane)
    assert r.json["gate"]["worktree"] == "lane" and "why" not in r.json["gate"]


def test_a_record_without_the_field_counts_as_execd(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """A record an older git-lane wrote (no exec_seen) cannot say no exec ran: clean gate."""
    out = tmp_path / "gate-pwd"
    hub = _hub(repo, f"pwd > {shlex.quote(str(out))}")
    lane = hub.create("alpha")
    d = _record(hub, "alpha")
    del d["exec_seen"]
    _write_record(hub, "alpha", d)
    assert _lane_status(hub, "alpha")["exec_seen"] is None
    hub.commit(lane, "b.txt", "b\n")
    r = hub.jlane("land", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert os.path.realpath(out.read_text().strip()) != os.path.realpath(lane)
    g = r.json["gate"]
    assert g["worktree"] == "clean" and "git lane exec" in g["why"], g


def test_a_record_whose_field_is_no_bool_is_corrupt_never_gated_in_the_lane(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """exec_seen: "no" is a bad record: land refuses state_corrupt (no gate, no traceback);
    reconcile rebuilds the record from git, which cannot say whether an exec ran: the land
    after it gates clean."""
    out = tmp_path / "gate-pwd"
    hub = _hub(repo, f"pwd > {shlex.quote(str(out))}")
    lane = hub.create("alpha")
    hub.commit(lane, "b.txt", "b\n")
    d = _record(hub, "alpha")
    d["exec_seen"] = "no"
    _write_record(hub, "alpha", d)
    before = hub.sha()
    r = hub.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "state_corrupt", r.stdout + r.stderr
    assert "Traceback" not in r.stderr and not out.exists() and hub.sha() == before
    for cmd in r.json["next"]:
        res = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert _record(hub, "alpha").get("exec_seen") is None
    r = hub.jlane("land", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert r.json["gate"]["worktree"] == "clean"
    assert os.path.realpath(out.read_text().strip()) != os.path.realpath(lane)


def test_a_queue_land_of_an_execd_lane_gates_clean(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """The queue applies the same rule: the forged pyc an exec left is not what its gate
    imports (gate_failed, skipped), and an honest exec'd lane lands with a clean gate."""
    hub = _calc_hub(repo)
    lane = hub.create("alpha")
    script = tmp_path / "plant.py"
    script.write_text(PLANT_PYC)
    _exec(lane, "alpha", sys.executable, str(script))
    assert hub.lane("ready", "alpha").rc == 0
    before = hub.sha()
    q = hub.jlane("queue", "alpha")
    assert q.rc == 0 and q.json["landed"] == [], q.stdout + q.stderr
    (s,) = q.json["skipped"]
    assert s["code"] == "gate_failed" and s["gate"]["worktree"] == "clean", s
    assert hub.sha() == before
    lane2 = hub.create("beta")
    _exec(lane2, "beta", "true")
    hub.commit(lane2, "b.txt", "b\n")
    assert hub.lane("ready", "beta").rc == 0
    q = hub.jlane("queue", "beta")
    assert q.rc == 0 and q.json["landed"] == ["beta"], q.stdout + q.stderr
    g = q.json["lanes"][0]["gate"]
    assert g["worktree"] == "clean" and "git lane exec" in g["why"], g


def test_a_lane_a_shell_was_bound_to_with_shellenv_gates_clean(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """shellenv hands out exec's binding for a shell it cannot supervise (a worker, not
    the owner): the lane's record says so before the binding is printed, as exec's claim
    does, and its land gates clean."""
    out = tmp_path / "gate-pwd"
    hub = _hub(repo, f"pwd > {shlex.quote(str(out))}")
    lane = hub.create("alpha")
    assert hub.jlane("shellenv", "alpha").rc == 0
    hub.commit(lane, "b.txt", "b\n")
    r = hub.jlane("land", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert os.path.realpath(out.read_text().strip()) != os.path.realpath(lane)
    assert r.json["gate"]["worktree"] == "clean" and _record(hub, "alpha")["exec_seen"] is True
