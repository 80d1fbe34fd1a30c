"""`git lane install` / `uninstall` and the install/ scripts: the common hooks dir every
worktree shares, our ID line, chaining of foreign hooks as <hook>.legacy (and putting
them back), idempotence, core.hooksPath, and hooks that work from every lane."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Repo, git
from hookfix import assert_ok, assert_refused, install, make_lane, run, sha

from guard.commands import install as hookinstall
from guard.errors import Refusal

FOREIGN = '#!/bin/sh\n# a project\'s own hook\necho foreign-ran >>"{log}"\nexit {rc}\n'


def hooks_dir(repo: Repo) -> Path:
    return repo.common_dir / "hooks"


def foreign(repo: Repo, name: str = "pre-commit", rc: int = 0) -> Path:
    d = hooks_dir(repo)
    d.mkdir(exist_ok=True)
    log = repo.path.parent / f"{name}.ran"
    p = d / name
    p.write_text(FOREIGN.format(log=log, rc=rc))
    p.chmod(0o755)
    return log


def snapshot(d: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        p.name: (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns)
        for p in sorted(d.iterdir())
        if not p.name.endswith(".sample")
    }


def test_install_writes_three_hooks_with_our_id_and_python(repo: Repo) -> None:
    r = repo.jlane("install")
    assert r.rc == 0, r.stderr
    assert r.code == "installed"
    for name in hookinstall.HOOKS:
        p = hooks_dir(repo) / name
        assert os.access(p, os.X_OK)
        text = p.read_text()
        assert hookinstall.OUR_ID in text.splitlines()
        assert hookinstall.embedded_python(text) == sys.executable
        assert text.encode() == hookinstall.script_bytes(name)
    assert {h["action"] for h in r.json["hooks"]} == {"created"}


def test_install_is_idempotent(repo: Repo) -> None:
    foreign(repo)
    install(repo)
    before = snapshot(hooks_dir(repo))
    r = repo.jlane("install")
    assert r.rc == 0 and r.code == "unchanged"
    assert {h["action"] for h in r.json["hooks"]} == {"unchanged"}
    assert snapshot(hooks_dir(repo)) == before


def test_install_repairs_a_modified_hook(repo: Repo) -> None:
    install(repo)
    p = hooks_dir(repo) / "reference-transaction"
    p.write_text(p.read_text().replace('gl_check "$old"', 'true || gl_check "$old"'))
    p.chmod(0o644)
    res = install(repo)
    assert res["code"] == "installed"
    assert p.read_bytes() == hookinstall.script_bytes("reference-transaction")
    assert os.access(p, os.X_OK)


def test_install_from_a_lane_goes_to_the_shared_dir_and_guards_every_lane(repo: Repo) -> None:
    a = make_lane(repo, "a")
    b = make_lane(repo, "b")
    for lane in (a, b):
        git(lane, "commit", "-q", "--allow-empty", "-m", "work")
    r = repo.jlane("install", cwd=a)
    assert r.rc == 0, r.stderr
    assert Path(r.json["hooks_dir"]) == hooks_dir(repo).resolve()
    main = sha(repo.path, "refs/heads/main")
    git(repo.path, "switch", "-q", "--detach")
    for lane in (a, b):
        assert_refused(run(lane, "update-ref", "refs/heads/main", "HEAD"))
        assert_refused(run(lane, "branch", "-f", "main", "HEAD~0"))
    assert sha(repo.path, "refs/heads/main") == main


def test_foreign_hook_is_chained_and_its_failure_fails(repo: Repo) -> None:
    log = foreign(repo)
    res = install(repo)
    pc = next(h for h in res["hooks"] if h["name"] == "pre-commit")
    assert pc["chained"] == str(hooks_dir(repo).resolve() / "pre-commit.legacy")
    assert (
        (hooks_dir(repo) / "pre-commit.legacy")
        .read_text()
        .startswith("#!/bin/sh\n# a project's own hook")
    )
    lane = make_lane(repo, "a")
    assert_ok(run(lane, "commit", "-q", "--allow-empty", "-m", "x"))
    assert log.read_text() == "foreign-ran\n"
    # ours still refuses first (the foreign hook does not even run)
    assert_refused(run(repo.path, "commit", "-q", "--allow-empty", "-m", "x"))
    assert log.read_text() == "foreign-ran\n"
    # a failing foreign hook fails the commit
    (hooks_dir(repo) / "pre-commit.legacy").write_text(FOREIGN.format(log=log, rc=1))
    before = sha(lane)
    res2 = run(lane, "commit", "-q", "--allow-empty", "-m", "y")
    assert res2.returncode != 0
    assert sha(lane) == before


def test_foreign_pre_rebase_gets_its_arguments(repo: Repo) -> None:
    d = hooks_dir(repo)
    d.mkdir(exist_ok=True)
    log = repo.path.parent / "rebase.args"
    (d / "pre-rebase").write_text(f'#!/bin/sh\necho "$#:$1:$2" >"{log}"\n')
    (d / "pre-rebase").chmod(0o755)
    install(repo)
    lane = make_lane(repo, "a")
    git(lane, "commit", "-q", "--allow-empty", "-m", "x")
    assert_ok(run(lane, "rebase", "-q", "--force-rebase", "main", "lane/a"))
    assert log.read_text() == "2:main:lane/a\n"


def test_uninstall_restores_the_foreign_hook(repo: Repo) -> None:
    foreign(repo)
    original = (hooks_dir(repo) / "pre-commit").read_bytes()
    install(repo)
    r = repo.jlane("uninstall")
    assert r.rc == 0, r.stderr
    assert r.code == "uninstalled"
    assert (hooks_dir(repo) / "pre-commit").read_bytes() == original
    assert not (hooks_dir(repo) / "pre-commit.legacy").exists()
    for name in ("pre-rebase", "reference-transaction"):
        assert not (hooks_dir(repo) / name).exists()
    # and main is no longer guarded by hooks
    assert_ok(run(repo.path, "commit", "-q", "--allow-empty", "-m", "x"))
    r = repo.jlane("uninstall")
    assert r.rc == 0 and r.code == "not_installed"


def test_a_second_foreign_hook_in_the_way_needs_force(repo: Repo) -> None:
    foreign(repo)
    leg = hooks_dir(repo) / "pre-commit.legacy"
    leg.write_text("#!/bin/sh\nexit 0\n")
    before = snapshot(hooks_dir(repo))
    r = repo.jlane("install")
    assert r.rc == 1
    assert r.code == "hook_conflict"
    assert "git lane install --force" in " ".join(r.json["next"])
    assert "git-lane: refused [hook_conflict]" in r.stderr
    assert snapshot(hooks_dir(repo)) == before  # nothing was touched
    r = repo.jlane("install", "--force")
    assert r.rc == 0, r.stderr
    assert r.json["displaced"] == [{"from": str(leg.resolve()), "to": str(leg.resolve()) + ".bak"}]
    assert (hooks_dir(repo) / "pre-commit.legacy.bak").read_text() == "#!/bin/sh\nexit 0\n"
    assert "a project's own hook" in leg.read_text()


def test_core_hooks_path_is_refused_with_the_fix(repo: Repo) -> None:
    git(repo.path, "config", "core.hooksPath", ".githooks")
    r = repo.jlane("install")
    assert r.rc == 1
    assert r.code == "hooks_path_set"
    assert r.json["next"][0].startswith("git config --unset core.hooksPath")
    assert not (hooks_dir(repo) / "reference-transaction").exists()
    # the fix it names works
    git(repo.path, "config", "--unset", "core.hooksPath")
    assert repo.jlane("install").rc == 0


def test_global_core_hooks_path_names_the_global_fix(repo: Repo) -> None:
    git(repo.path, "config", "--global", "core.hooksPath", "/dev/null")
    with pytest.raises(Refusal) as exc:
        install(repo)
    assert exc.value.code == "hooks_path_set"
    assert exc.value.next[0].startswith("git config --global --unset core.hooksPath")
    with pytest.raises(Refusal) as exc:
        install(repo, use_hooks_path=True)  # /dev/null is not a directory
    assert exc.value.code == "hooks_path_set"


def test_install_into_core_hooks_path(repo: Repo, tmp_path: Path) -> None:
    shared = tmp_path / "shared hooks ü"
    git(repo.path, "config", "core.hooksPath", str(shared))
    r = repo.jlane("install", "--hooks-path")
    assert r.rc == 0, r.stderr
    assert Path(r.json["hooks_dir"]) == shared
    assert (shared / "reference-transaction").exists()
    assert not (hooks_dir(repo) / "reference-transaction").exists()
    main = sha(repo.path, "refs/heads/main")
    assert_refused(run(repo.path, "commit", "-q", "--allow-empty", "--no-verify", "-m", "x"))
    lane = make_lane(repo, "a")
    assert_ok(run(lane, "commit", "-q", "--allow-empty", "-m", "x"))
    assert sha(repo.path, "refs/heads/main") == main
    assert repo.jlane("uninstall").code == "uninstalled"
    assert not (shared / "reference-transaction").exists()


def test_relative_core_hooks_path_is_refused_even_with_hooks_path(repo: Repo) -> None:
    git(repo.path, "config", "core.hooksPath", ".githooks")
    with pytest.raises(Refusal) as exc:
        install(repo, use_hooks_path=True)
    assert exc.value.code == "hooks_path_relative"


def test_install_scripts_work_without_the_cli(repo: Repo) -> None:
    """install/install-hooks needs only a Python that can import guard, not `git lane`."""
    env = dict(os.environ)
    env["PATH"] = "/usr/bin:/bin"
    env["GITLANE_PYTHON"] = sys.executable
    res = subprocess.run(
        ["sh", str(ROOT / "install" / "install-hooks")],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert "installed" in res.stdout
    assert hookinstall.kind(hooks_dir(repo) / "reference-transaction") == "ours"
    assert_refused(
        run(repo.path, "commit", "-q", "--allow-empty", "-m", "x", env={"PATH": "/usr/bin:/bin"})
    )
    res = subprocess.run(
        ["sh", str(ROOT / "install" / "uninstall-hooks"), "--json"],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert '"code": "uninstalled"' in res.stdout
    assert not (hooks_dir(repo) / "reference-transaction").exists()


def test_install_script_refusal_has_no_traceback(repo: Repo) -> None:
    git(repo.path, "config", "core.hooksPath", "/dev/null")
    env = dict(os.environ)
    env["GITLANE_PYTHON"] = sys.executable
    res = subprocess.run(
        ["sh", str(ROOT / "install" / "install-hooks")],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1
    assert "git-lane: refused [hooks_path_set]" in res.stderr
    assert "Traceback" not in res.stderr


def test_install_outside_a_repository(tmp_path: Path) -> None:
    r = Repo(tmp_path).lane("install", "--json", cwd=tmp_path)
    assert r.rc == 1
    assert r.code == "not_a_git_repo"
