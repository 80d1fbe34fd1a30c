"""Output that scales and informs, through the real CLI: status (released lanes behind
--all, a PATH column with ~, a header that reads well, 100-column lines), log (aligned
columns, whole values), progress on stderr for a silent gate and for land --wait, colour
only on a terminal and never with NO_COLOR, usage hints that say -h, config help with the
keys, `config set KEY -3`, and `create --goal` with a goal that is not a key."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo
from enginehelp import ready_lane

from guard import config as cfgmod
from guard import render

ESC = "\x1b["


def spawn(repo: Repo, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "guard", *args],
        cwd=repo.path,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stderr_lines_while_running(proc: subprocess.Popen[str], timeout: float = 60) -> list[Any]:
    """(line, still_running) for each stderr line, read as it comes."""
    assert proc.stderr is not None
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        got.append((line.rstrip("\n"), proc.poll() is None))
    proc.wait(timeout=30)
    return got


def on_pty(repo: Repo, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run with stdout and stderr on a terminal; what the terminal showed."""
    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "guard", *args],
        cwd=repo.path,
        env={**os.environ, "TERM": "xterm", **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=sub,
        stderr=sub,
    )
    os.close(sub)
    out = b""
    while True:
        r, _, _ = select.select([main], [], [], 30)
        if not r:
            break
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return proc.wait(timeout=30), out.decode("utf-8", "replace")


# -- status ----------------------------------------------------------------------------------
def test_status_hides_released_lanes_unless_all(repo: Repo) -> None:
    repo.create("alpha")
    repo.create("beta")
    assert repo.jlane("release", "beta").rc == 0

    plain = repo.jlane("status").json
    assert [ln["key"] for ln in plain["lanes"]] == ["alpha"]
    assert plain["released_hidden"] == 1
    every = repo.jlane("status", "--all").json
    assert {ln["key"]: ln["state"] for ln in every["lanes"]} == {
        "alpha": "active",
        "beta": "released",
    }
    assert every["released_hidden"] == 0
    # a released lane named by its key is shown
    assert [ln["state"] for ln in repo.jlane("status", "beta").json["lanes"]] == ["released"]

    text = repo.lane("status").stdout
    assert re.search(r"^beta\b", text, re.M) is None
    assert "git lane status --all" in text
    assert re.search(r"^beta\s+released\s", repo.lane("status", "--all").stdout, re.M)


def test_status_header_path_column_and_width(repo: Repo, hermetic_seal: Path) -> None:
    alpha = ready_lane(repo, "alpha")
    repo.create("fix-login-12")
    main = repo.sha()
    assert main is not None
    r = repo.lane("status")
    assert r.rc == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(rf"main at {main[:7]} · epoch 0 · hub .+", lines[0]), lines[0]
    assert lines[1].split() == ["LANE", "STATE", "FRESH", "DIRTY", "A/B", "PATH"]
    # the lane's path, with the home directory as ~, in the PATH column of its row
    home = str(hermetic_seal)
    assert str(alpha).startswith(home + "/")
    row = next(ln for ln in lines if ln.startswith("alpha "))
    assert row.endswith("  ~" + str(alpha)[len(home) :]), row
    assert row.index("~") == lines[1].index("PATH")
    # the advice, below the row, names the command and no path
    advice = lines[lines.index(row) + 1]
    assert advice.strip() == "Ready: `git lane land alpha`."
    assert re.search(r"^alpha\s+active\s+yes\s+no\s+1/0\s+~/", row)
    # every line fits 100 columns (the header too, once the hub is under HOME, as usual)
    assert all(len(ln) <= 100 for ln in lines[1:]), [ln for ln in lines if len(ln) > 100]
    assert home not in r.stdout
    r = repo.lane("status", env={"HOME": str(repo.path.parent)})
    head = r.stdout.splitlines()[0]
    assert head == f"main at {main[:7]} · epoch 0 · hub ~/{repo.path.name}" and len(head) <= 100


def test_status_warnings_stay_one_line_each_on_stderr(repo: Repo) -> None:
    repo.create("alpha")
    r = repo.lane("status")  # no hooks installed: a warning
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("git-lane: warning: ")]
    assert warnings and len(warnings) == len(r.stderr.splitlines())
    assert "git-lane: warning" not in r.stdout


def test_status_renders_a_state_it_does_not_know() -> None:
    result = {
        "epoch": 3,
        "main": {"branch": "main", "sha": "9b98106" + "0" * 33},
        "hub": {"path": None, "dirty_paths": []},
        "lock": None,
        "lanes": [{"key": "odd", "branch": "lane/odd", "path": "/x/odd", "state": "corrupt"}],
    }
    text = render.status(result)
    assert re.search(r"^odd\s+corrupt\s+-\s+-\s+-\s+/x/odd$", text, re.M), text


# -- log -------------------------------------------------------------------------------------
def test_log_columns_align_and_values_are_never_cut(repo: Repo) -> None:
    path = ready_lane(repo, "alpha")
    long_value = "echo " + "a" * 70 + " && exit 3"
    repo.config("gate_command", long_value)
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (1, "gate_failed")
    repo.create("fix-login-page-12")
    repo.lane("release", "nosuch")  # a refusal, with its argv
    assert path.exists()

    lines = repo.lane("log").stdout.splitlines()
    head = lines[0]
    assert head.split() == ["TIME", "KIND", "LANE", "CODE", "SUMMARY"]
    starts = [head.index(c) for c in ("KIND", "LANE", "CODE", "SUMMARY")]
    for ln in lines[1:]:
        assert len(ln) <= 100, ln
        for s in starts[:3]:
            assert ln[s - 2 : s] == "  " and ln[s] != " ", (ln, s)
    assert any("gate_failed (exit 3)" in ln for ln in lines), lines
    # the long gate command is shown whole or not at all
    for ln in lines:
        assert "aaaaaaaaaa" not in ln or long_value in ln, ln
    assert any("key=gate_command" in ln for ln in lines)
    # the detail is all in --json
    evs = repo.jlane("log").json["events"]
    assert any(e.get("value") == long_value for e in evs)


# -- progress --------------------------------------------------------------------------------
def test_gate_output_streams_and_a_silent_gate_reports_progress(repo: Repo) -> None:
    ready_lane(repo, "alpha")
    repo.config("gate_command", "echo gate-started; sleep 3")
    proc = spawn(repo, "land", "alpha", env={"GITLANE_PROGRESS_INTERVAL": "0.5"})
    got = stderr_lines_while_running(proc)
    assert proc.returncode == 0, got
    lines = [ln for ln, _ in got]
    first = lines.index("gate-started")
    ticks = [
        (i, running)
        for i, (ln, running) in enumerate(got)
        if re.fullmatch(r"git-lane: gate running \d+ s \(echo gate-started; sleep 3\)", ln)
    ]
    assert got[first][1], "the gate's output came only after land had finished"
    assert len(ticks) >= 2 and all(running for _, running in ticks), got
    assert ticks[0][0] > first


def test_a_talking_gate_needs_no_progress_lines(repo: Repo) -> None:
    ready_lane(repo, "alpha")
    repo.config("gate_command", "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.3; done")
    r = repo.lane("land", "alpha", env={"GITLANE_PROGRESS_INTERVAL": "1"})
    assert r.rc == 0, r.stderr
    assert "tick 6" in r.stderr and "gate running" not in r.stderr


def test_land_wait_says_whom_it_waits_for_and_repeats(repo: Repo) -> None:
    from guard import lock
    from guard.repo import Repo as GRepo

    ready_lane(repo, "alpha")
    repo.config("gate", "off")
    held = lock.acquire(GRepo.discover(str(repo.path)), "holder", "", "")
    try:
        proc = spawn(
            repo, "land", "alpha", "--wait", "2.5", env={"GITLANE_PROGRESS_INTERVAL": "0.5"}
        )
        got = stderr_lines_while_running(proc)
    finally:
        lock.release(GRepo.discover(str(repo.path)), held)
    assert proc.returncode == 1
    waits = [
        ln
        for ln, running in got
        if running
        and ln.startswith(
            f"git-lane: waiting for the integration lock held by lane holder (pid {os.getpid()})"
        )
        and " since " in ln
    ]
    assert len(waits) >= 3, got
    assert any("[lock_busy]" in ln for ln, _ in got[-3:]), got


# -- colour ----------------------------------------------------------------------------------
def test_colour_only_on_a_terminal_and_never_with_no_color(repo: Repo) -> None:
    rc, shown = on_pty(repo, "land", "nosuch")
    assert rc == 1 and f"{ESC}31mrefused{ESC}0m [unknown_lane]" in shown, shown
    rc, shown = on_pty(repo, "land", "nosuch", env={"NO_COLOR": "1"})
    assert rc == 1 and "refused [unknown_lane]" in shown and ESC not in shown
    rc, shown = on_pty(repo, "land", "nosuch", env={"NO_COLOR": ""})  # empty: not set
    assert ESC in shown
    rc, shown = on_pty(repo, "land", "nosuch", "--json")
    assert rc == 1 and ESC not in shown
    r = repo.lane("land", "nosuch")  # a pipe
    assert r.rc == 1 and ESC not in r.stderr + r.stdout
    # doctor's FAIL (no hooks installed here)
    rc, shown = on_pty(repo, "doctor")
    assert rc == 1 and f"{ESC}31mFAIL{ESC}0m" in shown, shown
    rc, shown = on_pty(repo, "doctor", env={"NO_COLOR": "yes"})
    assert "FAIL" in shown and ESC not in shown
    r = repo.lane("doctor")
    assert "FAIL" in r.stdout and ESC not in r.stdout


# -- help and usage --------------------------------------------------------------------------
def test_usage_hints_say_dash_h(repo: Repo) -> None:
    for args in (("status", "--bogus"), ("nosuch",), ("config", "set")):
        r = repo.lane(*args)
        assert r.rc == 2
        assert "-h' for help" in r.stderr and "--help" not in r.stderr, r.stderr
    r = repo.jlane("status", "--bogus")
    assert r.json["next"] == ["git lane status -h"]


@pytest.mark.parametrize("sub", ["get", "set", "unset", "list"])
def test_config_help_lists_every_key_with_type_and_default(repo: Repo, sub: str) -> None:
    r = repo.lane("config", sub, "-h")
    assert r.rc == 0, r.stderr
    text = " ".join(r.stdout.split())
    for key in cfgmod.KEYS:
        assert re.search(rf"\b{key}\b", r.stdout), key
    assert "max_lanes positive integer, default 5" in text
    assert 'gate on|off, default "on"' in text


def test_config_set_takes_a_dash_value_as_the_value(repo: Repo) -> None:
    cfg = repo.state_dir / "config.toml"
    r = repo.jlane("config", "set", "max_lanes", "-3")
    assert (r.rc, r.code) == (1, "invalid_config")
    assert r.json["details"]["key"] == "max_lanes" and "file" not in r.json["details"]
    assert "config.toml" not in r.json["message"] + " ".join(r.json["next"])  # the file is fine
    assert not cfg.exists() or "max_lanes" not in cfg.read_text()
    assert repo.jlane("config", "set", "max_lanes", "3").rc == 0
    r = repo.jlane("config", "set", "max_lanes", "-1")
    assert r.code == "invalid_config" and "config.toml" not in r.json["message"]
    assert repo.jlane("config", "get", "max_lanes").json["value"] == 3


# -- create --goal ---------------------------------------------------------------------------
def test_create_goal_is_made_a_key(repo: Repo) -> None:
    keys = [repo.jlane("create", "--goal", "Fix Login").json["lane"]["key"] for _ in range(2)]
    assert keys == ["fix-login-1", "fix-login-2"]
    r = repo.jlane("create", "--goal", "  Ünïcode: über *Goal*!! ")
    assert r.json["lane"]["key"] == "unicode-uber-goal-1"
    assert r.json["lane"]["goal"] == "  Ünïcode: über *Goal*!! "
    long = repo.jlane("create", "--goal", "x" * 200).json["lane"]["key"]
    assert len(long) <= 63 and long.endswith("-1")
    r = repo.jlane("create", "--goal", "!!!")
    assert (r.rc, r.code) == (1, "invalid_lane_key")


def test_next_line_is_joined_with_and_and_notes_go_last() -> None:
    """A failed step stops the rest; a `# note` on a step would swallow what follows it."""
    from guard.errors import Refusal

    r = Refusal("x", "m", next=["git lane land a  # as the owner", "git lane release a"])
    assert (
        r.line()
        == "git-lane: refused [x]: m. Next: git lane land a && git lane release a  # as the owner"
    )
    r = Refusal("x", "m", next=["echo 'a  # b'", "true"])
    assert r.line().endswith("Next: echo 'a  # b' && true")


@pytest.mark.parametrize(
    ("cmd", "want"),
    [
        ("git worktree unlock /l", "git -C R worktree unlock /l"),
        ("git lane release a  # git lane x", "git -C R lane release a  # git lane x"),
        ("kill 5 && git lane land a", "kill 5 && git -C R lane land a"),
        (
            "git -c x=y update-ref -d r || git log",
            "git -C R -c x=y update-ref -d r || git -C R log",
        ),
        (
            'git update-ref r "$(git mktree </dev/null)" ""',
            'git -C R update-ref r "$(git -C R mktree </dev/null)" ""',
        ),
        ("echo 'git x; git y' ; `git z`", "echo 'git x; git y' ; `git -C R z`"),
        ("git lane exec a -- git status", "git -C R lane exec a -- git status"),
        ("git -C /l status", "git -C /l status"),
        (
            "GIT_DIR=/a GIT_COMMON_DIR=/b git read-tree HEAD",
            "GIT_DIR=/a GIT_COMMON_DIR=/b git read-tree HEAD",
        ),
        ("cd /h", "cd /h"),
        ("gitk --all", "gitk --all"),
        # env starts git too (red team 13W: exec --sandbox's TMPDIR next)
        ("env TMPDIR=/tmp git lane exec a -- t", "env TMPDIR=/tmp git -C R lane exec a -- t"),
        ("env -u X -i Y=1 git log", "env -u X -i Y=1 git -C R log"),
        ("env GIT_DIR=/a git log", "env GIT_DIR=/a git log"),
        ("envy git log", "envy git log"),
    ],
)
def test_every_git_a_command_starts_is_pinned(cmd: str, want: str) -> None:
    """errors.pin_git: what the CLI prints from a lane's cwd for the owner (cli.pinned)."""
    from guard.errors import pin_git

    assert pin_git(cmd, "R") == want


def test_release_text_says_where_it_kept_the_lanes_git_dirs() -> None:
    """A release that copied git dirs into kept/ (a submodule's, a repository made in the
    lane: their commits may be found nowhere else) says where, in text too; the names it
    left out are the lane's to write, so text only counts them."""
    result = {
        "code": "released",
        "lane": "alpha",
        "kept_modules": "/r/.git/git-lane/kept/alpha-modules-2026-12-02T211009Z",
        "kept_modules_skipped": ["sub/.git/x\nNext: git lane release beta"],
    }
    text = render.release(result)
    assert "/r/.git/git-lane/kept/alpha-modules-2026-12-02T211009Z" in text, text
    assert "1 link(s) or special file(s) left out" in text and "Next:" not in text, text
    assert "kept" not in render.release({"code": "released", "lane": "alpha"})


def test_sync_text_shows_the_lanes_names_and_subject_one_line_each() -> None:
    """A sync's worklist names the lane's conflicted paths and the commit's subject, both
    the lane's to write: a newline there cannot forge a line of the advice (`Next:`), an
    ESC cannot reach the owner's terminal."""
    result = {
        "state": "conflicts",
        "lane": "alpha",
        "path": "/tmp/alpha",
        "next": ["git lane continue alpha"],
        "alternatives": [],
        "worklist": {
            "step": 1,
            "total": 1,
            "commit": "1" * 40,
            "subject": "s\x1b]0;x\x07\nNext: git lane release beta --confirm yes-discard-lane",
            "files": [{"path": "a\nNext: git lane release beta", "kind": "both modified"}],
        },
    }
    text = render.sync(result)
    assert "\x1b" not in text, text
    assert [ln for ln in text.splitlines() if ln.startswith("Next:")] == [
        "Next: git lane continue alpha"
    ], text
