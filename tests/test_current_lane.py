"""The current lane: every command that takes [KEY] resolves it from the argument, then
GITLANE_LANE, then the lane worktree the cwd (any subdirectory, or `-C PATH`) is in; with
none, unknown_lane lists the active lanes and its `next` runs."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from conftest import Repo, git
from enginehelp import head, ready_lane


@pytest.fixture
def two(repo: Repo) -> tuple[Repo, Path, Path]:
    repo.config("gate", "off")
    a = ready_lane(repo, "alpha", {"a/deep/a.txt": "a\n"})
    b = ready_lane(repo, "beta")
    return repo, a, b


def test_path_from_argument_env_cwd_subdirectory_and_dash_c(two: tuple[Repo, Path, Path]) -> None:
    repo, a, b = two
    # the argument
    r = repo.jlane("path", "beta")
    assert (r.rc, r.json) == (0, {"ok": True, "code": "ok", "key": "beta", "path": str(b)})
    # GITLANE_LANE, even from the hub
    assert repo.jlane("path", env={"GITLANE_LANE": "alpha"}).json["key"] == "alpha"
    # GITLANE_LANE wins over the cwd
    assert repo.jlane("path", cwd=b, env={"GITLANE_LANE": "alpha"}).json["key"] == "alpha"
    # the cwd, from any subdirectory of the lane worktree
    r = repo.jlane("path", cwd=a / "a" / "deep")
    assert (r.rc, r.json["key"], r.json["path"]) == (0, "alpha", str(a)), r.stderr
    # -C PATH
    assert repo.jlane("-C", str(b), "path").json["key"] == "beta"
    assert repo.jlane("-C", str(a / "a"), "path").json["key"] == "alpha"
    # text output: the path alone, so that cd "$(git lane path alpha)" works
    r = repo.lane("path", "alpha")
    assert (r.rc, r.stdout) == (0, f"{a}\n")


def test_no_lane_found_lists_the_active_lanes(two: tuple[Repo, Path, Path]) -> None:
    repo, _, _ = two
    for cmd in ("land", "release", "sync", "continue", "abort", "path"):
        r = repo.jlane(cmd)  # from the hub, no key, no GITLANE_LANE
        assert (r.rc, r.code) == (1, "unknown_lane"), (cmd, r.stdout, r.stderr)
        assert r.json["details"]["active"] == ["alpha", "beta"], cmd
        assert "alpha" in r.json["message"] and "beta" in r.json["message"]
        assert r.json["next"] == ["git lane status"]
        assert r.json["alternatives"] == [f"git lane {cmd} alpha", f"git lane {cmd} beta"]
        assert "<" not in " ".join(r.json["next"] + r.json["alternatives"])
    assert repo.jlane("status").rc == 0  # what next says runs
    # an unregistered worktree is not a lane either
    other = repo.path.parent / "plain-wt"
    git(repo.path, "worktree", "add", "-q", "-b", "plain", str(other))
    r = repo.jlane("path", cwd=other)
    assert (r.rc, r.code) == (1, "unknown_lane")


def test_land_and_release_resolve_the_lane_of_the_cwd(two: tuple[Repo, Path, Path]) -> None:
    repo, a, _ = two
    r = repo.jlane("land", cwd=a / "a")
    assert (r.rc, r.code, r.json["lane"]) == (0, "landed", "alpha"), r.stdout + r.stderr
    assert repo.sha() == head(a)
    r = repo.jlane("release", cwd=a / "a" / "deep")
    assert (r.rc, r.code, r.json["lane"]) == (0, "released", "alpha"), r.stdout + r.stderr
    assert not a.exists()
    # it stood in the lane it released: where to go, in JSON and in the text
    assert r.json["hub"] == str(repo.path)
    assert r.json["next"] == [f"cd '{repo.path}'"]


def test_release_text_says_where_to_go(two: tuple[Repo, Path, Path]) -> None:
    repo, _, b = two
    assert repo.jlane("land", "beta").rc == 0
    r = repo.lane("release", cwd=b)
    assert r.rc == 0, r.stderr
    assert f"cd '{repo.path}'" in r.stdout
    # from the hub there is nowhere to go: no cd
    r = repo.jlane("release", "alpha", "--confirm", "yes-discard-lane")
    assert r.rc == 0 and "next" not in r.json and r.json["hub"] == str(repo.path)


def test_sync_continue_abort_and_status_resolve_from_the_cwd(repo: Repo) -> None:
    repo.commit(repo.path, "f.txt", "base\n")
    a = repo.create("alpha")
    repo.commit(a, "f.txt", "lane\n")
    repo.commit(repo.path, "f.txt", "main\n")
    sub = a / "sub"
    sub.mkdir()
    r = repo.jlane("sync", cwd=sub)
    assert (r.rc, r.code, r.json["lane"]) == (1, "sync_conflicts", "alpha"), r.stdout
    r = repo.jlane("abort", cwd=sub)
    assert (r.rc, r.code) == (0, "aborted"), r.stdout
    r = repo.jlane("-C", str(a), "sync")
    assert r.json["lane"] == "alpha" and r.code == "sync_conflicts"
    (a / "f.txt").write_text("merged\n")
    r = repo.jlane("continue", cwd=a)
    # the owner in the lane: the next names the repository (git reads the cwd's config)
    pinned = f"git -C {shlex.quote(os.path.realpath(repo.path))} lane land alpha"
    assert (r.rc, r.code, r.json["next"]) == (0, "synced", [pinned]), r.stdout
    r = repo.jlane("status", "alpha", cwd=sub)
    assert [ln["key"] for ln in r.json["lanes"]] == ["alpha"]


def test_a_bound_worker_gets_its_lane_and_no_other(two: tuple[Repo, Path, Path]) -> None:
    repo, a, b = two
    env = {"GITLANE_LANE": "alpha"}
    r = repo.jlane("path", "beta", env=env)
    assert (r.rc, r.code, r.json["next"]) == (1, "role_forbidden", ["git lane path alpha"])
    # standing in beta's worktree does not change whose lane a bound process acts on
    assert repo.jlane("path", cwd=b, env=env).json["key"] == "alpha"
    # a GITLANE_ROLE=worker without a key resolves its lane from the cwd
    r = repo.jlane("path", cwd=a, env={"GITLANE_ROLE": "worker"})
    assert (r.rc, r.json["key"]) == (0, "alpha")
    r = repo.jlane("path", env={"GITLANE_ROLE": "worker"})
    assert (r.rc, r.code, r.json["next"]) == (1, "unknown_lane", ["git lane status"])


def test_path_of_a_released_lane_is_refused(two: tuple[Repo, Path, Path]) -> None:
    repo, _, _ = two
    assert repo.jlane("release", "beta", "--confirm", "yes-discard-lane").rc == 0
    r = repo.jlane("path", "beta")
    assert (r.rc, r.code) == (1, "lane_not_active")
    r = repo.jlane("path", "nope")
    assert r.code == "unknown_lane" and r.json["details"]["active"] == ["alpha"]
    assert r.json["next"] == ["git lane status"]
    assert repo.jlane("path", "No_Such").code == "invalid_lane_key"


def test_an_unbound_worker_acts_only_on_the_lane_it_runs_in(repo: Repo) -> None:
    a = repo.create("alpha")
    b = repo.create("beta")
    env = {"GITLANE_ROLE": "worker"}
    for args, cwd in (
        (("abort", "beta"), a),
        (("-C", str(b), "abort"), a),
        (("sync", "alpha"), repo.path),
    ):
        r = repo.jlane(*args, cwd=cwd, env=env)
        assert (r.rc, r.code) == (1, "role_forbidden"), (args, r.stdout)
    r = repo.jlane("path", cwd=a, env=env)
    assert (r.rc, r.json["path"]) == (0, str(a)), r.stdout
