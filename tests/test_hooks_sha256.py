"""Every hook behaviour in a sha256 repository too (and in sha1, the same tests): there a
null object id is 64 zeros, not 40, and a hook that compared with a fixed 40-zero string
refused `git pack-refs --all`, `git gc` and `git maintenance` (their loose-ref prune
looked like moving main to a strange value), misread deletes as moves and refused
deleting a tag that shadows main. Tests assert on exit status, `[code]` on stderr and
git's resulting refs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Repo, git
from hookfix import assert_ok, assert_refused, commit_file, install, make_lane, run, sha

from guard import config


@dataclass
class Guarded:
    repo: Repo
    hub: Path
    lane: Path
    main: str
    lane_tip: str


def _repo(base: Path, fmt: str) -> Repo:
    path = base / f"hub {fmt} ü"
    git(base, "init", "-q", "-b", "main", f"--object-format={fmt}", str(path))
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    return Repo(path)


@pytest.fixture(params=["sha1", "sha256"])
def g(request: pytest.FixtureRequest, tmp_path: Path) -> Guarded:
    repo = _repo(tmp_path, request.param)
    assert_ok(commit_file(repo.path, "second.txt", "2\n", "second"))
    install(repo)
    lane = make_lane(repo, "x")
    assert_ok(commit_file(lane, "x.txt", "x\n"))
    main = sha(repo.path, "refs/heads/main")
    tip = sha(lane, "refs/heads/lane/x")
    assert main and tip
    assert len(main) == (64 if request.param == "sha256" else 40)
    return Guarded(repo, repo.path, lane, main, tip)


def main_is(g: Guarded, expected: str) -> None:
    assert sha(g.hub, "refs/heads/main") == expected


# -- the hooks' behaviours ---------------------------------------------------------------
def test_commit_on_main_refused(g: Guarded) -> None:
    assert_refused(run(g.hub, "commit", "-q", "--allow-empty", "-m", "x"))
    assert_refused(run(g.hub, "commit", "-q", "--allow-empty", "--no-verify", "-m", "x"))
    main_is(g, g.main)


def test_update_ref_of_main_refused(g: Guarded) -> None:
    assert_refused(run(g.lane, "update-ref", "refs/heads/main", g.lane_tip))
    assert_refused(run(g.lane, "update-ref", "-d", "refs/heads/main"))
    main_is(g, g.main)


def test_pack_refs_and_gc_pass(g: Guarded) -> None:
    assert_ok(run(g.hub, "pack-refs", "--all"))
    assert not (g.repo.common_dir / "refs" / "heads" / "main").exists()
    assert_ok(commit_file(g.lane, "z.txt", "z\n"))
    assert_ok(run(g.hub, "gc", "-q"))
    assert_ok(run(g.hub, "maintenance", "run", "--task=pack-refs"))
    main_is(g, g.main)
    assert f"{g.main} refs/heads/main" in (g.repo.common_dir / "packed-refs").read_text()
    git(g.hub, "switch", "-q", "--detach")
    assert_refused(run(g.lane, "update-ref", "-d", "refs/heads/main"))
    assert_refused(run(g.lane, "update-ref", "refs/heads/main", "lane/x"))
    main_is(g, g.main)


def test_land_moves_main(g: Guarded) -> None:
    config.write(g.repo.state_dir / "config.toml", "gate", "off")
    r = g.repo.jlane("land", "x")
    assert r.rc == 0, r.stderr
    assert r.code == "landed"
    main_is(g, g.lane_tip)


def test_branch_delete_of_main_refused(g: Guarded) -> None:
    git(g.hub, "switch", "-q", "--detach")
    res = run(g.lane, "branch", "-D", "main")
    assert_refused(res)
    main_is(g, g.main)
    ev = [e for e in _events(g) if e.get("hook") == "reference-transaction"][-1]
    assert set(ev["new"]) == {"0"} and len(ev["new"]) == len(g.main)  # a delete, seen as one


def test_shadows_of_main_refused_and_their_deletes_pass(g: Guarded) -> None:
    assert_refused(run(g.lane, "tag", "main", "HEAD"))
    git(g.hub, "-c", "core.hooksPath=/dev/null", "tag", "main")
    assert_ok(run(g.lane, "tag", "-d", "main"))  # a delete, never a shadow
    assert sha(g.hub, "refs/tags/main") is None


def test_lane_commit_and_branch_work_pass(g: Guarded) -> None:
    assert_ok(commit_file(g.lane, "y.txt", "y\n"))
    assert_ok(run(g.lane, "branch", "scratch"))
    assert_ok(run(g.lane, "branch", "-D", "scratch"))
    assert_ok(run(g.lane, "tag", "v1"))
    assert_ok(run(g.lane, "tag", "-d", "v1"))


def _events(g: Guarded) -> list[dict[str, object]]:
    p = g.repo.state_dir / "events.jsonl"
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
