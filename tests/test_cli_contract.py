"""The CLI contract: `--json` prints exactly one JSON object on stdout for every command,
refusal and usage error; exit codes 0/1/2/3; the one-line refusal on stderr; an internal
error files its traceback under `<common-dir>/git-lane/crash/` and says only where."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LaneRun, Repo, lane

REFUSAL_LINE = re.compile(r"^git-lane: refused \[([a-z_]+)\]: .+\. Next: .+$")


def one_object(stdout: str) -> dict[str, object]:
    """stdout holds exactly one JSON object (and nothing else but its newline)."""
    dec = json.JSONDecoder()
    obj, end = dec.raw_decode(stdout)
    assert stdout[end:].strip() == "", f"trailing output after the object: {stdout[end:]!r}"
    assert isinstance(obj, dict)
    assert isinstance(obj["ok"], bool) and isinstance(obj["code"], str) and obj["code"]
    return obj


def assert_refusal_shape(obj: dict[str, object]) -> None:
    assert obj["ok"] is False
    assert isinstance(obj["message"], str) and obj["message"]
    nxt = obj["next"]
    assert isinstance(nxt, list) and all(isinstance(x, str) and x for x in nxt)
    if obj["code"] == "not_a_git_repo":
        # no command knows where the repository is (the message says to cd into it); the
        # `git init` that would make one of the cwd is only an alternative
        assert nxt == [] and obj["alternatives"]
    else:
        assert nxt
    assert isinstance(obj["details"], dict)


# (argv, expected exit or None for 0-or-1, expected code or None for any), in a repo with
# lane alpha one commit ahead
ENGINE = [
    (("status",), 0, "ok"),
    (("status", "alpha"), 0, "ok"),
    (("create", "beta"), 0, "created"),
    (("create", "Bad"), 1, "invalid_lane_key"),
    (("release", "nope"), 1, "unknown_lane"),
    (("release", "alpha"), 1, "unlanded_work"),
    (("reconcile",), 0, None),
    (("repair", "alpha"), 0, "ok"),
    (("repair", "nope"), 1, "unknown_lane"),
    (("sync", "alpha"), 0, None),
    (("continue", "alpha"), None, None),
    (("abort", "alpha"), None, None),
    (("land", "alpha"), 1, None),
    (("land", "nope"), 1, "unknown_lane"),
    (("config", "get", "max_lanes"), 0, "ok"),
    (("config", "set", "max_lanes", "4"), 0, "ok"),
    (("config", "set", "max_lanes", "none"), 1, "invalid_config"),
    (("config", "unset", "max_lanes"), 0, "ok"),
    (("config", "list"), 0, "ok"),
    (("log",), 0, "ok"),
    (("log", "--since", "1h", "-n", "2"), 0, "ok"),
]
USAGE = [
    ("bogus",),
    ("status", "--bogus"),
    ("create", "--owner-pid", "abc"),
    ("config", "get"),
    ("config", "set", "max_lanes"),
    ("log", "--since", "yesterday-ish"),
    ("release", "a", "b"),
    ("repair",),
]


@pytest.fixture
def lane_repo(repo: Repo) -> Repo:
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    return repo


@pytest.mark.parametrize(("argv", "rc", "code"), ENGINE, ids=[" ".join(a) for a, _, _ in ENGINE])
def test_engine_commands_print_one_json_object(
    lane_repo: Repo, argv: tuple[str, ...], rc: int | None, code: str | None
) -> None:
    for args in ((*argv, "--json"), ("--json", *argv)):
        r = lane_repo.lane(*args)
        obj = one_object(r.stdout)
        assert r.rc == rc if rc is not None else r.rc in (0, 1), (args, r.stderr)
        assert obj["ok"] is (r.rc == 0)
        if code is not None:
            assert obj["code"] == code
        assert "Traceback" not in r.stderr
        if r.rc == 1:
            assert_refusal_shape(obj)
            lines = r.stderr.splitlines()
            refusal_lines = [ln for ln in lines if ln.startswith("git-lane: refused")]
            assert len(refusal_lines) == 1
            m = REFUSAL_LINE.match(refusal_lines[0])
            assert m is not None and m.group(1) == obj["code"]
        if argv[0] == "create" and rc == 0:
            lane_repo.lane("release", argv[1])  # so the second spelling creates it afresh


@pytest.mark.parametrize(
    "argv",
    [("install",), ("uninstall",), ("doctor",), pytest.param(("demo",), marks=pytest.mark.slow)],
    ids=["install", "uninstall", "doctor", "demo"],
)
def test_other_commands_print_one_json_object(lane_repo: Repo, argv: tuple[str, ...]) -> None:
    r = lane_repo.lane(*argv, "--json")
    obj = one_object(r.stdout)
    assert r.rc in (0, 1, 3) and obj["ok"] is (r.rc == 0)
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("argv", USAGE, ids=[" ".join(a) for a in USAGE])
def test_usage_errors_exit_2_with_one_json_object(repo: Repo, argv: tuple[str, ...]) -> None:
    r = repo.lane(*argv, "--json")
    assert r.rc == 2, r.stderr
    obj = one_object(r.stdout)
    assert (obj["ok"], obj["code"]) == (False, "usage_error")
    assert "Traceback" not in r.stderr and r.stderr.strip()


def test_usage_error_without_json_prints_nothing_on_stdout(repo: Repo) -> None:
    r = repo.lane("bogus")
    assert r.rc == 2 and r.stdout == "" and "Traceback" not in r.stderr


def test_refusal_without_json(repo: Repo) -> None:
    r = repo.lane("create", "../escape")
    assert r.rc == 1
    assert r.stdout == ""
    line, *others = r.stderr.splitlines()
    m = REFUSAL_LINE.match(line)
    assert m is not None and m.group(1) == "invalid_lane_key"
    assert others == ["  Or: git lane create"]  # create's other way out: an automatic key


def test_not_a_repo_with_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for args in (
        ("status", "--json"),
        ("--json", "create", "x"),
        ("-C", str(tmp_path), "log", "--json"),
    ):
        r = lane(*args, cwd=tmp_path)
        assert r.rc == 1
        obj = one_object(r.stdout)
        assert obj["code"] == "not_a_git_repo"
        assert_refusal_shape(obj)
    assert list(tmp_path.iterdir()) == []  # nothing written outside a repository


BUGGY = (
    "import guard.commands.create as c\n"
    "def run(*a, **k):\n"
    "    raise RuntimeError('an injected bug')\n"
    "c.run = run\n"
    "from guard.cli import main\n"
    "main()\n"
)


def buggy_lane(*args: str, cwd: Path, env: dict[str, str] | None = None) -> LaneRun:
    """The real CLI with one bug put into `create` (no repository state is a bug any
    more: every broken state is a refusal, so a crash has to be planted)."""
    res = subprocess.run(
        [sys.executable, "-c", BUGGY, *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
    return LaneRun(res.returncode, res.stdout, res.stderr)


def test_internal_error_files_a_crash_report(repo: Repo) -> None:
    crash_dir = repo.state_dir / "crash"
    before = repo.worktrees(), repo.git("for-each-ref").stdout

    r = buggy_lane("create", "alpha", cwd=repo.path)
    assert r.rc == 3
    assert r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert "Traceback" not in r.stderr
    files = sorted(crash_dir.iterdir())
    assert len(files) == 1 and str(files[0]) in line
    report = files[0].read_text()
    assert "Traceback (most recent call last)" in report and "an injected bug" in report

    r = buggy_lane("create", "alpha", "--json", cwd=repo.path)
    assert r.rc == 3 and "Traceback" not in r.stderr
    obj = one_object(r.stdout)
    assert (obj["ok"], obj["code"]) == (False, "internal_error")
    assert isinstance(obj["details"], dict)
    crash_file = Path(str(obj["details"]["crash_file"]))
    assert crash_file.parent == crash_dir and crash_file.is_file()
    assert len(list(crash_dir.iterdir())) == 2
    assert (repo.worktrees(), repo.git("for-each-ref").stdout) == before


def test_crash_report_falls_back_when_the_state_dir_is_broken(repo: Repo, tmp_path: Path) -> None:
    repo.state_dir.mkdir()
    (repo.state_dir / "crash").write_text("not a directory\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = buggy_lane("create", "alpha", "--json", cwd=repo.path, env={"TMPDIR": str(tmp)})
    assert r.rc == 3 and "Traceback" not in r.stderr
    obj = one_object(r.stdout)
    assert obj["code"] == "internal_error"
    (report,) = (tmp / "git-lane-crash").iterdir()
    assert isinstance(obj["details"], dict) and obj["details"]["crash_file"] == str(report)
    assert "an injected bug" in report.read_text()


def test_crash_report_fallback_only_in_a_private_dir(repo: Repo, tmp_path: Path) -> None:
    """The shared temp dir's git-lane-crash is made 0700 and used only when it is this
    user's alone: one someone else could write (or plant files in) is not written to."""
    repo.state_dir.mkdir()
    (repo.state_dir / "crash").write_text("not a directory\n")
    tmp = tmp_path / "tmp"
    (tmp / "git-lane-crash").mkdir(parents=True)
    (tmp / "git-lane-crash").chmod(0o777)
    r = buggy_lane("create", "alpha", "--json", cwd=repo.path, env={"TMPDIR": str(tmp)})
    assert r.rc == 3 and "Traceback" not in r.stderr
    obj = one_object(r.stdout)
    assert isinstance(obj["details"], dict)
    assert str(obj["details"]["crash_file"]).startswith("nowhere"), obj
    assert list((tmp / "git-lane-crash").iterdir()) == []
    (tmp / "git-lane-crash").rmdir()
    r = buggy_lane("create", "alpha", "--json", cwd=repo.path, env={"TMPDIR": str(tmp)})
    assert (tmp / "git-lane-crash").stat().st_mode & 0o777 == 0o700
    assert len(list((tmp / "git-lane-crash").iterdir())) == 1
