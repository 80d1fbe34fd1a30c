"""`git lane land` ships exactly the commit its gate tested (issue 8 section 3): nothing that
`git status` hides (index flags, sparse checkouts, ignored submodules) reaches the gate."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import Repo, git
from enginehelp import head, owner_file, ready_lane, status_porcelain


def gate(repo: Repo, command: str, timeout: int | None = None) -> None:
    repo.config("gate_command", json.dumps(command))
    if timeout is not None:
        repo.config("gate_timeout", str(timeout))


def refused(repo: Repo, code: str, key: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """A land that must be refused with `code`, leaving main and the lock as they were."""
    before = repo.sha()
    r = repo.jlane("land", key, env=env)
    assert r.rc == 1, (r.rc, r.stdout, r.stderr)
    assert r.code == code, r.stdout
    assert "Traceback" not in r.stderr
    assert repo.sha() == before
    assert not owner_file(repo).exists()
    return dict(r.json)


def landed(repo: Repo, key: str, env: dict[str, str] | None = None) -> dict[str, object]:
    r = repo.jlane("land", key, env=env)
    assert r.rc == 0 and r.code == "landed", (r.rc, r.stdout, r.stderr)
    return dict(r.json)


def sh(command: str, cwd: Path) -> None:
    """Run one `next` entry exactly as written."""
    res = subprocess.run(command, shell=True, cwd=cwd, text=True, capture_output=True)
    assert res.returncode == 0, (command, res.stdout, res.stderr)


def run_next(j: dict[str, object], cwd: Path) -> None:
    """Every `next` entry but the final `git lane land`, in order."""
    nxt = list(j["next"])  # type: ignore[call-overload]
    assert nxt[-1].startswith("git lane land ")
    for cmd in nxt[:-1]:
        sh(cmd, cwd)


# -- the gate sees the tip: index flags ---------------------------------------------------------
def test_assume_unchanged_file_that_differs_is_refused(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n", "b.txt": "b\n"})
    git(path, "update-index", "--assume-unchanged", "--", "a.txt")
    (path / "a.txt").write_text("only in the worktree\n")
    assert status_porcelain(path) == ""  # git status does not show it

    j = refused(repo, "lane_index_flags", "alpha")
    assert j["details"]["assume_unchanged"] == ["a.txt"]  # type: ignore[index]
    # the next clears the flag: the change is then ordinary uncommitted work (G2)
    run_next(j, tmp_path)
    assert refused(repo, "lane_dirty", "alpha")["details"]["dirty_paths"] == ["a.txt"]  # type: ignore[index]
    git(path, "checkout", "--", "a.txt")
    landed(repo, "alpha")


def test_assume_unchanged_file_equal_to_the_tip_lands(repo: Repo) -> None:
    """The flag alone is no difference (core.ignoreStat sets it on every added file)."""
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n"})
    git(path, "update-index", "--assume-unchanged", "--", "a.txt", "README.md")
    assert landed(repo, "alpha")["main_after"] == head(path)


def test_assume_unchanged_file_deleted_or_made_executable_is_refused(repo: Repo) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n", "run.sh": "echo hi\n"})
    git(path, "update-index", "--assume-unchanged", "--", "a.txt", "run.sh")
    (path / "a.txt").unlink()
    (path / "run.sh").chmod(0o755)
    j = refused(repo, "lane_index_flags", "alpha")
    assert j["details"]["assume_unchanged"] == ["a.txt", "run.sh"]  # type: ignore[index]


def test_skip_worktree_file_that_differs_is_refused(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n"})
    git(path, "update-index", "--skip-worktree", "--", "a.txt")
    (path / "a.txt").write_text("only in the worktree\n")
    assert status_porcelain(path) == ""

    j = refused(repo, "lane_index_flags", "alpha")
    assert j["details"]["skip_worktree"] == ["a.txt"]  # type: ignore[index]
    run_next(j, tmp_path)
    refused(repo, "lane_dirty", "alpha")


def test_skip_worktree_file_missing_is_refused_and_the_next_restores_it(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "test -f a.txt")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n"})
    git(path, "update-index", "--skip-worktree", "--", "a.txt")
    (path / "a.txt").unlink()
    j = refused(repo, "lane_index_flags", "alpha")
    assert j["details"]["missing"] == ["a.txt"]  # type: ignore[index]
    run_next(j, tmp_path)
    assert (path / "a.txt").read_text() == "tip\n"
    landed(repo, "alpha")


def test_many_flagged_paths_get_a_next_that_lists_them_through_git(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "true")
    files = {f"d/f{i:02d} 'q'.txt": f"{i}\n" for i in range(30)}
    path = repo.create("alpha")
    for name, text in files.items():
        (path / name).parent.mkdir(exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "many")
    git(path, "update-index", "--skip-worktree", "--", *files)
    for name in files:
        (path / name).unlink()
    j = refused(repo, "lane_index_flags", "alpha")
    assert len(j["details"]["missing"]) == 30  # type: ignore[arg-type]
    run_next(j, tmp_path)
    assert all((path / n).exists() for n in files)
    landed(repo, "alpha")


def test_sparse_checkout_in_the_lane_is_refused(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "test -f b/two.txt")
    path = ready_lane(repo, "alpha", {"a/one.txt": "1\n", "b/two.txt": "2\n"})
    git(path, "sparse-checkout", "set", "a")
    assert not (path / "b" / "two.txt").exists()
    assert status_porcelain(path) == ""

    j = refused(repo, "lane_index_flags", "alpha")
    d = j["details"]
    assert d["sparse"] is True and "b/two.txt" in d["missing"]  # type: ignore[index,operator]
    run_next(j, tmp_path)
    assert (path / "b" / "two.txt").exists()
    landed(repo, "alpha")


def test_sparse_lane_lands_when_no_gate_looks_at_it(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha", {"a/one.txt": "1\n", "b/two.txt": "2\n"})
    git(path, "sparse-checkout", "set", "a")
    landed(repo, "alpha")


# -- the gate sees the tip: submodules ----------------------------------------------------------
@pytest.fixture
def with_submodule(repo: Repo, tmp_path: Path) -> Path:
    """main records a submodule `sub` whose .gitmodules says `ignore = all`."""
    home = Path(os.environ["HOME"])
    with open(home / ".gitconfig", "a") as f:
        f.write('[protocol "file"]\n\tallow = always\n')
    sub = tmp_path / "subrepo"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "s.txt").write_text("s\n")
    git(sub, "add", "s.txt")
    git(sub, "commit", "-q", "-m", "s")
    git(repo.path, "submodule", "add", "-q", str(sub), "sub")
    git(repo.path, "config", "-f", ".gitmodules", "submodule.sub.ignore", "all")
    git(repo.path, "add", ".gitmodules")
    git(repo.path, "commit", "-q", "-m", "add sub")
    return sub


def test_submodule_at_another_commit_hidden_by_ignore_all_is_refused(
    repo: Repo, with_submodule: Path, tmp_path: Path
) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha")
    git(path, "submodule", "update", "--init", "-q")
    recorded = head(path / "sub")
    (path / "sub" / "s.txt").write_text("moved\n")
    git(path / "sub", "commit", "-q", "-am", "moved")
    assert status_porcelain(path) == ""

    j = refused(repo, "submodule_differs", "alpha")
    [s] = j["details"]["submodules"]  # type: ignore[index]
    assert (s["path"], s["recorded"], s["head"]) == ("sub", recorded, head(path / "sub"))
    run_next(j, tmp_path)
    assert head(path / "sub") == recorded
    landed(repo, "alpha")


def test_submodule_with_changes_hidden_by_ignore_is_refused(repo: Repo, with_submodule: Path, tmp_path: Path) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha")
    git(path, "submodule", "update", "--init", "-q")
    (path / "sub" / "s.txt").write_text("edited, not committed\n")
    assert status_porcelain(path) == ""
    j = refused(repo, "submodule_differs", "alpha")
    assert j["details"]["submodules"][0]["dirty_paths"] == ["s.txt"]  # type: ignore[index]
    run_next(j, tmp_path)
    landed(repo, "alpha")


def test_unpopulated_submodule_lands(repo: Repo, with_submodule: Path) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha")  # a new worktree does not populate submodules
    assert landed(repo, "alpha")["main_after"] == head(path)
