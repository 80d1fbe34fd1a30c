"""Red team 3: programs git runs with its own directory first on PATH (a pager, an editor,
an external diff, an ssh command, difftool -x, template hooks, rebase -x) would reach the
real git past the shim; under a real `git lane exec`, each is refused and main stays put.
Also GITLANE_INTERNAL=1 is no pass for a bound process, and a message that looks like an
option is a message."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo

P = "git -c core.hooksPath=/dev/null update-ref refs/heads/main HEAD"


@pytest.fixture
def gitlane_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`git lane` resolves to this checkout (git finds `git-lane` on PATH)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "git-lane"
    exe.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m guard "$@"\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    root = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    )
    return bindir


@pytest.fixture
def alpha(repo: Repo, gitlane_on_path: Path) -> Path:
    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    repo.commit(path, "w.txt", "work\n", "work")
    return path


def lx(repo: Repo, lane: Path, script: str) -> subprocess.CompletedProcess[str]:
    """`git lane exec alpha -- sh -c SCRIPT` in the lane."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITLANE_")}
    return subprocess.run(
        [sys.executable, "-m", "guard", "exec", "alpha", "--", "sh", "-c", script],
        cwd=lane,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "script",
    [
        f"git grep -O'{P} #' -e work",
        f"EDITOR='{P}; true' git commit --allow-empty -e -m x",
        f"echo z >> w.txt; GIT_EXTERNAL_DIFF='{P} #' git diff",
        f"GIT_SSH_COMMAND='{P}; false' git fetch -q ssh://h/r",
        f"echo z >> w.txt; git difftool -y -x '{P} #'",
        f"git rebase -x '{P}' HEAD~1",
        f"GITLANE_INTERNAL=1 {P}",
        "GITLANE_INTERNAL=1 git update-ref refs/heads/main HEAD",
    ],
    ids=["grep-O", "editor", "ext-diff", "ssh", "difftool-x", "rebase-x", "internal", "internal2"],
)
def test_a_program_git_runs_cannot_reach_the_real_git(repo: Repo, alpha: Path, script: str) -> None:
    main = repo.sha()
    res = lx(repo, alpha, script)
    assert "git-lane: refused [" in res.stderr, (res.returncode, res.stdout, res.stderr)
    assert repo.sha() == main
    assert "Traceback" not in res.stderr


def test_template_hooks_of_a_clone_cannot_reach_the_real_git(
    repo: Repo, alpha: Path, tmp_path: Path
) -> None:
    hooks = tmp_path / "tpl" / "hooks"
    hooks.mkdir(parents=True)
    hook = hooks / "post-checkout"
    hook.write_text(
        f"#!/bin/sh\nunset GIT_DIR GIT_INDEX_FILE; git -C {shlex.quote(str(repo.path))} "
        "-c core.hooksPath=/dev/null update-ref refs/heads/main refs/heads/lane/alpha\n"
    )
    hook.chmod(0o755)
    bare = tmp_path / "o.git"
    repo.git("clone", "-q", "--bare", str(repo.path), str(bare))
    main = repo.sha()
    res = lx(
        repo, alpha, f"git clone -q --template={shlex.quote(str(tmp_path / 'tpl'))} {bare} sub"
    )
    assert "git-lane: refused [unsafe_config]" in res.stderr, res.stderr
    assert repo.sha() == main
    assert not (alpha / "sub").exists()


def test_a_plain_editor_and_pager_still_work(repo: Repo, alpha: Path) -> None:
    res = lx(
        repo,
        alpha,
        "GIT_EDITOR=true EDITOR=true PAGER=cat git commit --allow-empty -e -m ok && git log -1",
    )
    assert res.returncode == 0, res.stderr
    assert "ok" in res.stdout


def test_a_message_that_looks_like_an_option_is_a_message(repo: Repo, alpha: Path) -> None:
    res = lx(repo, alpha, 'git commit -q --allow-empty -m "--fix: x" && git log -1 --format=%s')
    assert (res.returncode, res.stdout.strip()) == (0, "--fix: x"), res.stderr
    res = lx(repo, alpha, "git commit -q --allow-empty --message --x && git log -1 --format=%s")
    assert (res.returncode, res.stdout.strip()) == (0, "--x"), res.stderr


def refusal_next(res: subprocess.CompletedProcess[str]) -> str:
    assert "git-lane: refused [" in res.stderr, res.stderr
    return res.stderr.split("Next: ", 1)[1].strip()


def test_every_next_of_these_refusals_runs(repo: Repo, alpha: Path) -> None:
    # stash pop with no stash: nothing to apply, so no `git stash apply` to suggest
    nxt = refusal_next(lx(repo, alpha, "git stash pop"))
    assert "stash apply" not in nxt, nxt
    # one of git's scripts: not `git-submodule status` (not on PATH; run by its path it
    # finds no git-sh-setup) but the owner's command, which runs outside the lane
    res = lx(repo, alpha, "git submodule status")
    nxt = refusal_next(res)
    assert nxt.endswith("# as the repository owner, outside the lane"), nxt
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITLANE_")}
    owner = subprocess.run(["sh", "-c", nxt], env=env, capture_output=True, text=True)
    assert owner.returncode == 0, owner.stderr
    # the hook setting dropped, the command is still refused: that refusal
    res = lx(repo, alpha, P)
    assert "[main_mutation_refused]" in res.stderr, res.stderr


def test_the_owners_own_program_variables_pass_and_a_changed_one_does_not(
    repo: Repo, alpha: Path
) -> None:
    """An askpass or editor the owner started exec with (VS Code sets GIT_ASKPASS) is the
    owner's choice: it passes; one the process sets, or a nested exec, does not."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITLANE_")}
    env["GIT_ASKPASS"] = "/opt/owner/askpass.sh"

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "guard", "exec", "alpha", "--", "sh", "-c", script],
            cwd=alpha,
            env=env,
            text=True,
            capture_output=True,
            timeout=120,
        )

    res = run("git commit -q --allow-empty -m owner && git log -1 --format=%s")
    assert (res.returncode, res.stdout.strip()) == (0, "owner"), res.stderr
    res = run("GIT_ASKPASS=/tmp/evil git commit -q --allow-empty -m x")
    assert "[unsafe_config]" in res.stderr, res.stderr
    nested = "GIT_ASKPASS=/tmp/evil git lane exec alpha -- git commit -q --allow-empty -m x"
    res = run(nested)
    assert "[unsafe_config]" in res.stderr, res.stderr
