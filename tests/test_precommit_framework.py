"""git-lane through the real pre-commit framework: the hook ids of .pre-commit-hooks.yaml
refuse a commit and a rebase on main and conflict markers in a lane, through
`pre-commit install`'s own hook scripts; and `git lane install` coexists with them in
either order (the framework's script in front, ours behind it as <hook>.legacy).

Offline by default: the hooks are declared `repo: local` / `language: system` with the
entries of .pre-commit-hooks.yaml, run by this environment's git-lane-hook. The test of
the published form (`language: python`, pre-commit pip-installing a clone of this
repository) needs PyPI and runs with GITLANE_TEST_NETWORK=1."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from conftest import ROOT, Repo, git
from hookfix import assert_ok, grepo, install, make_lane, sha

from guard.commands import doctor
from guard.commands import install as hookinstall

pytest.importorskip("pre_commit")
NETWORK = os.environ.get("GITLANE_TEST_NETWORK") == "1"  # read before the hermetic seal


def hook_defs() -> list[dict[str, Any]]:
    defs = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(defs, list)
    return defs


def test_pre_commit_hooks_yaml_declares_our_ids() -> None:
    defs = {d["id"]: d for d in hook_defs()}
    assert set(defs) == {"git-lane-guard", "git-lane-pre-rebase"}
    assert defs["git-lane-guard"]["stages"] == ["pre-commit"]
    assert defs["git-lane-pre-rebase"]["stages"] == ["pre-rebase"]
    for d in defs.values():
        assert d["language"] == "python"
        assert d["pass_filenames"] is False and d["always_run"] is True
        assert d["entry"].split()[0] == "git-lane-hook"


def test_manifest_validates_with_pre_commit() -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pre_commit",
            "validate-manifest",
            str(ROOT / ".pre-commit-hooks.yaml"),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def _env() -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)  # where git-lane-hook and pre-commit live
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def pre_commit(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
    )


def gitx(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env=_env(), capture_output=True, text=True)


@pytest.fixture
def framework(repo: Repo) -> Repo:
    """The project lists git-lane in .pre-commit-config.yaml and ran `pre-commit install`."""
    _commit_config(repo)
    _framework_install(repo)
    return repo


def refused(res: subprocess.CompletedProcess[str], code: str) -> None:
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert f"git-lane: refused [{code}]" in out, out
    assert "Traceback" not in out, out


def test_commit_on_main_refused_through_the_framework(framework: Repo) -> None:
    hooks = framework.common_dir / "hooks"
    assert hookinstall.kind(hooks / "pre-commit") == "framework"
    main = sha(framework.path, "refs/heads/main")
    (framework.path / "f.txt").write_text("x\n")
    git(framework.path, "add", "f.txt")
    res = gitx(framework.path, "commit", "-q", "-m", "on main")
    refused(res, "main_mutation_refused")
    assert "git-lane-guard" in res.stdout + res.stderr  # pre-commit's own report
    assert sha(framework.path, "refs/heads/main") == main


def test_rebase_of_main_refused_through_the_framework(framework: Repo) -> None:
    lane = make_lane(framework, "a")
    assert_ok(gitx(lane, "commit", "-q", "--allow-empty", "-m", "lane work"))
    main = sha(framework.path, "refs/heads/main")
    res = gitx(framework.path, "rebase", "lane/a")
    refused(res, "main_mutation_refused")
    assert sha(framework.path, "refs/heads/main") == main


def test_framework_in_a_lane(framework: Repo) -> None:
    lane = make_lane(framework, "a")
    (lane / "ok.txt").write_text("fine\n")
    git(lane, "add", "ok.txt")
    assert_ok(gitx(lane, "commit", "-q", "-m", "fine"))
    (lane / "bad.txt").write_text("<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n")
    git(lane, "add", "bad.txt")
    refused(gitx(lane, "commit", "-q", "-m", "bad"), "conflict_markers_present")
    # pre-commit install run inside a lane writes the same shared hooks
    res = pre_commit(lane, "install", "--hook-type", "pre-commit")
    assert res.returncode == 0, res.stdout + res.stderr
    assert str(framework.common_dir / "hooks") in res.stdout or "pre-commit installed" in res.stdout


@pytest.mark.parametrize("order", ["framework first", "git-lane first"])
def test_git_lane_install_coexists_with_the_framework(repo: Repo, order: str) -> None:
    hooks = repo.common_dir / "hooks"
    _commit_config(repo)
    if order == "git-lane first":
        install(repo)
        _framework_install(repo)
    else:
        _framework_install(repo)
        res = install(repo)
        pc = next(h for h in res["hooks"] if h["name"] == "pre-commit")
        assert pc["path"].endswith("pre-commit.legacy")
    for name in ("pre-commit", "pre-rebase"):
        assert hookinstall.kind(hooks / name) == "framework"
        assert hookinstall.kind(hooks / f"{name}.legacy") == "ours"
    assert hookinstall.kind(hooks / "reference-transaction") == "ours"
    assert install(repo)["code"] == "unchanged"
    checks = {c["name"]: c for c in doctor.run(grepo(repo))["checks"]}
    assert all(checks[f"hook {n}"]["status"] == "ok" for n in hookinstall.HOOKS), checks

    main = sha(repo.path, "refs/heads/main")
    refused(gitx(repo.path, "commit", "-q", "--allow-empty", "-m", "x"), "main_mutation_refused")
    refused(
        gitx(repo.path, "commit", "-q", "--allow-empty", "--no-verify", "-m", "x"),
        "main_mutation_refused",
    )
    lane = make_lane(repo, "a")
    assert_ok(gitx(lane, "commit", "-q", "--allow-empty", "-m", "lane work"))
    assert sha(repo.path, "refs/heads/main") == main

    res = hookinstall.uninstall(grepo(repo))
    assert res["code"] == "uninstalled"
    assert hookinstall.kind(hooks / "pre-commit") == "framework"
    assert not (hooks / "pre-commit.legacy").exists()
    assert not (hooks / "reference-transaction").exists()


def _commit_config(repo: Repo) -> None:
    hooks = [dict(d, language="system") for d in hook_defs()]
    (repo.path / ".pre-commit-config.yaml").write_text(
        yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]})
    )
    git(repo.path, "add", ".pre-commit-config.yaml")
    git(repo.path, "commit", "-q", "-m", "use pre-commit")


def _framework_install(repo: Repo) -> None:
    res = pre_commit(repo.path, "install", "--hook-type", "pre-commit", "--hook-type", "pre-rebase")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
@pytest.mark.skipif(
    not NETWORK,
    reason="pre-commit pip-installs the hook repository from PyPI; set GITLANE_TEST_NETWORK=1",
)
def test_published_hooks_install_from_a_clone(repo: Repo, tmp_path: Path) -> None:
    src = tmp_path / "git-lane-src"
    src.mkdir()
    for name in ("guard", "hooks", "shims", "install"):
        shutil.copytree(
            ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "_data")
        )
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, src / name)
    git(tmp_path, "init", "-q", str(src))
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "snapshot")
    rev = git(src, "rev-parse", "HEAD").stdout.strip()
    cfg = {
        "repos": [
            {
                "repo": str(src),
                "rev": rev,
                "hooks": [{"id": "git-lane-guard"}, {"id": "git-lane-pre-rebase"}],
            }
        ]
    }
    (repo.path / ".pre-commit-config.yaml").write_text(yaml.safe_dump(cfg))
    git(repo.path, "add", ".pre-commit-config.yaml")
    git(repo.path, "commit", "-q", "-m", "use pre-commit")
    res = pre_commit(repo.path, "install", "--hook-type", "pre-commit", "--hook-type", "pre-rebase")
    assert res.returncode == 0, res.stdout + res.stderr
    main = sha(repo.path, "refs/heads/main")
    refused(gitx(repo.path, "commit", "-q", "--allow-empty", "-m", "x"), "main_mutation_refused")
    assert sha(repo.path, "refs/heads/main") == main
