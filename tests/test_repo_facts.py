"""Repository facts: discovery from anywhere inside the hub or a lane, the common dir, the
hub, which branch is main, and the refusals when there is none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import Repo, git, lane

from guard.repo import Repo as EngineRepo


def _real(p: str | Path | None) -> str | None:
    return None if p is None else os.path.realpath(p)


def test_status_agrees_from_hub_lane_subdirs_and_dash_c(repo: Repo) -> None:
    lp = repo.create("alpha")
    (repo.path / "sub dir ü" / "deeper").mkdir(parents=True)
    (lp / "lane sub").mkdir()
    main = repo.sha()
    seen = []
    for where, args in [
        (repo.path, ()),
        (repo.path / "sub dir ü" / "deeper", ()),
        (lp, ()),
        (lp / "lane sub", ()),
        (repo.path.parent, ("-C", str(repo.path / "sub dir ü"))),
        (repo.path.parent, ("-C", str(lp / "lane sub"))),
    ]:
        r = lane(*args, "status", "--json", cwd=where)
        assert r.rc == 0, (where, r.stderr)
        d = r.json
        seen.append((_real(d["hub"]["path"]), d["main"]["sha"], [ln["key"] for ln in d["lanes"]]))
    assert seen == [(_real(repo.path), main, ["alpha"])] * len(seen)


def test_common_dir_is_shared_by_hub_and_lane(repo: Repo) -> None:
    lp = repo.create("alpha")
    from_lane = EngineRepo.discover(lp / ".")
    from_hub = EngineRepo.discover(repo.path)
    assert _real(from_lane.common_dir) == _real(repo.common_dir) == _real(from_hub.common_dir)
    assert _real(from_lane.toplevel) == _real(lp)
    assert from_lane.state_dir == from_lane.common_dir / "git-lane"
    hub = from_lane.hub()
    assert hub is not None and _real(hub.path) == _real(repo.path)
    # a lane created from inside another lane is registered in the one shared store
    r = lane("create", "beta", "--json", cwd=lp)
    assert r.rc == 0, r.stderr
    assert (repo.state_dir / "lanes" / "beta.json").is_file()
    assert git(repo.path, "rev-parse", "refs/heads/lane/beta").stdout.strip() == repo.sha()


def test_not_a_git_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "plain dir ü"
    outside.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    r = lane("status", "--json", cwd=outside)
    assert (r.rc, r.code) == (1, "not_a_git_repo")
    assert "refused [not_a_git_repo]" in r.stderr
    r = lane("-C", str(outside / "missing"), "status", "--json", cwd=tmp_path)
    assert (r.rc, r.code) == (1, "not_a_git_repo")
    assert not (outside / ".git").exists()


def test_no_main_branch_in_empty_repo(tmp_path: Path) -> None:
    p = tmp_path / "empty"
    p.mkdir()
    git(p, "init", "-q", "-b", "main")
    for cmd in (("status",), ("create", "x")):
        r = lane(*cmd, "--json", cwd=p)
        assert (r.rc, r.code) == (1, "no_main_branch"), cmd
    assert git(p, "worktree", "list", "--porcelain").stdout.count("worktree ") == 1
    assert git(p, "for-each-ref").stdout == ""


def test_no_main_branch_when_only_trunk_then_configured(tmp_path: Path) -> None:
    p = tmp_path / "trunk repo"
    p.mkdir()
    git(p, "init", "-q", "-b", "trunk")
    git(p, "commit", "-q", "--allow-empty", "-m", "init")
    r = lane("status", "--json", cwd=p)
    assert (r.rc, r.code) == (1, "no_main_branch")
    # main is never guessed further than main/master; naming it in config works
    assert lane("config", "set", "main_branch", "trunk", cwd=p).rc == 0
    r = lane("status", "--json", cwd=p)
    assert r.rc == 0, r.stderr
    tip = git(p, "rev-parse", "trunk").stdout.strip()
    assert r.json["main"] == {"branch": "trunk", "sha": tip}
    assert _real(r.json["hub"]["path"]) == _real(p)


def test_configured_main_that_does_not_exist(repo: Repo) -> None:
    repo.config("main_branch", "develop")
    r = repo.jlane("status")
    assert (r.rc, r.code) == (1, "no_main_branch")
    assert r.json["details"]["configured"] == "develop"


def test_master_when_no_main_and_main_wins_over_master(tmp_path: Path) -> None:
    p = tmp_path / "m"
    p.mkdir()
    git(p, "init", "-q", "-b", "master")
    git(p, "commit", "-q", "--allow-empty", "-m", "init")
    r = lane("status", "--json", cwd=p)
    assert r.rc == 0, r.stderr
    assert r.json["main"]["branch"] == "master"
    git(p, "commit", "-q", "--allow-empty", "-m", "on master")
    git(p, "branch", "main", "HEAD~1")
    r = lane("status", "--json", cwd=p)
    assert r.json["main"] == {"branch": "main", "sha": git(p, "rev-parse", "main").stdout.strip()}
    assert r.json["hub"]["path"] is None  # main exists but is checked out nowhere


def test_main_checked_out_nowhere(repo: Repo) -> None:
    repo.create("alpha")
    repo.git("checkout", "-q", "--detach")
    r = repo.jlane("status")
    assert r.rc == 0, r.stderr
    assert r.json["hub"] == {"path": None, "dirty_paths": [], "out_of_step": False}
    assert r.json["main"]["sha"] == repo.sha()
    r = repo.jlane("create", "beta")
    assert r.rc == 0, r.stderr
    assert repo.sha("refs/heads/lane/beta") == repo.sha()


def test_hub_is_the_worktree_with_main_of_a_bare_repo(repo: Repo, tmp_path: Path) -> None:
    bare = tmp_path / "bare ü.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo.path), str(bare))
    wt = tmp_path / "main wt"
    git(bare, "worktree", "add", "-q", str(wt), "main")
    for where in (bare, wt):
        r = lane("status", "--json", cwd=where)
        assert r.rc == 0, r.stderr
        assert _real(r.json["hub"]["path"]) == _real(wt)
    r = lane("create", "alpha", "--json", cwd=bare)
    assert r.rc == 0, r.stderr
    assert (bare / "git-lane" / "lanes" / "alpha.json").is_file()


def test_paths_with_spaces_and_non_ascii_everywhere(repo: Repo, tmp_path: Path) -> None:
    root = tmp_path / "wt root ñ 雪"
    repo.config("worktrees_root", str(root))
    (repo.path / "fïle with space.txt").write_text("x\n")
    lp = repo.create("alpha")
    assert _real(lp.parent.parent) == _real(root)
    (lp / "ünïcode name.txt").write_text("y\n")
    r = repo.jlane("status")
    assert r.rc == 0, r.stderr
    assert r.json["hub"]["dirty_paths"] == ["fïle with space.txt"]
    (ln,) = r.json["lanes"]
    assert ln["path"] == str(lp) and ln["dirty"] is True and ln["state"] == "active"
    assert f"worktree {lp}\n" in repo.worktrees()
    r = repo.jlane("release", "alpha", "--confirm", "yes-discard-lane")
    assert r.rc == 0, r.stderr
    assert str(lp) not in repo.worktrees() and not lp.exists()
