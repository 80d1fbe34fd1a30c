"""The hooks fail closed (issue 8): a hook that cannot establish a fact it needs refuses
any update that could touch main; it never allows by default.

- git itself unreachable or fake for the hook (PATH, GIT_EXEC_PATH, --exec-path pointing
  nowhere or at a `git` that prints nothing), from the hub and from a lane, for
  `update-ref` on main and for a commit on main (with and without --no-verify);
- a config file the hook cannot read;
- the conflict-marker check's Python failing: the commit is refused, not waved through.
(A `guard/` package in a lane or hub: tests/test_hooks_isolated.py; sha256:
tests/test_hooks_sha256.py.)

Tests assert on exit status, `[code]` on stderr and git's resulting refs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Repo, git
from hookfix import assert_ok, assert_refused, commit_file, install, make_lane, run, sha


GIT = shutil.which("git") or "/usr/bin/git"
FACTS = "hook_facts_unknown"
CONFLICT = "top\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> lane/b\nbottom\n"


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


def _guarded(base: Path, fmt: str) -> Guarded:
    repo = _repo(base, fmt)
    assert_ok(commit_file(repo.path, "second.txt", "2\n", "second"))
    install(repo)
    lane = make_lane(repo, "x")
    assert_ok(commit_file(lane, "x.txt", "x\n"))
    main = sha(repo.path, "refs/heads/main")
    tip = sha(lane, "refs/heads/lane/x")
    assert main and tip
    return Guarded(repo, repo.path, lane, main, tip)


@pytest.fixture
def g1(tmp_path: Path) -> Guarded:
    return _guarded(tmp_path, "sha1")


def main_is(g: Guarded, expected: str) -> None:
    assert sha(g.hub, "refs/heads/main") == expected


# -- git unreachable or fake, for the hooks ----------------------------------------------
def _fake(base: Path, name: str, body: str) -> Path:
    d = base / name
    d.mkdir(exist_ok=True)
    (d / "git").write_text(f"#!/bin/sh\n{body}\n")
    (d / "git").chmod(0o755)
    return d


def _vector(base: Path, name: str) -> tuple[list[str], dict[str, str]]:
    """argv prefix and environment for running the real git while the hooks it starts
    find no git, or a fake one (git puts its exec path first on the hooks' PATH)."""
    empty = base / "empty-exec-path"
    empty.mkdir(exist_ok=True)
    env = dict(os.environ)
    path = env.get("PATH", "/usr/bin:/bin")
    if name == "no-path":
        return [GIT, "--exec-path=/nonexistent"], {**env, "PATH": "/nonexistent"}
    if name == "no-path-exec-env":
        return [GIT], {**env, "PATH": "/nonexistent", "GIT_EXEC_PATH": str(empty)}
    if name == "fake-exit-1":
        fake = _fake(base, "fake1", "exit 1")
        return [GIT], {**env, "PATH": f"{fake}:{path}", "GIT_EXEC_PATH": str(empty)}
    if name == "fake-silent-0":
        fake = _fake(base, "fake0", "exit 0")
        return [GIT], {**env, "PATH": f"{fake}:{path}", "GIT_EXEC_PATH": str(empty)}
    if name == "fake-exec-path":
        fake = _fake(base, "fakex", "exit 1")
        return [GIT, f"--exec-path={fake}"], env
    raise AssertionError(name)


VECTORS = ["no-path", "no-path-exec-env", "fake-exit-1", "fake-silent-0", "fake-exec-path"]


def _git(
    where: Path, prefix: list[str], env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, *args], cwd=where, env=env, capture_output=True, text=True, timeout=60
    )


def packed(g: Guarded) -> None:
    """main only in packed-refs: a loose refs/heads/main settles which branch is main with
    no git to ask (gl_main_name), so the hook must ask git only when there is none."""
    git(g.hub, "pack-refs", "--all", "--prune")
    assert not (g.repo.common_dir / "refs" / "heads" / "main").exists()


@pytest.mark.parametrize("vector", VECTORS)
def test_update_ref_of_main_refused_when_the_hook_cannot_ask_git(
    g1: Guarded, tmp_path: Path, vector: str
) -> None:
    prefix, env = _vector(tmp_path, vector)
    for where in (g1.hub, g1.lane):
        res = _git(where, prefix, env, "update-ref", "refs/heads/main", g1.lane_tip)
        assert_refused(res, FACTS)
        main_is(g1, g1.main)


@pytest.mark.parametrize("vector", VECTORS)
@pytest.mark.parametrize("verify", ["", "--no-verify"])
def test_commit_on_main_refused_when_the_hook_cannot_ask_git(
    g1: Guarded, tmp_path: Path, vector: str, verify: str
) -> None:
    packed(g1)
    prefix, env = _vector(tmp_path, vector)
    flags = [verify] if verify else []
    res = _git(g1.hub, prefix, env, "commit", "-q", "--allow-empty", *flags, "-m", "x")
    assert_refused(res, FACTS)
    main_is(g1, g1.main)
    # from a lane worktree that has main checked out (the hub gave it up)
    git(g1.hub, "switch", "-q", "--detach")
    git(g1.lane, "switch", "-q", "main")
    res = _git(g1.lane, prefix, env, "commit", "-q", "--allow-empty", *flags, "-m", "x")
    assert_refused(res, FACTS)
    main_is(g1, g1.main)


def test_an_exec_path_without_git_still_decides(g1: Guarded, tmp_path: Path) -> None:
    """GIT_EXEC_PATH at an empty directory leaves the hook the git on PATH: it decides."""
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"GIT_EXEC_PATH": str(empty)}
    assert_refused(run(g1.lane, "update-ref", "refs/heads/main", g1.lane_tip, env=env))
    assert_refused(run(g1.hub, "commit", "-q", "--allow-empty", "-m", "x", env=env))
    main_is(g1, g1.main)
    assert_ok(run(g1.lane, "commit", "-q", "--allow-empty", "-m", "lane work", env=env))


def test_pre_rebase_refuses_when_it_cannot_ask_git(g1: Guarded, tmp_path: Path) -> None:
    packed(g1)
    prefix, env = _vector(tmp_path, "fake-exit-1")
    res = _git(g1.hub, prefix, env, "rebase", "--no-fork-point", "lane/x")
    assert_refused(res, FACTS)
    main_is(g1, g1.main)


def test_an_unreadable_config_file_refuses(g1: Guarded) -> None:
    """The user config.toml is a directory: the hook cannot know which branch the config
    protects (the engine refuses such a file too), so it refuses every branch update."""
    from guard.config import user_config_path

    user_config_path().mkdir(parents=True)
    assert_refused(run(g1.lane, "update-ref", "refs/heads/main", g1.lane_tip), FACTS)
    assert_refused(run(g1.lane, "branch", "trunk"), FACTS)
    main_is(g1, g1.main)
    assert sha(g1.hub, "refs/heads/trunk") is None


@pytest.mark.parametrize("name", ["HEAD", "-x", "a..b", "a b", "refs/heads/main"])
def test_a_main_branch_no_branch_can_have_refuses(g1: Guarded, name: str) -> None:
    """main_branch written by hand as a name git would not take for a branch: the hook
    does not know which branch to guard (guarding refs/heads/HEAD would leave main open),
    so it refuses, as the engine refuses invalid_config."""
    (g1.repo.state_dir / "config.toml").write_text(f'main_branch = "{name}"\n')
    assert_refused(run(g1.lane, "update-ref", "refs/heads/main", g1.lane_tip), FACTS)
    assert_refused(commit_file(g1.hub, "m.txt", "m\n"), FACTS)
    main_is(g1, g1.main)


def test_a_config_line_the_hooks_cannot_read_refuses(g1: Guarded) -> None:
    """A line that is no blank, comment, [table], `key = value` (bare key) or array
    element (what a GIT_TRACE appended: `<time> git.c:NN trace: ... 'x` then `enabled =
    "false"`): the hooks do not know what the file says, so they refuse rather than obey
    the `enabled = "false"` after it; the engine refuses the file too (invalid_config)."""
    cfg = g1.repo.state_dir / "config.toml"
    cfg.write_text(
        'sync_policy = "land_time_only"\nwide = [\n    "a",\n    "b",\n]\n'
        "12:00:00.000000 git.c:463  trace: built-in: git status '\n"
        'enabled = "false"\n\'\n'
    )
    assert_refused(run(g1.lane, "update-ref", "refs/heads/main", g1.lane_tip), FACTS)
    assert_refused(commit_file(g1.hub, "m.txt", "m\n"), FACTS)
    main_is(g1, g1.main)
    res = g1.repo.lane("status")
    assert res.rc == 1 and "refused [invalid_config]" in res.stderr, (res.rc, res.stderr)
    # a multi-line array of strings alone (tomli_w writes long ones so) is read fine
    cfg.write_text('wide = [\n    "a",\n    "b",\n]\nenabled = true\n')
    assert_refused(
        run(g1.lane, "update-ref", "refs/heads/main", g1.lane_tip), "main_mutation_refused"
    )


def test_bootstrap_still_creates_main(tmp_path: Path) -> None:
    """The first commit of a new repository (no main anywhere) is allowed; a second is not."""
    path = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    install(Repo(path))
    assert_ok(run(path, "commit", "-q", "--allow-empty", "-m", "init"))
    assert_refused(run(path, "commit", "-q", "--allow-empty", "--no-verify", "-m", "second"))


def test_bootstrap_is_refused_when_git_cannot_say_there_is_no_main(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    install(Repo(path))
    prefix, env = _vector(tmp_path, "fake-exit-1")
    res = _git(path, prefix, env, "commit", "-q", "--allow-empty", "--no-verify", "-m", "init")
    assert_refused(res, FACTS)
    assert sha(path, "refs/heads/main") is None


def test_bootstrap_is_over_once_main_or_a_land_existed(g1: Guarded, tmp_path: Path) -> None:
    """The first-commit exception rests on files, not on git's "no such ref": a git that
    answers so falsely (a two-line fake in the exec path) or a dangling symbolic main
    (which git reads as no main) does not reopen it."""
    fake = _fake(tmp_path, "fake-echo", "echo .git; exit 1")
    for where in (g1.hub, g1.lane):
        res = _git(
            where,
            [GIT, f"--exec-path={fake}"],
            dict(os.environ),
            "update-ref",
            "refs/heads/main",
            g1.lane_tip,
        )
        assert_refused(res)
        main_is(g1, g1.main)
    git(g1.hub, "switch", "-q", "--detach")
    assert_ok(run(g1.hub, "symbolic-ref", "refs/heads/main", "refs/heads/nothere"))
    empty_tree = run(g1.hub, "mktree", input="").stdout.strip()
    evil = git(g1.hub, "commit-tree", "-m", "evil", empty_tree).stdout.strip()
    res = run(g1.hub, "update-ref", "--no-deref", "refs/heads/main", evil)
    assert_refused(res)
    assert git(g1.hub, "symbolic-ref", "refs/heads/main").stdout.strip() == "refs/heads/nothere"


# -- the marker check's Python failing ----------------------------------------------------
def test_marker_check_refuses_when_its_python_is_broken(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python that cannot run the check (exit 1: no module guard) refuses the commit,
    naming git lane doctor; main's protection does not need Python at all."""
    fake = tmp_path / "python-without-guard"
    fake.write_text("#!/bin/sh\necho 'No module named guard' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    install(repo)
    lane = make_lane(repo, "a")
    before = sha(lane)
    res = commit_file(lane, "f.txt", CONFLICT)
    assert_refused(res, FACTS)
    assert sha(lane) == before
    git(lane, "reset", "-q", "--", "f.txt")
    assert_ok(commit_file(lane, "clean.txt", "no markers\n"))  # Python is asked only on hits
    assert_refused(run(repo.path, "commit", "-q", "--allow-empty", "-m", "x"))


# -- the lane marker -----------------------------------------------------------------------
@pytest.mark.parametrize("marker", ["", "\n", "Not A Key\n"])
def test_a_lane_marker_that_names_no_lane_is_refused_not_passed(g1: Guarded, marker: str) -> None:
    # the lane can write its own admin dir: emptying its marker must not make the hook
    # take the lane for a plain worktree and pass it unchecked
    gd = Path(run(g1.lane, "rev-parse", "--absolute-git-dir").stdout.strip())
    (gd / "gitlane-lane").write_text(marker)
    assert_refused(commit_file(g1.lane, "y.txt", "y\n"), FACTS)
    assert sha(g1.lane, "refs/heads/lane/x") == g1.lane_tip
