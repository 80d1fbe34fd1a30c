"""`git lane create`: keys (given, automatic, invalid), max_lanes, the branch at main's tip,
where the worktree goes, refusing to touch an existing branch or directory, --owner-pid;
and key validation as a property against the DESIGN regex."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from conftest import Repo, git, lane
from hypothesis import example, given
from hypothesis import strategies as st

from guard import policy
from guard.errors import Refusal
from guard.lane import check_key

DESIGN_KEY = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def cache_root() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "git-lane" / "worktrees"


def lane_branches(repo: Repo) -> list[str]:
    out = repo.git("for-each-ref", "--format=%(refname)", "refs/heads/lane/").stdout
    return out.split()


def registered(repo: Repo) -> list[str]:
    d = repo.state_dir / "lanes"
    return sorted(p.stem for p in d.glob("*.json")) if d.exists() else []


def test_create_given_key(repo: Repo) -> None:
    repo.commit(repo.path, "b.txt", "b\n")
    r = repo.jlane("create", "alpha")
    assert (r.rc, r.code) == (0, "created"), r.stderr
    ln = r.json["lane"]
    path = Path(ln["path"])
    assert (ln["key"], ln["branch"], ln["state"]) == ("alpha", "lane/alpha", "active")
    assert (ln["fresh"], ln["dirty"], ln["ahead"], ln["behind"]) == (True, False, 0, 0)
    for field in ("sync_required", "rebase_in_progress", "owner_alive", "advice"):
        assert field in ln
    assert repo.sha("refs/heads/lane/alpha") == repo.sha()
    assert f"worktree {path}\nHEAD {repo.sha()}\nbranch refs/heads/lane/alpha\n" in repo.worktrees()
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "lane/alpha"
    assert (path / "b.txt").read_text() == "b\n"
    # <root>/<repo-slug>-<8hex>/<key> under the default root
    assert path.name == "alpha" and path.parent.parent == cache_root()
    assert re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{8}", path.parent.name)
    assert path.parent.name.startswith("hub-repo")
    # the hub's checkout is not touched
    assert repo.git("status", "--porcelain").stdout == ""
    assert repo.git("rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "main"


def test_same_named_repos_get_distinct_slugs(tmp_path: Path) -> None:
    paths = []
    for parent in ("one", "two"):
        p = tmp_path / parent / "proj"
        p.mkdir(parents=True)
        git(p, "init", "-q", "-b", "main")
        git(p, "commit", "-q", "--allow-empty", "-m", "init")
        r = lane("create", "alpha", "--json", cwd=p)
        assert r.rc == 0, r.stderr
        paths.append(Path(r.json["lane"]["path"]))
    assert paths[0] != paths[1]
    assert paths[0].parent.name.startswith("proj-") and paths[1].parent.name.startswith("proj-")


def test_auto_keys_take_the_lowest_free_number(repo: Repo) -> None:
    keys = [repo.jlane("create").json["lane"]["key"] for _ in range(3)]
    assert keys == ["adhoc-1", "adhoc-2", "adhoc-3"]
    assert repo.jlane("release", "adhoc-2").code == "released"
    assert repo.jlane("create").json["lane"]["key"] == "adhoc-2"
    # --goal: <goal>-<n>, skipping a number whose branch or directory is already taken
    repo.git("branch", "lane/g42-1")
    slug_dir = Path(repo.jlane("status").json["lanes"][0]["path"]).parent
    (slug_dir / "g42-2").mkdir()
    r = repo.jlane("create", "--goal", "g42")
    assert r.rc == 0, r.stderr
    assert (r.json["lane"]["key"], r.json["lane"]["goal"]) == ("g42-3", "g42")
    # a goal that is not a key is made one (tests/test_output.py); one with no letter or
    # digit cannot be
    assert repo.jlane("create", "--goal", "-- !!").code == "invalid_lane_key"


@pytest.mark.parametrize(
    "key",
    [
        "../x",
        "x/../../y",
        "ABC",
        "a" * 64,
        "",
        "-x",
        "x-",
        "-",
        "a_b",
        "a.b",
        "a b",
        "é",
        "x\n",
        "lane/x",
    ],
    ids=repr,
)
def test_invalid_keys_are_refused(repo: Repo, key: str) -> None:
    r = repo.lane("--json", "create", "--", key)
    assert (r.rc, r.code) == (1, "invalid_lane_key")
    assert r.json["details"]["key"] == key
    assert lane_branches(repo) == [] and registered(repo) == []
    assert repo.worktrees().count("worktree ") == 1
    assert not cache_root().exists() or not any(cache_root().rglob("*"))


def test_longest_key_is_fine(repo: Repo) -> None:
    key = "a" + "-" * 61 + "9"
    r = repo.jlane("create", key)
    assert r.rc == 0, r.stderr
    assert repo.sha(f"refs/heads/lane/{key}") == repo.sha()


def test_max_lanes_counts_only_active_lanes(repo: Repo) -> None:
    repo.config("max_lanes", "2")
    a = repo.create("a")
    repo.create("b")
    r = repo.jlane("create", "c")
    assert (r.rc, r.code) == (1, "max_lanes")
    assert sorted(r.json["details"]["active"]) == ["a", "b"]
    assert "refs/heads/lane/c" not in lane_branches(repo) and "c" not in registered(repo)
    assert repo.jlane("release", "b").code == "released"  # released: no longer counts
    assert repo.jlane("create", "c").rc == 0
    assert repo.jlane("create", "d").code == "max_lanes"
    os.rename(a, a.with_name("a-moved"))  # the worktree vanished ...
    assert repo.jlane("reconcile").rc == 0  # ... so lane a is orphaned, not active
    assert repo.jlane("create", "d").rc == 0


def test_worktrees_root_inside_the_repository(repo: Repo) -> None:
    for root in ("lanes", str(repo.path / "deep" / "lanes"), str(repo.path)):
        repo.config("worktrees_root", root)
        r = repo.jlane("create", "alpha")
        assert (r.rc, r.code) == (1, "invalid_config"), root
        assert r.json["details"]["key"] == "worktrees_root"
        assert lane_branches(repo) == [] and registered(repo) == []
    repo.config("allow_in_repo_worktrees", "true")
    r = repo.jlane("create", "alpha")
    assert r.rc == 0, r.stderr
    path = Path(r.json["lane"]["path"])
    assert path.parent.parent == repo.path
    assert repo.sha("refs/heads/lane/alpha") == repo.sha()


def test_worktrees_root_outside_and_relative_to_home(repo: Repo) -> None:
    repo.config("worktrees_root", "~/my lanes")
    path = Path(repo.jlane("create", "alpha").json["lane"]["path"])
    assert path.parent.parent == Path(os.environ["HOME"]) / "my lanes"


def test_existing_branch_is_refused_and_left_alone(repo: Repo) -> None:
    old = repo.sha()
    assert old is not None
    repo.commit(repo.path, "b.txt", "b\n")
    repo.git("branch", "lane/alpha", old)
    r = repo.jlane("create", "alpha")
    assert (r.rc, r.code) == (1, "branch_exists")
    assert repo.sha("refs/heads/lane/alpha") == old
    assert "lane/alpha" not in repo.worktrees() and registered(repo) == []


def test_existing_directory_is_refused_and_left_alone(repo: Repo) -> None:
    probe = Path(repo.jlane("create", "probe").json["lane"]["path"])
    target = probe.parent / "alpha"
    target.mkdir()
    (target / "precious.txt").write_text("keep me\n")
    r = repo.jlane("create", "alpha")
    assert (r.rc, r.code) == (1, "worktree_path_exists")
    assert r.json["details"]["path"] == str(target)
    assert (
        os.listdir(target) == ["precious.txt"]
        and (target / "precious.txt").read_text() == "keep me\n"
    )
    assert "refs/heads/lane/alpha" not in lane_branches(repo) and "alpha" not in registered(repo)


def test_existing_lane_is_refused(repo: Repo) -> None:
    repo.create("alpha")
    before = repo.worktrees()
    r = repo.jlane("create", "alpha")
    assert r.rc == 1 and r.code in ("lane_exists", "branch_exists", "worktree_path_exists")
    assert repo.worktrees() == before


def test_owner_pid_records_pid_and_start_time(repo: Repo) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        r = repo.jlane("create", "alpha", "--owner-pid", str(owner.pid))
        assert r.rc == 0, r.stderr
        assert (r.json["lane"]["owner_pid"], r.json["lane"]["owner_alive"]) == (owner.pid, True)
        rec = json.loads((repo.state_dir / "lanes" / "alpha.json").read_text())
        assert rec["owner_pid"] == owner.pid
        assert abs(rec["owner_start"] - psutil.Process(owner.pid).create_time()) < 0.05
    finally:
        owner.kill()
        owner.wait()
    r = repo.jlane("create", "beta", "--owner-pid", str(owner.pid))
    assert (r.rc, r.code) == (1, "unknown_process")
    assert "refs/heads/lane/beta" not in lane_branches(repo)


# -- key validation as a property ---------------------------------------------------------
def oracle(key: str) -> bool:
    """The DESIGN rule spelled out without a regex."""
    return (
        1 <= len(key) <= 63
        and all(c in ALNUM + "-" for c in key)
        and key[0] != "-"
        and key[-1] != "-"
    )


PIECES = [
    *ALNUM[:3],
    *ALNUM[-3:],
    "-",
    "/",
    ".",
    "..",
    "A",
    "Z",
    "_",
    " ",
    "\n",
    "\r",
    "\t",
    "\x00",
    "é",
    "ß",
    "İ",
    "٣",
    "０",
    "ａ",
    "\u200b",
    "~",
    "^",
    ":",
    "@{",
]
adversarial = st.lists(st.sampled_from(PIECES), max_size=70).map("".join)


@given(st.text(max_size=80) | adversarial | st.from_regex(DESIGN_KEY, fullmatch=True))
@example("a" * 63)
@example("a" * 64)
@example("abc\n")
@example("\nabc")
@example("a--b")
@example("0")
@example("ı")  # dotless i: lower-cases and upper-cases into ASCII letters
@example("K")  # Kelvin sign
def test_valid_key_matches_design_regex(key: str) -> None:
    expected = bool(re.fullmatch(DESIGN_KEY.strip("^$"), key))
    assert policy.valid_key(key) is expected
    assert expected is oracle(key)
    if expected:
        assert "/" not in key and key not in (".", "..") and key == key.strip()
        check_key(key)
    else:
        with pytest.raises(Refusal) as exc:
            check_key(key)
        assert exc.value.code == "invalid_lane_key"


@given(
    st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True),
    st.sets(st.integers(min_value=1, max_value=30), max_size=30),
)
def test_auto_key_is_lowest_free(prefix: str, used: set[int]) -> None:
    taken = {f"{prefix}-{n}" for n in used} | {"unrelated"}
    key = policy.auto_key(prefix, taken)
    n = int(key.rsplit("-", 1)[1])
    assert key == f"{prefix}-{n}" and key not in taken
    assert all(f"{prefix}-{m}" in taken for m in range(1, n))
    assert policy.valid_key(key)


@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandbox"])
def test_prefer_symlink_refs_never_makes_a_lane_unreadable(repo: Repo, sandboxed: bool) -> None:
    """core.preferSymlinkRefs=true (a user's old setting) has git write a symbolic ref as
    a symlink: `git worktree add` made the new lane's HEAD one, which the engine refuses
    in a lane's admin dir (a link: admin_unreadable), so create failed at once. The
    engine's git writes HEAD as a file; a sandboxed CMD's git does too (the kernel lets
    it make no link there, and git then writes the file); a plain CMD's git keeps the
    user's setting, and the refusal's next, reconcile, writes the link back as a file.
    A sync rebases, a land lands."""
    from guard import sandbox

    if sandboxed and sandbox.usable(sandbox.abi()):
        pytest.skip(f"no usable Landlock: {sandbox.usable(sandbox.abi())}")
    git(repo.path, "config", "core.preferSymlinkRefs", "true")
    repo.config("gate", "off")
    alpha = repo.create("alpha")
    beta = repo.create("beta")
    r = repo.lane(
        "exec", *(["--sandbox"] if sandboxed else []), "alpha", "--", "sh", "-c",
        "echo a > a && git add a && git commit -qm a && git rebase -q --force-rebase main",
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    r = repo.jlane("land", "alpha")
    if not sandboxed:
        assert (r.rc, r.code, r.json["next"]) == (1, "admin_unreadable", ["git lane reconcile"])
        assert repo.lane("reconcile").rc == 0
        r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stdout
    repo.commit(beta, "b", "b\n")
    r = repo.lane("sync", "beta")
    assert r.rc == 0, r.stderr
    for where in (alpha, beta):
        head = Path(git(where, "rev-parse", "--git-path", "HEAD").stdout.strip())
        head = head if head.is_absolute() else where / head
        assert head.is_file() and not head.is_symlink(), head
    assert repo.lane("land", "beta").rc == 0


def test_a_key_like_a_gate_worktrees_name_is_refused(repo: Repo) -> None:
    """`git lane create git-lane-gate-x` matched the key pattern, and git names the
    lane's admin dir after its worktree, `worktrees/git-lane-gate-x`: git-lane takes every
    such dir for a clean gate worktree's (never trusted, swept when a land was killed),
    so the lane was orphaned from birth and reconcile deleted its admin dir (red team
    14D). The prefix is git-lane's own: invalid_lane_key, nothing made."""
    r = repo.jlane("create", "git-lane-gate-x")
    assert (r.rc, r.code) == (1, "invalid_lane_key"), r.stdout
    assert r.json["next"] == ["git lane status"]
    assert not (repo.common_dir / "worktrees" / "git-lane-gate-x").exists()
    assert "refs/heads/lane/git-lane-gate-x" not in lane_branches(repo)
    assert repo.jlane("create", "gate-x").rc == 0  # the word alone is a key


def test_create_refuses_main_not_plain_while_a_link_is_on_mains_way(hub: Repo) -> None:
    """Red team 14H-A F2: with main read through a link at its parent directory, the hook
    refuses every ref update, git worktree add's new branch too: create ended in an
    internal error (GitError, a crash file). It refuses main_not_plain before it makes
    anything, naming restore-main; after that, create works."""
    tip = hub.sha()
    assert tip is not None
    hub.git("branch", "team/main", tip)
    hub.config("main_branch", "team/main")
    heads = hub.common_dir / "refs" / "heads"
    (heads / "lane" / "x").mkdir(parents=True)
    (heads / "team" / "main").rename(heads / "lane" / "x" / "main")
    (heads / "team").rmdir()
    (heads / "team").symlink_to("lane/x")
    r = hub.jlane("create", "alpha")
    assert (r.rc, r.code) == (1, "main_not_plain"), r.stdout
    assert r.json["next"] == ["git lane restore-main", "git lane create alpha"], r.json
    assert hub.sha("refs/heads/lane/alpha") is None
    assert hub.jlane("restore-main").rc == 0
    assert hub.jlane("create", "alpha").rc == 0
