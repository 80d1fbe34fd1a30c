"""A gate in a clean worktree (gate_worktree = "clean", the queue's, a land through exec's
land socket) gets what `.worktreeinclude` copies into a new lane: the HUB's ignored files
named by MAIN's committed `.worktreeinclude`, copied (never hardlinked, links as links)
into the fresh gate worktree before the gate starts, removed with it after. Never the
lane's copy of a file, never a `.worktreeinclude` only the lane commits."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, git, needs_modes, owner_lane
from enginehelp import head
from sandboxhelp import NEEDS_LANDLOCK

INCLUDE = ".env\nnode_modules/\nlink\n"
# the gate passes only with the hub's .env (SECRET), never the lane's (PLANTED); it
# writes its copy: a hardlink would write the hub's
ENV_GATE = "test -f .env && grep -q SECRET .env && ! grep -q PLANTED .env && echo more >> .env"
TREE_GATE = (
    "test -f node_modules/pkg/deep/index.js && test -x node_modules/pkg/run.sh "
    '&& test -L link && test "$(readlink link)" = .env'
)


def _track(repo: Repo, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo.path / name).write_text(text)
    repo.git("add", "--", *files)
    repo.git("commit", "-q", "-m", "project files")


def _hub_files(repo: Repo) -> None:
    (repo.path / ".env").write_text("SECRET=1\n")
    deep = repo.path / "node_modules" / "pkg" / "deep"
    deep.mkdir(parents=True)
    (deep / "index.js").write_text("module.exports = 1\n")
    (deep.parent / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(deep.parent / "run.sh", 0o755)
    os.symlink(".env", repo.path / "link")


@pytest.fixture
def inc(repo: Repo, gitlane_on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """A hub whose main commits .gitignore and .worktreeinclude, with the ignored files
    they name; gate_worktree = "clean"; a TMPDIR of the test's own (to see leftovers)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    _track(repo, {".gitignore": ".env\nnode_modules/\nlink\n", ".worktreeinclude": INCLUDE})
    _hub_files(repo)
    repo.config("gate_worktree", "clean")
    repo.config("gate_command", ENV_GATE)
    return repo


def _lane(repo: Repo, key: str) -> Path:
    path = repo.create(key)
    repo.commit(path, f"{key}.txt", f"{key}\n")
    return path


def _landed(r: Any) -> dict[str, Any]:
    assert r.rc == 0 and r.code == "landed", r.stdout + r.stderr
    return dict(r.json)


def _gate_leftovers(repo: Repo) -> list[str]:
    tmp = Path(os.environ["TMPDIR"])
    left = [p.name for p in tmp.iterdir() if p.name.startswith("git-lane-gate-")]
    return left + [ln for ln in repo.worktrees().splitlines() if "git-lane-gate-" in ln]


def test_a_clean_gate_sees_the_hubs_env_and_lands(inc: Repo) -> None:
    lane = _lane(inc, "alpha")
    tip = head(lane)
    r = inc.jlane("land", "alpha")
    res = _landed(r)
    assert inc.sha() == tip
    g = res["gate"]
    assert g["worktree"] == "clean" and g["status"] == "passed"
    assert g["included"]["files"] == 4 and g["included"]["skipped"] == []
    assert g["included"]["bytes"] > 0
    # the gate wrote its copy, never the hub's file
    assert (inc.path / ".env").read_text() == "SECRET=1\n"
    assert _gate_leftovers(inc) == []


def test_the_text_output_names_the_copies(inc: Repo) -> None:
    _lane(inc, "alpha")
    r = inc.lane("land", "alpha")
    assert r.rc == 0, r.stderr
    assert ".worktreeinclude: 4 file(s)" in r.stdout, r.stdout


def test_the_lanes_own_env_is_not_what_the_gate_sees(inc: Repo) -> None:
    lane = _lane(inc, "alpha")
    (lane / ".env").write_text("PLANTED=1\n")  # the lane's ignored copy: an agent's to write
    r = inc.jlane("land", "alpha")
    _landed(r)
    assert (inc.path / ".env").read_text() == "SECRET=1\n"
    assert (lane / ".env").read_text() == "PLANTED=1\n"


def test_a_worktreeinclude_only_the_lane_commits_copies_nothing(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    _track(repo, {".gitignore": ".env\nnode_modules/\nlink\n"})
    _hub_files(repo)
    repo.config("gate_worktree", "clean")
    repo.config("gate_command", "test ! -e .env && test ! -e node_modules")
    lane = repo.create("alpha")
    repo.commit(lane, ".worktreeinclude", INCLUDE)  # the lane's: never read
    r = repo.jlane("land", "alpha")
    res = _landed(r)
    assert res["gate"]["included"]["files"] == 0


def test_links_and_directories_are_copied_as_they_are(inc: Repo) -> None:
    inc.config("gate_command", TREE_GATE)
    _lane(inc, "alpha")
    r = inc.jlane("land", "alpha")
    _landed(r)
    assert _gate_leftovers(inc) == []


def test_an_in_lane_gate_copies_nothing(inc: Repo) -> None:
    inc.config("gate_worktree", "lane")
    _lane(inc, "alpha")
    r = inc.jlane("land", "alpha")
    res = _landed(r)
    assert res["gate"]["worktree"] == "lane" and res["gate"]["included"] is None


def test_a_queue_land_in_a_clean_gate_gets_them(inc: Repo) -> None:
    _lane(inc, "alpha")
    assert inc.jlane("ready", "alpha").rc == 0
    r = inc.jlane("queue", "alpha")
    assert r.rc == 0 and r.json["landed"] == ["alpha"], r.stdout + r.stderr
    assert r.json["lanes"][0]["gate"]["included"]["files"] == 4
    assert (inc.path / ".env").read_text() == "SECRET=1\n"
    assert _gate_leftovers(inc) == []


def test_a_batch_gate_gets_them_at_every_run(inc: Repo) -> None:
    """The batch's worktree is cleaned (`git clean -ffdx`) before each gate run: the copies
    are made again each time (the bisection's runs too)."""
    inc.config("gate_command", ENV_GATE + " && test ! -e bad.txt")
    for key in ("alpha", "beta", "gamma"):
        path = _lane(inc, key)
        if key == "beta":
            inc.commit(path, "bad.txt", "x\n")
        assert inc.jlane("ready", key).rc == 0
    r = inc.jlane("queue", "--batch", "3")
    assert r.json["landed"][0] == "alpha" and "beta" not in r.json["landed"], r.stdout + r.stderr
    assert [(s["lane"], s["code"]) for s in r.json["skipped"]] == [("beta", "gate_failed")]
    assert r.json["lanes"][0]["gate"]["included"]["files"] == 4
    assert (inc.path / ".env").read_text() == "SECRET=1\n"
    assert _gate_leftovers(inc) == []


def test_a_land_through_execs_socket_gets_them(inc: Repo) -> None:
    """exec's land socket always gates in a clean worktree (guard/gate.py FOR_EXEC)."""
    inc.config("gate_worktree", "lane")
    inc.config("worker_land", "allow")
    lane = _lane(inc, "alpha")
    tip = head(lane)
    r = inc.lane("exec", "alpha", "--", "sh", "-c", "git lane land --json")
    assert r.rc == 0, r.stdout + r.stderr
    import json

    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["gate"]["worktree"] == "clean" and out["gate"]["included"]["files"] == 4
    assert inc.sha() == tip
    assert (inc.path / ".env").read_text() == "SECRET=1\n"


@NEEDS_LANDLOCK
def test_a_confined_gate_through_a_sandboxed_exec_gets_them(inc: Repo) -> None:
    """The land child copies (the owner's process, unconfined), then the gate runs under
    the lane's sandbox, granted its worktree: the copies are in it."""
    inc.config("gate_worktree", "lane")
    inc.config("worker_land", "allow")
    inc.config("gate_command", ENV_GATE + " && " + TREE_GATE)
    lane = _lane(inc, "alpha")
    tip = head(lane)
    script = "git lane land --json"
    r = inc.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", script)
    assert r.rc == 0, r.stdout + r.stderr
    import json

    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["gate"]["included"]["files"] == 4, r.stderr
    assert inc.sha() == tip
    assert (inc.path / ".env").read_text() == "SECRET=1\n"


@needs_modes
def test_an_unreadable_hub_file_is_listed_not_silent(inc: Repo) -> None:
    """A file that cannot be copied is skipped, as create skips it, and said: in the
    gate's `included.skipped` and in the land's warnings."""
    inc.config("gate_command", "true")
    _lane(inc, "alpha")
    os.chmod(inc.path / ".env", 0)
    try:
        r = owner_lane("land", "alpha", "--json", cwd=inc.path)
    finally:
        os.chmod(inc.path / ".env", 0o644)
    res = _landed(r)
    assert [s["path"] for s in res["gate"]["included"]["skipped"]] == [".env"]
    assert res["gate"]["included"]["files"] == 3
    assert any(".worktreeinclude" in w for w in res["warnings"])


def test_a_failed_clean_gate_says_what_it_was_given(inc: Repo) -> None:
    inc.config("gate_command", "test ! -e .env")
    _lane(inc, "alpha")
    before = inc.sha()
    r = inc.jlane("land", "alpha")
    assert r.code == "gate_failed" and inc.sha() == before
    assert r.json["details"]["included"]["files"] == 4
    assert _gate_leftovers(inc) == []


def test_a_bare_hub_copies_nothing(tmp_path: Path, gitlane_on_path: Path) -> None:
    """No worktree has main checked out: there is no hub to copy from (as create says)."""
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", str(src))
    for name, text in ((".gitignore", ".env\n"), (".worktreeinclude", ".env\n")):
        (src / name).write_text(text)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "init")
    (src / ".env").write_text("SECRET=1\n")  # another repository's: never this one's hub
    git(tmp_path, "clone", "-q", "--bare", str(src), "hub.git")
    hub = Repo(tmp_path / "hub.git")
    hub.config("gate_worktree", "clean")
    hub.config("gate_command", "test ! -e .env")
    _lane(hub, "alpha")
    res = _landed(hub.jlane("land", "alpha"))
    assert res["gate"]["worktree"] == "clean" and res["gate"]["included"]["files"] == 0
