"""The man page git-lane(1): generated from the click CLI (man/git-lane.1 is what
`python3 -m guard.manpage --write` makes of the CLI as it is now), it names every command
and every config key; `man` renders it when it is installed (the wheel's part is in
tests/test_wheel.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from guard import config as cfgmod
from guard import manpage
from guard.cli import cli

PAGE = ROOT / "man" / "git-lane.1"


def test_the_page_in_the_tree_is_the_one_the_cli_generates() -> None:
    assert PAGE.read_text() == manpage.render(cli), (
        "man/git-lane.1 is out of date: run python3 -m guard.manpage --write"
    )


def test_the_page_lists_every_command_and_key() -> None:
    text = PAGE.read_text().replace("\\-", "-")
    names: list[str] = []

    def walk(group: object, prefix: str) -> None:
        for name, cmd in group.commands.items():  # type: ignore[attr-defined]
            names.append(prefix + name)
            if hasattr(cmd, "commands"):
                walk(cmd, prefix + name + " ")

    walk(cli, "")
    assert {"status", "land", "config set", "log", "doctor"} <= set(names)
    for name in names:
        assert re.search(rf"^\.B git lane {re.escape(name)} ", text, re.M), name
    for key in cfgmod.KEYS:
        assert re.search(rf"^\.B {re.escape(key)}$", text, re.M), key
    assert "--json" in text and "NO_COLOR" in text and "GITLANE_PROGRESS_INTERVAL" in text


def test_the_generator_prints_the_page() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-m", "guard.manpage"], capture_output=True, text=True, env=env
    )
    assert res.returncode == 0 and res.stdout == PAGE.read_text()


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_man_renders_the_page() -> None:
    res = subprocess.run(
        ["man", "-l", str(PAGE)],
        capture_output=True,
        text=True,
        env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "100"},
    )
    assert res.returncode == 0, res.stderr
    assert "git lane land" in res.stdout and "CONFIGURATION" in res.stdout
