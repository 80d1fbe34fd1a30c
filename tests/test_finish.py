"""The red-team pass over issue 9, each through the real CLI: refusal alternatives one per
line, not_a_git_repo that does not init the cwd, a worker told about a lane that does not
exist, release during a sync, long keys in the text tables, paths with a newline, `path`
of an orphaned lane, setup state once setup_command is unset, and ignored files that
setup left (not work) versus ones a person made (work, with a way out that does not loop)."""

from __future__ import annotations

from pathlib import Path

from conftest import Repo


def test_alternatives_print_one_per_line(repo: Repo) -> None:
    repo.create("alpha")
    repo.create("beta")
    r = repo.lane("land")  # from the hub: no lane named, two to choose from
    assert r.rc == 1
    ors = [ln for ln in r.stderr.splitlines() if ln.startswith("  Or: ")]
    assert ors == ["  Or: git lane land alpha", "  Or: git lane land beta"], r.stderr
