"""A scripted agent that knows nothing about git-lane but its contract: it runs
`git lane land`, and whenever an answer is not `landed` it runs the answer's `next`
commands, in order, exactly as written. The only thing it does by hand is what a
refusal's message says a person must do: resolve the files of the conflict worklist.

Each test puts a lane in one of the states agents end up in, with the hooks installed
and main moved only by other lanes landing, and asserts that the agent lands it."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git
from enginehelp import spawn_lane, wait_for

MAX_STEPS = 16
MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")


@pytest.fixture
def hub(repo: Repo, gitlane_on_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """`git lane` on PATH as the agent's shell finds it, the hooks installed, a gate."""
    for k in ("GITLANE_LANE", "GITLANE_ROLE"):
        monkeypatch.delenv(k, raising=False)
    assert repo.lane("install").rc == 0
    repo.config("gate_command", "! grep -rIl --exclude-dir=.git '^<<<<<<<' .")
    return repo


class Agent:
    def __init__(self, cwd: Path, goal: str) -> None:
        self.cwd = cwd
        self.goal = goal
        self.transcript: list[tuple[str, int, str]] = []

    def run(self, command: str) -> dict[str, Any] | None:
        """Run one command as written; a `git lane` command is asked for --json."""
        # a git lane command, as printed for an owner in a lane too: `git -C ROOT lane ...`
        words = shlex.split(command.split("  #", 1)[0]) if command.startswith("git ") else []
        lane_cmd = words[1:2] == ["lane"] or (words[1:2] == ["-C"] and words[3:4] == ["lane"])
        full = command + " --json" if lane_cmd and " --json" not in command else command
        cwd = self.cwd if self.cwd.is_dir() else Path("/")
        r = subprocess.run(["sh", "-c", full], cwd=cwd, text=True, capture_output=True, timeout=120)
        assert "Traceback" not in r.stderr, (command, r.stderr)
        assert r.returncode in (0, 1), (command, r.returncode, r.stdout, r.stderr)
        if not lane_cmd:
            assert r.returncode == 0, (command, r.stdout, r.stderr)
            self.transcript.append((command, r.returncode, "-"))
            return None
        obj: dict[str, Any] = json.loads(r.stdout)
        self.transcript.append((command, r.returncode, str(obj.get("code"))))
        return obj

    def resolve(self, obj: dict[str, Any]) -> None:
        """The one thing done by hand: keep both sides of every conflicted file."""
        wl = obj.get("worklist") or (obj.get("details") or {}).get("worklist")
        if not wl:
            return
        lane_path = Path(obj.get("path") or (obj.get("details") or {}).get("path") or self.cwd)
        for f in wl["files"]:
            p = lane_path / f["path"]
            if p.is_file():
                keep = [ln for ln in p.read_text().splitlines(True) if not ln.startswith(MARKERS)]
                p.write_text("".join(keep))

    def land(self) -> list[tuple[str, int, str]]:
        queue: list[str] = []
        for _ in range(MAX_STEPS):
            command = queue.pop(0) if queue else self.goal
            obj = self.run(command)
            if obj is None:
                continue
            if obj.get("code") == "landed":
                return self.transcript
            self.resolve(obj)
            if not obj.get("ok") or not queue:
                queue = [str(c) for c in obj.get("next") or []]
        raise AssertionError(f"the agent did not land: {self.transcript}")


def land_other(hub: Repo, key: str, name: str, content: str) -> None:
    """Another lane lands a change to `name`: the way main moves here."""
    path = hub.create(key)
    hub.commit(path, name, content, f"{key} edits {name}")
    r = hub.jlane("land", key)
    assert r.code == "landed", r.stdout + r.stderr


def lane_with(hub: Repo, key: str, name: str, content: str) -> Path:
    path = hub.create(key)
    hub.commit(path, name, content, f"{key} edits {name}")
    return path


def landed(hub: Repo, path: Path) -> None:
    tip = git(path, "rev-parse", "HEAD").stdout.strip()
    assert hub.sha() == tip
    text = git(hub.path, "show", "main:f.txt", check=False).stdout
    assert not any(line.startswith(MARKERS) for line in text.splitlines())


def test_stale_with_a_conflict(hub: Repo) -> None:
    land_other(hub, "base", "f.txt", "base\n")
    path = lane_with(hub, "alpha", "f.txt", "base\nalpha\n")
    land_other(hub, "beta", "f.txt", "base\nbeta\n")
    log = Agent(path, "git lane land").land()
    landed(hub, path)
    assert any(code != "landed" for _, _, code in log)


def test_dirty(hub: Repo) -> None:
    path = lane_with(hub, "alpha", "f.txt", "one\n")
    (path / "f.txt").write_text("two\n")
    (path / "new.txt").write_text("new\n")
    Agent(path, "git lane land").land()
    landed(hub, path)
    assert git(hub.path, "show", "main:new.txt").stdout == "new\n"


def test_a_sync_left_half_way(hub: Repo) -> None:
    land_other(hub, "base", "f.txt", "base\n")
    path = lane_with(hub, "alpha", "f.txt", "base\nalpha\n")
    land_other(hub, "beta", "f.txt", "base\nbeta\n")
    r = hub.jlane("sync", "alpha")
    assert r.rc == 1 and "worklist" in json.dumps(r.json)  # stopped on the conflict
    # the agent that started it is gone; a new one starts from its goal
    Agent(path, "git lane land").land()
    landed(hub, path)


def test_two_conflicting_commits(hub: Repo) -> None:
    land_other(hub, "base", "f.txt", "base\n")
    path = lane_with(hub, "alpha", "f.txt", "base\nalpha 1\n")
    hub.commit(path, "f.txt", "base\nalpha 1\nalpha 2\n", "second")
    land_other(hub, "beta", "f.txt", "base\nbeta\n")
    Agent(path, "git lane land").land()
    landed(hub, path)
    subjects = git(hub.path, "log", "--format=%s", "-3", "main").stdout.splitlines()
    assert subjects[:2] == ["second", "alpha edits f.txt"]


def test_lock_busy(hub: Repo) -> None:
    path = lane_with(hub, "alpha", "a.txt", "a\n")
    other = lane_with(hub, "beta", "b.txt", "b\n")
    flag = other.parent / "beta-gate-started"
    hub.config("gate_command", f"touch {shlex.quote(str(flag))}; sleep 3")
    beta = spawn_lane("land", "beta", "--json", cwd=hub.path)
    try:
        wait_for(flag.exists, what="beta's gate")
        log = Agent(path, "git lane land").land()
    finally:
        out, err = beta.communicate(timeout=120)
    assert json.loads(out)["code"] == "landed", err
    assert log[0][2] == "lock_busy", log
    landed(hub, path)


def test_worktree_deleted_by_hand(hub: Repo) -> None:
    path = lane_with(hub, "alpha", "a.txt", "a\n")
    shutil.rmtree(path)
    Agent(hub.path, "git lane land alpha").land()
    assert hub.sha() == hub.sha("refs/heads/lane/alpha")
    assert git(hub.path, "show", "main:a.txt").stdout == "a\n"
