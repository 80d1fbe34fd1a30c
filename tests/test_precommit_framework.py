"""git-lane through the real pre-commit framework: the hook ids of .pre-commit-hooks.yaml
refuse a commit and a rebase on main and conflict markers in a lane, through
`pre-commit install`'s own hook scripts; `pre-commit run` on main (no commit) passes; and
`git lane install` coexists with them in either order (the framework's script in front,
ours behind it as <hook>.legacy), each refusal printed once.

The configuration is README.md's own `.pre-commit-config.yaml` block, read from README.md:
`repo: local` / `language: system`, run by this environment's git-lane-hook, offline. The
README's clone form (`language: python`, pre-commit pip-installing a clone of this
repository) needs PyPI and runs with GITLANE_TEST_NETWORK=1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from conftest import ROOT, Repo, git, lane
from hookfix import assert_ok, grepo, install, make_lane, sha

from guard.commands import doctor
from guard.commands import install as hookinstall

pytest.importorskip("pre_commit")
NETWORK = os.environ.get("GITLANE_TEST_NETWORK") == "1"  # read before the hermetic seal


@pytest.fixture(autouse=True)
def _framework_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pre-commit's store in tmp_path; no PRE_COMMIT*, SKIP or CI from the caller's run."""
    for k in list(os.environ):
        if k.startswith("PRE_COMMIT") or k in ("SKIP", "CI"):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("PRE_COMMIT_HOME", str(tmp_path / "pre-commit-home"))


def readme_blocks() -> list[str]:
    """The ```yaml blocks of README.md's "With the pre-commit framework" section, verbatim."""
    text = (ROOT / "README.md").read_text()
    start = text.index("### With the pre-commit framework\n")
    section = text[start : text.index("\n## ", start)]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def readme_config(form: str) -> str:
    """The README block whose first line names `form` ("installed" or "clone")."""
    first = {
        "installed": "# .pre-commit-config.yaml: the git-lane installed in this environment\n",
        "clone": "# .pre-commit-config.yaml: a clone of git-lane at a tag or commit\n",
    }[form]
    found = [b for b in readme_blocks() if b.startswith(first)]
    assert len(found) == 1, readme_blocks()
    return found[0]


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


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)  # where git-lane-hook and pre-commit live
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.update(extra or {})
    return env


def pre_commit(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=cwd,
        env=_env(env),
        capture_output=True,
        text=True,
    )


def gitx(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env=_env(env), capture_output=True, text=True)


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
    lane_dir = make_lane(framework, "a")
    (lane_dir / "ok.txt").write_text("fine\n")
    git(lane_dir, "add", "ok.txt")
    assert_ok(gitx(lane_dir, "commit", "-q", "-m", "fine"))
    (lane_dir / "bad.txt").write_text("<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n")
    git(lane_dir, "add", "bad.txt")
    refused(gitx(lane_dir, "commit", "-q", "-m", "bad"), "conflict_markers_present")
    # `pre-commit run` checks the staged diff in a lane too (no commit in progress)
    refused(pre_commit(lane_dir, "run", "git-lane-guard"), "conflict_markers_present")
    # pre-commit install run inside a lane writes the same shared hooks
    res = pre_commit(lane_dir, "install", "--hook-type", "pre-commit")
    assert res.returncode == 0, res.stdout + res.stderr
    assert hookinstall.kind(framework.common_dir / "hooks" / "pre-commit") == "framework"


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
    """README.md's `repo: local` block, exactly as written there."""
    (repo.path / ".pre-commit-config.yaml").write_text(readme_config("installed"))
    git(repo.path, "add", ".pre-commit-config.yaml")
    git(repo.path, "commit", "-q", "-m", "use pre-commit")


def _framework_install(repo: Repo) -> None:
    res = pre_commit(repo.path, "install", "--hook-type", "pre-commit", "--hook-type", "pre-rebase")
    assert res.returncode == 0, res.stdout + res.stderr


def refusals(res: subprocess.CompletedProcess[str]) -> list[str]:
    """Every refusal line the user sees: git's stderr and pre-commit's report on stdout."""
    out = res.stdout + res.stderr
    return [ln for ln in out.splitlines() if "git-lane: refused [" in ln]


def test_readme_config_matches_the_manifest(tmp_path: Path) -> None:
    defs = {d["id"]: d for d in hook_defs()}
    local = yaml.safe_load(readme_config("installed"))
    [entry] = local["repos"]
    assert entry["repo"] == "local" and set(entry) == {"repo", "hooks"}
    assert [h["id"] for h in entry["hooks"]] == list(defs)
    for h in entry["hooks"]:
        assert h["language"] == "system"  # the manifest's python, already installed here
        for k, v in h.items():
            if k not in ("name", "language"):
                assert v == defs[h["id"]][k], (h["id"], k)
        for k in ("entry", "stages", "pass_filenames", "always_run"):
            assert k in h, (h["id"], k)
    clone = yaml.safe_load(readme_config("clone"))
    [entry] = clone["repos"]
    assert entry["repo"] == "/path/to/git-lane" and entry["rev"] == "v0.1.0"
    assert [h["id"] for h in entry["hooks"]] == list(defs)
    for form in ("installed", "clone"):
        cfg = tmp_path / f"{form}.yaml"
        cfg.write_text(readme_config(form))
        res = pre_commit(tmp_path, "validate-config", str(cfg))
        assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("with_lane_install", [False, True], ids=["framework only", "both"])
def test_pre_commit_run_on_main_passes_and_commits_stay_refused(
    framework: Repo, with_lane_install: bool
) -> None:
    if with_lane_install:
        assert lane("install", cwd=framework.path).rc == 0
    main = sha(framework.path, "refs/heads/main")
    (framework.path / "f.txt").write_text("x\n")
    git(framework.path, "add", "f.txt")
    for env in ({}, {"CI": "true"}):
        for args in (["--all-files"], ["git-lane-guard"], ["git-lane-guard", "--all-files"]):
            res = pre_commit(framework.path, "run", *args, env=env)
            assert res.returncode == 0, res.stdout + res.stderr
            assert "refused" not in res.stdout + res.stderr
            assert re.search(r"git-lane guard\.+Passed", res.stdout), res.stdout
    # a commit is still refused: through the framework, in CI, and with the env of a run
    for env in ({}, {"CI": "true"}, {"PRE_COMMIT": "1"}):
        res = gitx(framework.path, "commit", "-q", "-m", "on main", env=env)
        refused(res, "main_mutation_refused")
        assert len(refusals(res)) == 1, res.stdout + res.stderr
    if with_lane_install:  # --no-verify skips the framework, not the reference-transaction hook
        res = gitx(framework.path, "commit", "-q", "--no-verify", "-m", "x", env={"CI": "true"})
        refused(res, "main_mutation_refused")
        assert len(refusals(res)) == 1, res.stdout + res.stderr
    assert sha(framework.path, "refs/heads/main") == main


def test_the_installed_hook_refuses_a_commit_on_main_whatever_the_env(repo: Repo) -> None:
    """The leniency for `pre-commit run` cannot be borrowed by a commit: git sets
    GIT_INDEX_FILE for the hook whatever the caller's environment says."""
    install(repo)
    main = sha(repo.path, "refs/heads/main")
    (repo.path / "f.txt").write_text("x\n")
    git(repo.path, "add", "f.txt")
    for env in ({"PRE_COMMIT": "1"}, {"PRE_COMMIT": "1", "CI": "true"}):
        res = gitx(repo.path, "commit", "-q", "-m", "x", env=env)
        refused(res, "main_mutation_refused")
        assert "committing on main is refused" in res.stderr  # the pre-commit hook's line
    assert sha(repo.path, "refs/heads/main") == main


def _both_installed(repo: Repo, order: str) -> None:
    _commit_config(repo)
    if order == "git-lane first":
        assert lane("install", cwd=repo.path).rc == 0
        _framework_install(repo)
    else:
        _framework_install(repo)
        assert lane("install", cwd=repo.path).rc == 0
    hooks = repo.common_dir / "hooks"
    for name in ("pre-commit", "pre-rebase"):
        assert hookinstall.kind(hooks / name) == "framework"
        assert hookinstall.kind(hooks / f"{name}.legacy") == "ours"


def _no_records(*gitdirs: Path) -> None:
    for gd in gitdirs:
        assert not list(gd.glob("gitlane-framework-*")), list(gd.iterdir())


@pytest.mark.parametrize("order", ["framework first", "git-lane first"])
def test_each_refusal_prints_once_with_both_installed(repo: Repo, order: str) -> None:
    _both_installed(repo, order)
    main = sha(repo.path, "refs/heads/main")
    res = gitx(repo.path, "commit", "-q", "--allow-empty", "-m", "x")
    refused(res, "main_mutation_refused")
    assert len(refusals(res)) == 1, res.stdout + res.stderr
    out = res.stdout + res.stderr  # git hands a hook's stdout to stderr
    assert re.search(r"git-lane guard\.+Failed", out), out  # the legacy's verdict
    res = gitx(repo.path, "commit", "-q", "--allow-empty", "--no-verify", "-m", "x")
    refused(res, "main_mutation_refused")
    assert len(refusals(res)) == 1, res.stdout + res.stderr
    _no_records(repo.path / ".git")

    lane_dir = make_lane(repo, "a")
    assert_ok(gitx(lane_dir, "commit", "-q", "--allow-empty", "-m", "lane work"))
    res = gitx(repo.path, "rebase", "lane/a")
    refused(res, "main_mutation_refused")
    assert len(refusals(res)) == 1, res.stdout + res.stderr
    assert sha(repo.path, "refs/heads/main") == main

    (lane_dir / "bad.txt").write_text("<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n")
    git(lane_dir, "add", "bad.txt")
    res = gitx(lane_dir, "commit", "-q", "-m", "bad")
    refused(res, "conflict_markers_present")
    assert len(refusals(res)) == 1, res.stdout + res.stderr
    assert re.search(r"git-lane guard\.+Failed", res.stdout + res.stderr), res.stderr
    git(lane_dir, "switch", "-q", "-c", "other")
    res = gitx(lane_dir, "commit", "-q", "-m", "bad")
    refused(res, "lane_branch_mismatch")
    assert len(refusals(res)) == 1, res.stdout + res.stderr
    lane_gd = Path(git(lane_dir, "rev-parse", "--absolute-git-dir").stdout.strip())
    _no_records(repo.path / ".git", lane_gd)


def test_a_record_from_another_run_does_not_stand_in_for_the_check(framework: Repo) -> None:
    """The hook id skips only after the legacy run of the same framework process."""
    lane_dir = make_lane(framework, "a")
    lane_gd = Path(git(lane_dir, "rev-parse", "--absolute-git-dir").stdout.strip())
    (lane_dir / "bad.txt").write_text("<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n")
    git(lane_dir, "add", "bad.txt")
    (lane_gd / f"gitlane-framework-pre-commit-{os.getpid()}").mkdir()
    refused(pre_commit(lane_dir, "run", "git-lane-guard"), "conflict_markers_present")
    refused(gitx(lane_dir, "commit", "-q", "-m", "bad"), "conflict_markers_present")
    _no_records(lane_gd)  # the legacy run removes the records of earlier runs


def test_the_framework_verdict_record_is_never_written_through_a_lane_planted_link(
    hub: Repo, tmp_path: Path
) -> None:
    """Red team 13S, finding 4 (HIGH). Behind the framework, its hook-impl runs our hook as
    pre-commit.legacy with PRE_COMMIT_RUNNING_LEGACY=1, and gl_framework wrote its verdict
    with `printf > $gd/gitlane-framework-pre-commit`, no check: in a lane $gd is the
    lane's admin dir, and a link the lane put there made the owner's commit in the lane
    overwrite the file it names. The record is now a directory's name (mkdir and rmdir
    follow no link): links at the old name and at every new one are left alone."""
    alpha = hub.create("alpha")
    admin = hub.common_dir / "worktrees" / "alpha"
    owner_file = tmp_path / "owner.txt"
    owner_file.write_text("precious\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (admin / "gitlane-framework-pre-commit").symlink_to(owner_file)
    me = os.getpid()  # the parent of the git below: the hook's PPID is git's pid
    for pid in range(me, me + 20):
        (admin / f"gitlane-framework-pre-commit-{pid}").symlink_to(outside / f"{pid}")
        (admin / f"gitlane-framework-pre-commit-{pid}-refused").symlink_to(outside / f"r{pid}")
    (alpha / "f.txt").write_text("x\n")
    git(alpha, "add", "f.txt")
    # what the framework's hook-impl sets when it runs the hook that was there before it
    git(alpha, "commit", "-q", "-m", "owner's commit", env={"PRE_COMMIT_RUNNING_LEGACY": "1"})
    assert owner_file.read_text() == "precious\n"
    assert not list(outside.iterdir())
    (alpha / "g.txt").write_text("<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n")
    git(alpha, "add", "g.txt")
    res = gitx(alpha, "commit", "-q", "-m", "bad", env={"PRE_COMMIT_RUNNING_LEGACY": "1"})
    refused(res, "conflict_markers_present")
    assert owner_file.read_text() == "precious\n"
    assert not list(outside.iterdir())


def test_pre_commit_install_in_a_lane(repo: Repo) -> None:
    """From a lane (a linked worktree) both installs write the shared <common-dir>/hooks."""
    _commit_config(repo)
    lane_dir = make_lane(repo, "a")
    res = pre_commit(lane_dir, "install", "--hook-type", "pre-commit", "--hook-type", "pre-rebase")
    assert res.returncode == 0, res.stdout + res.stderr
    hooks = repo.common_dir / "hooks"
    assert hookinstall.kind(hooks / "pre-commit") == "framework"
    assert hookinstall.kind(hooks / "pre-rebase") == "framework"
    assert lane("install", cwd=lane_dir).rc == 0
    assert hookinstall.kind(hooks / "pre-commit.legacy") == "ours"
    assert_ok(gitx(lane_dir, "commit", "-q", "--allow-empty", "-m", "lane work"))
    res = gitx(repo.path, "commit", "-q", "--allow-empty", "-m", "x")
    refused(res, "main_mutation_refused")
    assert len(refusals(res)) == 1, res.stdout + res.stderr
    # with core.hooksPath git reads neither: both installs refuse rather than write unread hooks
    git(repo.path, "config", "core.hooksPath", str(repo.path / "elsewhere"))
    res = pre_commit(lane_dir, "install", "--hook-type", "pre-commit")
    assert res.returncode != 0 and "core.hooksPath" in res.stdout + res.stderr
    r = lane("install", cwd=lane_dir)
    assert r.rc == 1 and "[hooks_path_set]" in r.stderr, r.stderr


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
    git(src, "tag", "v0.1.0")  # the README's rev, as written
    # README.md's clone block with only what it says to replace: the clone's path
    cfg = readme_config("clone")
    assert cfg.count("/path/to/git-lane") == 1
    (repo.path / ".pre-commit-config.yaml").write_text(cfg.replace("/path/to/git-lane", str(src)))
    git(repo.path, "add", ".pre-commit-config.yaml")
    git(repo.path, "commit", "-q", "-m", "use pre-commit")
    res = pre_commit(repo.path, "install", "--hook-type", "pre-commit", "--hook-type", "pre-rebase")
    assert res.returncode == 0, res.stdout + res.stderr
    main = sha(repo.path, "refs/heads/main")
    refused(gitx(repo.path, "commit", "-q", "--allow-empty", "-m", "x"), "main_mutation_refused")
    res = pre_commit(repo.path, "run", "--all-files")
    assert res.returncode == 0, res.stdout + res.stderr
    assert lane("install", cwd=repo.path).rc == 0
    res = gitx(repo.path, "commit", "-q", "--allow-empty", "-m", "x")
    refused(res, "main_mutation_refused")
    assert len(refusals(res)) == 1, res.stdout + res.stderr
    assert sha(repo.path, "refs/heads/main") == main
