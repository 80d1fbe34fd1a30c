"""Roles: `GITLANE_LANE=<key>` or `GITLANE_ROLE=worker` makes a worker, and nothing makes
it the owner again. Workers may not create, release, reconcile or set config, and may not
name another lane; each refusal leaves git and the state store as they were."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import Repo

WORKERS = [
    {"GITLANE_LANE": "alpha"},
    {"GITLANE_ROLE": "worker"},
    {"GITLANE_LANE": "alpha", "GITLANE_ROLE": "main"},  # cannot promote itself back
    {"GITLANE_LANE": "alpha", "GITLANE_ROLE": ""},
]
IDS = ["bound", "role", "bound+role-main", "bound+empty-role"]


def git_state(repo: Repo) -> tuple[str, str]:
    refs = repo.git("for-each-ref", "--format=%(refname) %(objectname)").stdout
    return refs, repo.worktrees()


def lane_files(repo: Repo) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((repo.state_dir / "lanes").glob("*"))}


@pytest.fixture
def two_lanes(repo: Repo) -> tuple[Repo, Path, Path]:
    a = repo.create("alpha")
    b = repo.create("beta")
    repo.commit(a, "a.txt", "a\n")
    return repo, a, b


@pytest.mark.parametrize("env", WORKERS, ids=IDS)
def test_owner_commands_are_forbidden(
    two_lanes: tuple[Repo, Path, Path], env: dict[str, str]
) -> None:
    repo, a, _ = two_lanes
    shutil.rmtree(a)  # something reconcile would change
    before, files = git_state(repo), lane_files(repo)
    for cmd in (
        ("create", "gamma"),
        ("create",),
        ("release", "alpha"),
        ("release", "alpha", "--confirm", "yes-discard-lane"),
        ("release", "beta"),
        ("reconcile",),
        ("config", "set", "max_lanes", "9"),
    ):
        r = repo.jlane(*cmd, env=env, cwd=repo.path)
        assert (r.rc, r.code) == (1, "role_forbidden"), cmd
        assert "refused [role_forbidden]" in r.stderr
    assert git_state(repo) == before
    assert lane_files(repo) == files
    assert not (repo.state_dir / "config.toml").exists()
    refusals = [
        json.loads(line) for line in (repo.state_dir / "events.jsonl").read_text().splitlines()
    ]
    assert sum(e["kind"] == "refusal" and e["code"] == "role_forbidden" for e in refusals) == 7


@pytest.mark.parametrize("cmd", ["status", "sync", "land", "continue", "abort"])
def test_bound_worker_may_not_name_another_lane(
    two_lanes: tuple[Repo, Path, Path], cmd: str
) -> None:
    repo, a, _ = two_lanes
    before = git_state(repo)
    r = repo.jlane(cmd, "beta", env={"GITLANE_LANE": "alpha"}, cwd=a)
    assert (r.rc, r.code) == (1, "role_forbidden")
    assert r.json["details"]["lane"] == "beta"
    assert git_state(repo) == before


def test_bound_worker_sees_its_own_lane(two_lanes: tuple[Repo, Path, Path]) -> None:
    repo, a, _ = two_lanes
    for args in (("status",), ("status", "alpha")):
        r = repo.jlane(*args, env={"GITLANE_LANE": "alpha"}, cwd=a)
        assert r.rc == 0, r.stderr
        assert [ln["key"] for ln in r.json["lanes"]] == ["alpha"]
        assert r.json["lanes"][0]["ahead"] == 1


def test_role_worker_must_name_a_lane_and_may_read(two_lanes: tuple[Repo, Path, Path]) -> None:
    repo, _, b = two_lanes
    env = {"GITLANE_ROLE": "worker"}
    r = repo.jlane("status", "beta", env=env, cwd=b)
    assert r.rc == 0 and [ln["key"] for ln in r.json["lanes"]] == ["beta"]
    assert repo.jlane("config", "get", "max_lanes", env=env).rc == 0
    assert repo.jlane("log", env=env).rc == 0


def test_empty_lane_variable_is_not_a_worker(repo: Repo) -> None:
    r = repo.jlane("create", "alpha", env={"GITLANE_LANE": ""})
    assert (r.rc, r.code) == (0, "created")


# -- a lane owner's descendants are its workers, whatever their environment says ---------


@pytest.fixture(autouse=True)
def _gitlane_on_path(gitlane_on_path: Path) -> Path:
    """`git lane` inside exec runs this checkout (conftest.gitlane_on_path)."""
    return gitlane_on_path


def test_unsetting_the_role_inside_exec_grants_nothing(repo: Repo) -> None:
    repo.config("gate_command", "true")
    repo.create("alpha")
    vic = repo.create("vic")
    (vic / "precious.txt").write_text("vic's work\n")
    before = lane_files(repo)
    escape = (
        "unset GITLANE_ROLE GITLANE_LANE; git lane --json release vic --confirm yes-discard-lane"
    )
    r = repo.lane("exec", "alpha", "--", "sh", "-c", escape)
    assert r.rc == 1, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["code"] == "role_forbidden", r.stdout
    assert (vic / "precious.txt").read_text() == "vic's work\n"
    assert repo.jlane("status", "vic").json["lanes"][0]["key"] == "vic"
    # its own lane's land too: worker_land deny
    r = repo.lane(
        "exec",
        "alpha",
        "--",
        "sh",
        "-c",
        "unset GITLANE_ROLE GITLANE_LANE; git lane --json land alpha",
    )
    assert json.loads(r.stdout)["code"] == "role_forbidden", r.stdout
    r = repo.lane(
        "exec",
        "alpha",
        "--",
        "sh",
        "-c",
        'env -i PATH="$PATH" PYTHONPATH="$PYTHONPATH" git lane --json config set gate off',
    )
    assert json.loads(r.stdout)["code"] == "role_forbidden", r.stdout
    assert lane_files(repo).keys() == before.keys()
    # the owner, outside exec, still releases it
    r = repo.jlane("release", "vic", "--confirm", "yes-discard-lane")
    assert (r.rc, r.code) == (0, "released"), r.stdout
