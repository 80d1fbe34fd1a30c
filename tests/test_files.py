"""The write and edit shims (shims/write, shims/edit -> guard.files) and `git lane check
write`, run for real: the shims directory first on PATH, a real lane in a real repository,
the binding `git lane exec` hands a process (guard.binding) built here by hand. Asserts on
exit codes, codes and the files themselves, never on prose."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, Repo, git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard import binding, files

SHIMS = ROOT / "shims"


def bound_env(repo: Repo, key: str, lane: Path, **over: str) -> dict[str, str]:
    """A process bound to lane `key`, as `git lane exec KEY` binds one (guard.binding)."""
    env = dict(os.environ)
    real_git = os.path.realpath(shutil.which("git") or "/usr/bin/git")
    env.update(
        {
            binding.LANE: key,
            binding.ROLE: "worker",
            binding.REAL_GIT: real_git,
            binding.SHIMS_DIR: str(SHIMS),
            binding.LANE_PATH: os.path.realpath(lane),
            binding.COMMON: os.path.realpath(repo.common_dir),
            binding.PYTHON: sys.executable,
            binding.PYPATH: str(ROOT),
            binding.HOME_AT_EXEC: env.get("HOME", ""),
            binding.XDG_AT_EXEC: env.get("XDG_CONFIG_HOME", ""),
            binding.PORT: "20000",
            "PATH": f"{SHIMS}{os.pathsep}{env['PATH']}",
        }
    )
    env[binding.PATH_AT_EXEC] = env["PATH"]
    env.update(over)
    return {k: v for k, v in env.items() if v is not None}


def unbound_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITLANE_")}
    env["PATH"] = f"{SHIMS}{os.pathsep}{env['PATH']}"
    return env


class Run:
    def __init__(self, res: subprocess.CompletedProcess[bytes]) -> None:
        self.rc = res.returncode
        self.stdout = res.stdout.decode("utf-8", "replace")
        self.stderr = res.stderr.decode("utf-8", "replace")

    @property
    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.stdout)
        return out

    @property
    def code(self) -> str:
        return str(self.json["code"])


def shim(
    tool: str,
    *args: str | bytes,
    cwd: Path,
    env: dict[str, str],
    data: bytes = b"",
    umask: int = 0o022,
) -> Run:
    """Run the shim by its name, found on PATH (the shims dir first), as an agent would."""
    res = subprocess.run(
        [tool, *args],
        cwd=cwd,
        env=env,
        input=data,
        capture_output=True,
        timeout=60,
        umask=umask,
    )
    return Run(res)


@pytest.fixture
def lane(repo: Repo) -> Path:
    return Path(os.path.realpath(repo.create("alpha")))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("outside\n")
    return d


# -- the scripts --------------------------------------------------------------------------
@pytest.mark.parametrize("tool", ["write", "edit"])
def test_shims_are_posix_sh_and_shellcheck_clean(tool: str) -> None:
    path = SHIMS / tool
    assert path.read_text().startswith("#!/bin/sh\n")
    assert os.access(path, os.X_OK)
    for sh in ("dash", "sh"):
        if shutil.which(sh):
            res = subprocess.run([sh, "-n", str(path)], capture_output=True, text=True)
            assert res.returncode == 0, res.stderr
    if shutil.which("shellcheck"):
        res = subprocess.run(["shellcheck", "-s", "sh", str(path)], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_help_has_examples(tool: str, tmp_path: Path) -> None:
    r = shim(tool, "--help", cwd=tmp_path, env=unbound_env())
    assert r.rc == 0
    assert r.stdout.startswith(f"usage: {tool}")
    assert "examples:" in r.stdout
    assert list(tmp_path.iterdir()) == []


# -- write: semantics (unbound: a person anywhere) ------------------------------------------
def test_write_is_atomic_creates_parents_and_keeps_or_sets_the_mode(tmp_path: Path) -> None:
    env = unbound_env()
    r = shim("write", "a/b/new.txt", "--json", cwd=tmp_path, env=env, data=b"one\n", umask=0o027)
    assert r.rc == 0, r.stderr
    new = tmp_path / "a" / "b" / "new.txt"
    assert new.read_bytes() == b"one\n"
    assert stat.S_IMODE(new.stat().st_mode) == 0o640  # 0666 & ~027
    assert r.json["created"] == [str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    assert (r.json["code"], r.json["bytes"], r.json["path"]) == ("written", 4, str(new))

    new.chmod(0o751)
    ino = new.stat().st_ino
    r = shim("write", str(new), cwd=tmp_path, env=env, data=b"two\n")
    assert r.rc == 0, r.stderr
    assert new.read_bytes() == b"two\n"
    assert stat.S_IMODE(new.stat().st_mode) == 0o751
    assert new.stat().st_ino != ino  # replaced by rename, not rewritten in place
    assert sorted(p.name for p in new.parent.iterdir()) == ["new.txt"]  # no temp file left


def test_write_binary_and_empty_stdin(tmp_path: Path) -> None:
    env = unbound_env()
    blob = bytes(range(256)) * 64 + b"\xff\xfe not utf-8 \x00"
    assert shim("write", "bin.dat", cwd=tmp_path, env=env, data=blob).rc == 0
    assert (tmp_path / "bin.dat").read_bytes() == blob
    assert shim("write", "bin.dat", cwd=tmp_path, env=env, data=b"").rc == 0
    assert (tmp_path / "bin.dat").read_bytes() == b""


def test_write_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    assert shim("write", "link.txt", cwd=tmp_path, env=unbound_env(), data=b"new\n").rc == 0
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "new\n"


def test_write_usage_errors_and_not_a_file(tmp_path: Path) -> None:
    env = unbound_env()
    assert shim("write", cwd=tmp_path, env=env).rc == 2
    assert shim("write", "a", "b", cwd=tmp_path, env=env).rc == 2
    assert shim("write", "--bogus", "a", cwd=tmp_path, env=env).rc == 2
    (tmp_path / "d").mkdir()
    r = shim("write", "d", "--json", cwd=tmp_path, env=env, data=b"x")
    assert (r.rc, r.code) == (1, "not_a_file")
    assert "Traceback" not in r.stderr
    (tmp_path / "f").write_text("x")
    r = shim("write", "f/under", "--json", cwd=tmp_path, env=env, data=b"x")
    assert (r.rc, r.code) == (1, "write_failed")


# -- edit: semantics -----------------------------------------------------------------------
def test_edit_exactly_once_by_default(tmp_path: Path) -> None:
    env = unbound_env()
    f = tmp_path / "f.py"
    f.write_text("a = 1\nb = 2\nb = 2\n")
    f.chmod(0o700)
    r = shim("edit", "f.py", "--old", "a = 1", "--new", "a = 10", "--json", cwd=tmp_path, env=env)
    assert (r.rc, r.code, r.json["replaced"]) == (0, "edited", 1)
    assert f.read_text() == "a = 10\nb = 2\nb = 2\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o700

    r = shim("edit", "f.py", "--old", "zzz", "--new", "y", "--json", cwd=tmp_path, env=env)
    assert (r.rc, r.code) == (1, "edit_no_match")
    r = shim("edit", "f.py", "--old", "b = 2", "--new", "b = 3", "--json", cwd=tmp_path, env=env)
    assert (r.rc, r.code, r.json["details"]["found"]) == (1, "edit_ambiguous", 2)
    assert f.read_text() == "a = 10\nb = 2\nb = 2\n"  # refused: nothing changed
    # its next runs as written (shows where the text is)
    nxt = subprocess.run(
        r.json["next"][0], shell=True, cwd=tmp_path, capture_output=True, text=True
    )
    assert nxt.returncode == 0 and "2:b = 2" in nxt.stdout


def test_edit_count_and_all(tmp_path: Path) -> None:
    env = unbound_env()
    f = tmp_path / "f.txt"
    f.write_text("x x x\n")
    r = shim(
        "edit", "f.txt", "--old", "x", "--new", "y", "--count", "2", "--json", cwd=tmp_path, env=env
    )
    assert (r.rc, r.code) == (1, "edit_ambiguous")
    assert f.read_text() == "x x x\n"
    r = shim("edit", "f.txt", "--old", "x", "--new", "y", "--count", "3", cwd=tmp_path, env=env)
    assert r.rc == 0 and f.read_text() == "y y y\n"
    r = shim("edit", "f.txt", "--old", "y", "--new", "", "--all", "--json", cwd=tmp_path, env=env)
    assert (r.rc, r.json["replaced"]) == (0, 3) and f.read_text() == "  \n"
    r = shim("edit", "f.txt", "--old", "q", "--new", "z", "--all", "--json", cwd=tmp_path, env=env)
    assert (r.rc, r.code) == (1, "edit_no_match")
    for bad in (
        ("--old", "", "--new", "z"),
        ("--old", "a", "--new", "b", "--count", "2", "--all"),
        ("--old", "a", "--new", "b", "--count", "0"),
        ("--old", "a"),
    ):
        assert shim("edit", "f.txt", *bad, cwd=tmp_path, env=env).rc == 2, bad


def test_edit_bytes_that_are_not_utf8_and_options_that_look_like_flags(tmp_path: Path) -> None:
    env = unbound_env()
    f = tmp_path / "latin1.txt"
    f.write_bytes(b"caf\xe9 -v --flag\n")
    r = shim(
        "edit", "latin1.txt", "--old", b"caf\xe9", "--new", b"caf\xc3\xa9", cwd=tmp_path, env=env
    )
    assert r.rc == 0, r.stderr
    r = shim("edit", "latin1.txt", "--old=-v", "--new", "-q", cwd=tmp_path, env=env)
    assert r.rc == 0, r.stderr
    r = shim("edit", "latin1.txt", "--old", "--flag", "--new", "--other", cwd=tmp_path, env=env)
    assert r.rc == 0, r.stderr
    assert f.read_bytes() == b"caf\xc3\xa9 -q --other\n"


def test_edit_of_a_missing_file_or_directory_is_not_a_file(tmp_path: Path) -> None:
    env = unbound_env()
    r = shim("edit", "nope.txt", "--old", "a", "--new", "b", "--json", cwd=tmp_path, env=env)
    assert (r.rc, r.code) == (1, "not_a_file")
    r = shim("edit", "no/dir.txt", "--old", "a", "--new", "b", "--json", cwd=tmp_path, env=env)
    assert (r.rc, r.code) == (1, "not_a_file")
    assert list(tmp_path.iterdir()) == []


# -- bound: allowed -------------------------------------------------------------------------
def test_bound_write_and_edit_inside_the_lane(repo: Repo, lane: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    r = shim("write", "src/new/mod.py", "--json", cwd=lane, env=env, data=b"x = 1\n")
    assert (r.rc, r.code) == (0, "written"), r.stderr
    assert (lane / "src" / "new" / "mod.py").read_text() == "x = 1\n"
    r = shim("edit", "new/mod.py", "--old", "x = 1", "--new", "x = 2", cwd=lane / "src", env=env)
    assert r.rc == 0, r.stderr
    assert (lane / "src" / "new" / "mod.py").read_text() == "x = 2\n"
    # `..` that stays inside the lane, and an absolute path in it, are fine
    assert shim("write", "../top.txt", cwd=lane / "src", env=env, data=b"t").rc == 0
    assert shim("write", str(lane / "abs.txt"), cwd=repo.path, env=env, data=b"a").rc == 0
    assert (lane / "top.txt").read_text() == "t" and (lane / "abs.txt").read_text() == "a"


# -- bound: path_outside_lane ---------------------------------------------------------------
def test_symlink_out_final_component(repo: Repo, lane: Path, outside: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    (lane / "link.txt").symlink_to(outside / "secret.txt")
    r = shim("write", "link.txt", "--json", cwd=lane, env=env, data=b"pwned\n")
    assert (r.rc, r.code) == (1, "path_outside_lane")
    r = shim("edit", "link.txt", "--old", "outside", "--new", "pwned", "--json", cwd=lane, env=env)
    assert (r.rc, r.code) == (1, "path_outside_lane")
    assert (outside / "secret.txt").read_text() == "outside\n"
    assert (lane / "link.txt").is_symlink()


def test_directory_symlink_out_creates_nothing(repo: Repo, lane: Path, outside: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    (lane / "out").symlink_to(outside)
    r = shim("write", "out/deep/new.txt", "--json", cwd=lane, env=env, data=b"x")
    assert (r.rc, r.code) == (1, "path_outside_lane")
    assert r.json["details"]["via"] == str(lane / "out")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_dotdot_and_absolute_paths_elsewhere(repo: Repo, lane: Path, outside: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    for target, cwd in (
        ("../escape.txt", lane),
        ("sub/../../escape.txt", lane),
        (str(outside / "new" / "x.txt"), lane),
        (str(repo.path / "README.md"), lane),  # the hub
        ("README.md", repo.path),  # relative, from the hub
    ):
        r = shim("write", target, "--json", cwd=cwd, env=env, data=b"x")
        assert (r.rc, r.code) == (1, "path_outside_lane"), target
    assert not (lane.parent / "escape.txt").exists()
    assert not (outside / "new").exists()  # parents are only made after the check
    assert not (lane / "sub").exists()
    assert (repo.path / "README.md").read_text() == "hello\n"
    r = shim(
        "edit",
        str(repo.path / "README.md"),
        "--old",
        "hello",
        "--new",
        "x",
        "--json",
        cwd=lane,
        env=env,
    )
    assert (r.rc, r.code) == (1, "path_outside_lane")


def test_hard_link_refused_until_the_lane_has_its_own_copy(
    repo: Repo, lane: Path, outside: Path
) -> None:
    env = bound_env(repo, "alpha", lane)
    os.link(outside / "secret.txt", lane / "hard.txt")
    r = shim("write", "hard.txt", "--json", cwd=lane, env=env, data=b"pwned\n")
    assert (r.rc, r.code, r.json["details"]["nlink"]) == (1, "path_outside_lane", 2)
    r2 = shim("edit", "hard.txt", "--old", "outside", "--new", "x", "--json", cwd=lane, env=env)
    assert (r2.rc, r2.code) == (1, "path_outside_lane")
    assert (outside / "secret.txt").read_text() == "outside\n"
    for cmd in r.json["next"]:  # runs as written: breaks the link, keeps the content
        assert subprocess.run(cmd, shell=True, cwd=lane).returncode == 0
    assert (lane / "hard.txt").stat().st_nlink == 1
    assert shim("write", "hard.txt", cwd=lane, env=env, data=b"mine\n").rc == 0
    assert (lane / "hard.txt").read_text() == "mine\n"
    assert (outside / "secret.txt").read_text() == "outside\n"


# -- bound: protected_path ------------------------------------------------------------------
def test_git_dirs_and_state_are_protected(repo: Repo, lane: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    common = Path(os.path.realpath(repo.common_dir))
    gitfile_before = (lane / ".git").read_bytes()
    admin = files.lane_git_dir(str(lane))
    assert admin is not None
    (lane / "nested").mkdir()
    git(lane / "nested", "init", "-q")
    for target in (
        ".git",  # the lane's .git file
        str(common / "config"),  # the common dir
        str(common / "hooks" / "pre-commit"),
        str(Path(admin) / "HEAD"),  # <common>/worktrees/alpha
        str(common / "git-lane" / "config.toml"),  # git-lane state
        str(common / "git-lane" / "lanes" / "alpha.json"),
        "nested/.git/config",  # any git dir in the lane
        "nested/.GIT/x",
    ):
        r = shim("write", target, "--json", cwd=lane, env=env, data=b"x")
        assert (r.rc, r.code) == (1, "protected_path"), (target, r.stderr)
    (lane / "cfg").symlink_to(common / "config")  # through a symlink, too
    r = shim("edit", "cfg", "--old", "bare", "--new", "x", "--json", cwd=lane, env=env)
    assert (r.rc, r.code) == (1, "protected_path")
    assert (lane / ".git").read_bytes() == gitfile_before
    assert not (common / "git-lane" / "config.toml").exists()


# -- bound: sync_required -------------------------------------------------------------------
def _stale(repo: Repo) -> None:
    repo.commit(repo.path, "main.txt", "main moved\n")  # no hooks here: main moves by hand


def test_stale_lane_may_not_write_under_a_mandatory_policy(repo: Repo, lane: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    assert shim("write", "ok.txt", cwd=lane, env=env, data=b"1").rc == 0
    _stale(repo)
    r = shim("write", "ok.txt", "--json", cwd=lane, env=env, data=b"2")
    assert (r.rc, r.code, r.json["next"]) == (1, "sync_required", ["git lane sync alpha"])
    r = shim("edit", "ok.txt", "--old", "1", "--new", "3", "--json", cwd=lane, env=env)
    assert (r.rc, r.code) == (1, "sync_required")
    assert (lane / "ok.txt").read_text() == "1"
    repo.config("sync_policy", "land_time_only")
    assert shim("write", "ok.txt", cwd=lane, env=env, data=b"2").rc == 0
    repo.config("sync_policy", "on_land_mandatory")
    assert shim("write", "ok.txt", cwd=lane, env=env, data=b"3").rc == 1
    git(lane, "add", "ok.txt")
    git(lane, "commit", "-q", "-m", "ok")
    r = repo.jlane("sync", "alpha")
    assert r.rc == 0, r.stderr
    assert shim("write", "ok.txt", cwd=lane, env=env, data=b"4").rc == 0


def test_a_sync_stopped_on_conflicts_may_write_its_resolution(repo: Repo, lane: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    repo.commit(lane, "README.md", "lane\n")
    repo.commit(repo.path, "README.md", "main\n")
    assert shim("write", "README.md", cwd=lane, env=env, data=b"x").rc == 1  # stale
    r = repo.jlane("sync", "alpha")
    assert (r.rc, r.code) == (1, "sync_conflicts")
    r2 = shim("write", "README.md", "--json", cwd=lane, env=env, data=b"resolved\n")
    assert r2.rc == 0, r2.stderr
    assert repo.jlane("continue", "alpha").rc == 0
    assert (lane / "README.md").read_text() == "resolved\n"


def test_overlap_mandatory_refuses_only_overlapping_paths(repo: Repo, lane: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    repo.config("sync_policy", "overlap_mandatory")
    repo.commit(repo.path, "shared.txt", "main\n")
    r = shim("write", "shared.txt", "--json", cwd=lane, env=env, data=b"x")
    assert (r.rc, r.code) == (1, "sync_required")
    assert shim("write", "mine.txt", cwd=lane, env=env, data=b"x").rc == 0


def test_enabled_false_passes_writes_through(repo: Repo, lane: Path, outside: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    repo.config("enabled", "false")
    assert shim("write", str(outside / "x.txt"), cwd=lane, env=env, data=b"x").rc == 0
    assert (outside / "x.txt").read_text() == "x"


# -- bound: a binding that cannot be trusted --------------------------------------------------
def test_incomplete_or_inconsistent_binding_refuses(repo: Repo, lane: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    cases: list[dict[str, str]] = [
        {binding.PYTHON: ""},  # refused by the sh step
        {binding.PYTHON: str(tmp_path / "no-python")},
        {binding.PYPATH: str(tmp_path)},
        {binding.LANE_PATH: ""},
        {binding.LANE_PATH: str(other)},  # not the lane's record
        {binding.COMMON: ""},
        {binding.COMMON: str(other)},
        {binding.LANE: "Bad Key"},
        {binding.LANE: "ghost"},  # no such lane
    ]
    for over in cases:
        env = bound_env(repo, "alpha", lane, **over)
        r = shim("write", "x.txt", cwd=lane, env=env, data=b"x")
        assert r.rc == 1 and "[shim_facts_unknown]" in r.stderr, (over, r.stderr)
        assert "Traceback" not in r.stderr
        assert not (lane / "x.txt").exists()
        r = shim("edit", "README.md", "--old", "hello", "--new", "x", cwd=lane, env=env)
        assert r.rc == 1 and "[shim_facts_unknown]" in r.stderr, (over, r.stderr)
    assert (lane / "README.md").read_text() == "hello\n"
    # GITLANE_LANE is what binds: with it empty the process is unbound
    env = bound_env(repo, "alpha", lane, **{binding.LANE: ""})
    assert shim("write", str(other / "free.txt"), cwd=lane, env=env, data=b"x").rc == 0


def test_a_released_lane_is_not_active(repo: Repo, lane: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    rec = repo.state_dir / "lanes" / "alpha.json"
    d = json.loads(rec.read_text())
    d["status"] = "released"
    rec.write_text(json.dumps(d))
    r = shim("write", "x.txt", "--json", cwd=lane, env=env, data=b"x")
    assert (r.rc, r.code) == (1, "lane_not_active")


def test_bound_refusals_are_in_the_audit_log(repo: Repo, lane: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    assert shim("write", "../x", cwd=lane, env=env, data=b"x").rc == 1
    events = [json.loads(ln) for ln in (repo.state_dir / "events.jsonl").read_text().splitlines()]
    assert any(e.get("code") == "path_outside_lane" and e.get("lane") == "alpha" for e in events)


# -- the race a check cannot see: swapped directories ----------------------------------------
def test_a_directory_swapped_for_a_symlink_after_the_check(lane: Path, outside: Path) -> None:
    (lane / "sub").mkdir()
    t = files.target_facts("sub/new.txt", str(lane))
    (lane / "sub").rmdir()
    (lane / "sub").symlink_to(outside)  # after the decision, before the write
    with pytest.raises(files.Refusal) as e:
        files.write_file(t, b"x", str(lane), True)
    assert e.value.code == "path_outside_lane"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_final_symlink_planted_after_the_check_is_replaced_not_followed(
    lane: Path, outside: Path
) -> None:
    t = files.target_facts("f.txt", str(lane))
    (lane / "f.txt").symlink_to(outside / "secret.txt")
    files.write_file(t, b"mine\n", str(lane), True)
    assert not (lane / "f.txt").is_symlink() and (lane / "f.txt").read_text() == "mine\n"
    assert (outside / "secret.txt").read_text() == "outside\n"


# -- git lane check write ----------------------------------------------------------------------
def test_check_write_json_and_exit_codes(repo: Repo, lane: Path, outside: Path) -> None:
    env = bound_env(repo, "alpha", lane)
    r = repo.jlane("check", "write", "src/a.py", cwd=lane, env=env)
    assert (r.rc, r.json["ok"], r.code) == (0, True, "allowed")
    assert r.json["path"] == str(lane / "src" / "a.py")
    assert not (lane / "src").exists()  # a check writes nothing
    for target, code in (
        (str(outside / "x"), "path_outside_lane"),
        (".git", "protected_path"),
        ("../x", "path_outside_lane"),
    ):
        r = repo.jlane("check", "write", target, cwd=lane, env=env)
        assert (r.rc, r.json["ok"], r.code) == (1, False, code), target
        assert r.json["next"]
    _stale(repo)
    r = repo.jlane("check", "write", "a.txt", cwd=lane, env=env)
    assert (r.rc, r.code) == (1, "sync_required")
    # text form: exit status and the refusal line
    r = repo.lane("check", "write", "a.txt", cwd=lane, env=env)
    assert r.rc == 1 and "[sync_required]" in r.stderr
    for e in (env, None):  # an empty PATH is no path, bound or not
        r = repo.jlane("check", "write", "", cwd=lane, env=e)
        assert (r.rc, r.code) == (1, "not_a_file")


def test_check_write_from_the_lane_cwd_without_a_binding(
    repo: Repo, lane: Path, outside: Path
) -> None:
    r = repo.jlane("check", "write", "a.txt", cwd=lane)
    assert (r.rc, r.code, r.json["lane"]) == (0, "allowed", "alpha")
    r = repo.jlane("check", "write", str(outside / "x"), cwd=lane)
    assert (r.rc, r.code) == (1, "path_outside_lane")
    r = repo.jlane("check", "write", "a.txt", env={"GITLANE_LANE": "alpha"})  # from the hub
    assert (r.rc, r.code) == (1, "path_outside_lane")  # relative to the hub: outside
    r = repo.jlane("check", "write", str(lane / "a.txt"), env={"GITLANE_LANE": "alpha"})
    assert (r.rc, r.code) == (0, "allowed")
    r = repo.jlane("check", "write", "a.txt")  # the hub is no lane
    assert (r.rc, r.code) == (1, "unknown_lane")


def test_check_write_fast_path_and_click_agree(repo: Repo, lane: Path, outside: Path) -> None:
    """`check write [--json] PATH` is answered without click (guard.entry); `-C` goes
    through click: the same JSON either way."""
    env = bound_env(repo, "alpha", lane)
    for target in ("a.txt", str(outside / "x"), ".git"):
        fast = repo.jlane("check", "write", target, cwd=lane, env=env)
        slow = repo.jlane("-C", str(lane), "check", "write", target, cwd=repo.path, env=env)
        assert (fast.rc, fast.json) == (slow.rc, slow.json), target
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "guard", "check", "write", "a.txt"],
        cwd=lane,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    loaded = {ln.split("|")[-1].strip() for ln in res.stderr.splitlines() if "|" in ln}
    assert not loaded & {"click", "guard.cli", "guard.repo", "guard.lane", "psutil"}, loaded


def test_the_shims_python_step_runs_without_site_packages() -> None:
    """-S: nothing but the standard library can be imported, so every shim test that
    passes shows guard.files' hot path is standard library only; -I: no guard/ from the
    cwd (a lane) or PYTHONPATH."""
    for tool in ("write", "edit"):
        lines = [
            ln for ln in (SHIMS / tool).read_text().splitlines() if ln.lstrip().startswith("exec ")
        ]
        assert lines and all(" -I " in ln for ln in lines), tool
        assert all(" -S " in ln for ln in lines if "$gl_path" in ln or "GITLANE_PYPATH" in ln)


# -- the decision, as a property over real trees ----------------------------------------------
SEGMENTS = st.sampled_from(["a", "b", "..", ".", "in", "out", ".git", "loop", "hl", "new"])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=st.lists(SEGMENTS, min_size=1, max_size=6), absolute=st.booleans())
def test_every_allowed_path_is_in_the_lane_and_outside_git(
    tmp_path: Path, parts: list[str], absolute: bool
) -> None:
    base = tmp_path / "tree"
    lane_dir = base / "lane"
    if not lane_dir.exists():
        (lane_dir / "a" / "b").mkdir(parents=True)
        (base / "common" / "refs").mkdir(parents=True)
        (base / "elsewhere").mkdir()
        (lane_dir / "in").symlink_to(lane_dir / "a")
        (lane_dir / "out").symlink_to(base / "elsewhere")
        (lane_dir / "loop").symlink_to("loop")
        (base / "elsewhere" / "f").write_text("x")
        os.link(base / "elsewhere" / "f", lane_dir / "hl")
        (lane_dir / ".git").write_text(f"gitdir: {base / 'common' / 'worktrees' / 'lane'}\n")
    lane = files.Lane(
        key="lane",
        path=str(lane_dir),
        git_dirs=(str(base / "common"), str(base / "common" / "worktrees" / "lane")),
        enabled=True,
        policy="on_land_mandatory",
        must_sync=False,
        main="main",
    )
    path = "/".join(parts)
    if absolute:
        path = str(lane_dir / path)
    t = files.target_facts(path, str(lane_dir / "a"))
    r = files.decide_write(t, lane)
    if r is None:
        assert files.inside(t.real, str(lane_dir))
        assert ".git" not in Path(t.real).relative_to(lane_dir).parts
        assert not files.inside(t.real, str(base / "common"))
        assert not (t.kind == "file" and t.nlink > 1)
    else:
        assert r.code in ("path_outside_lane", "protected_path")
        assert r.next


def _t(
    real: str, kind: str = "missing", nlink: int = 0, absolute: str | None = None
) -> files.Target:
    return files.Target(real, absolute or real, real, kind, nlink, "/l", (), None)


LANE = files.Lane(
    "k", "/l", ("/r/.git", "/r/.git/worktrees/k"), True, "on_land_mandatory", False, "main"
)


@pytest.mark.parametrize(
    ("target", "lane", "code"),
    [
        (_t("/l/a.txt"), LANE, None),
        (_t("/l/a.txt", "file", 1), LANE, None),
        (_t("/l/a.txt", "file", 2), LANE, "path_outside_lane"),
        (_t("/l2/a.txt"), LANE, "path_outside_lane"),  # a sibling whose name starts alike
        (_t("/elsewhere"), LANE, "path_outside_lane"),
        (_t("/r/.git/config"), LANE, "protected_path"),  # outside and protected: protected
        (_t("/r/.git/worktrees/k/HEAD"), LANE, "protected_path"),
        (_t("/l/.git"), LANE, "protected_path"),
        (_t("/l/sub/.Git/x"), LANE, "protected_path"),
        (_t("/l/a.git"), LANE, None),
        (_t("/l/x", absolute="/r/.git/../l/x"), LANE, None),
        (_t("/l/a.txt"), files.Lane(**{**LANE.__dict__, "must_sync": True}), "sync_required"),
        (
            _t("/l/a", "file", 3),
            files.Lane(**{**LANE.__dict__, "must_sync": True}),
            "path_outside_lane",
        ),
        (_t("/r/.git/config"), files.Lane(**{**LANE.__dict__, "enabled": False}), None),
    ],
)
def test_decide_write_table(target: files.Target, lane: files.Lane, code: str | None) -> None:
    r = files.decide_write(target, lane)
    assert (r.code if r else None) == code
    if r is not None:
        assert r.next and all("<" not in n for n in r.next)


def test_write_check_answers_as_git_lane_check_write(repo: Repo, lane: Path, outside: Path) -> None:
    """`write --check PATH`: the same answer as `git lane check write PATH` for a bound
    process, nothing written and stdin not read; unbound, everything is allowed."""
    env = bound_env(repo, "alpha", lane)
    for target in ("new/a.txt", str(outside / "x"), ".git", "../x"):
        mine = shim("write", "--check", "--json", target, cwd=lane, env=env, data=b"never")
        theirs = repo.jlane("check", "write", target, cwd=lane, env=env)
        assert (mine.rc, mine.json) == (theirs.rc, theirs.json), target
    assert not (lane / "new").exists()
    r = shim("write", "--check", "a.txt", cwd=lane, env=env)
    assert r.rc == 0 and r.stdout.startswith("allowed: ")
    r = shim("write", "--check", "--json", str(outside / "x"), cwd=lane, env=unbound_env())
    assert (r.rc, r.code, r.json["lane"]) == (0, "allowed", None)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_files_reaches_only_standard_library_modules() -> None:
    """Everything guard.files (the shims' step and check write's fast path) can import,
    lazily included, imports only the standard library at module level."""
    import ast

    from test_architecture import _graph

    graph = _graph()
    seen: set[str] = set()
    todo = ["guard.files", "guard.shim"]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(graph.get(n, ()))
    assert "guard.cli" not in seen and "guard.lane" not in seen, sorted(seen)
    for mod in sorted(seen):
        path = ROOT / (mod.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / mod.replace(".", "/") / "__init__.py"
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in ("guard", "__future__") or top in sys.stdlib_module_names, (mod, name)


def test_the_walk_never_climbs_above_its_base(lane: Path, outside: Path) -> None:
    t = files.target_facts(str(outside / "x.txt"), str(lane))
    with pytest.raises(files.Refusal) as e:
        files.write_file(t, b"x", str(lane), True)
    assert e.value.code == "path_outside_lane"
    assert not (outside / "x.txt").exists()


def test_a_user_config_swapped_after_exec_is_not_read(
    repo: Repo, lane: Path, tmp_path: Path, outside: Path
) -> None:
    """The user config is the one exec recorded (GITLANE_XDG_CONFIG_HOME): pointing
    XDG_CONFIG_HOME at a file that says `enabled = false` switches nothing off."""
    mine = tmp_path / "agent-config"
    (mine / "git-lane").mkdir(parents=True)
    (mine / "git-lane" / "config.toml").write_text("enabled = false\n")
    env = bound_env(repo, "alpha", lane, XDG_CONFIG_HOME=str(mine))
    r = shim("write", str(outside / "x"), "--json", cwd=lane, env=env, data=b"x")
    assert (r.rc, r.code) == (1, "path_outside_lane")
    env = bound_env(repo, "alpha", lane, **{binding.XDG_AT_EXEC: str(mine)})  # exec saw it
    assert shim("write", str(outside / "x"), cwd=lane, env=env, data=b"x").rc == 0


def test_edit_count_takes_ascii_digits_only(tmp_path: Path) -> None:
    env = unbound_env()
    (tmp_path / "f.txt").write_text("x\n")
    for bad in ("¹", "١", "²3"):
        r = shim("edit", "f.txt", "--old", "x", "--new", "y", "--count", bad, cwd=tmp_path, env=env)
        assert r.rc == 2 and "Traceback" not in r.stderr, (bad, r.stderr)
    assert (tmp_path / "f.txt").read_text() == "x\n"


def test_edit_of_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    env = unbound_env()
    os.mkfifo(tmp_path / "pipe")
    r = shim("edit", "pipe", "--old", "x", "--new", "y", "--json", cwd=tmp_path, env=env)
    assert (r.rc, r.code) == (1, "not_a_file"), r.stdout


def test_dirfd_never_writes_reads_or_unlinks_through_a_link(tmp_path: Path) -> None:
    """guard/dirfd.py, what the engine writes with in directories a sandboxed lane can
    write (its admin dir, its store, its worktree): a directory on the way that is a link
    fails the walk; a link at the target or at a guessable temp name is replaced, never
    written through; a FIFO is refused without blocking; scan never enters a link and
    unlinks through the directory it listed."""
    from guard import dirfd

    root, outside = tmp_path / "lane", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    victim = outside / "main"
    victim.write_text("keep\n")
    (root / "via").symlink_to(outside)
    with pytest.raises(OSError):
        dirfd.write_file(str(root), "via/main", b"lost\n")
    with pytest.raises(OSError):
        dirfd.read_file(str(root), "via/main")
    with pytest.raises(OSError):
        dirfd.unlink(str(root), "via/main")
    (root / "marker").symlink_to(victim)
    for pid in range(os.getpid() - 2, os.getpid() + 3):
        (root / f".gitlane-{pid}").symlink_to(victim)
    dirfd.write_file(str(root), "marker", b"alpha\n")
    assert victim.read_text() == "keep\n"
    assert not (root / "marker").is_symlink() and (root / "marker").read_text() == "alpha\n"
    os.mkfifo(root / "fifo")
    with pytest.raises(OSError):
        dirfd.read_file(str(root), "fifo")
    seen = {
        (here, name)
        for here, _dfd, entries in dirfd.scan(str(root))
        for name, info in entries
        if info != stat.S_IFREG
    }
    assert (".", "via") in seen and (".", "fifo") in seen
    assert not any(here.startswith("via") for here, _ in seen)  # the link never entered
    for _, dfd, entries in dirfd.scan(str(root)):
        for name, info in entries:
            if info == stat.S_IFLNK:
                os.unlink(name, dir_fd=dfd)
    assert victim.read_text() == "keep\n" and not (root / "via").exists()
