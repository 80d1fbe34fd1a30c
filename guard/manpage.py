"""The man page git-lane(1), generated from the click CLI and the config key table, so
that `man git-lane` and `git lane --help` (which git turns into `man git-lane`) say what
`git lane <command> -h` says.

`python3 -m guard.manpage` prints the page; `python3 -m guard.manpage --write` refreshes
man/git-lane.1, which the wheel installs as `<prefix>/share/man/man1/git-lane.1` (where
`man` looks for a program in `<prefix>/bin`). tests/test_manpage.py fails when the file and
the CLI differ. The click objects are read by their attributes: only guard/cli.py imports
click."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parent.parent / "man" / "git-lane.1"


@dataclass(frozen=True)
class Option:
    names: str  # "-C PATH", "--wait [SECONDS]", "--json"
    help: str


@dataclass(frozen=True)
class Command:
    path: str  # "config set"
    usage: str  # "[OPTIONS] KEY VALUE"
    help: str
    options: tuple[Option, ...]


def _options(cmd: Any) -> tuple[Option, ...]:
    out = []
    for p in cmd.params:
        if getattr(p, "param_type_name", "") != "option" or getattr(p, "hidden", False):
            continue
        names = ", ".join([*p.opts, *p.secondary_opts])
        if not p.is_flag:
            metavar = p.metavar or p.type.name.upper()
            names += f" {metavar}"
        out.append(Option(names, p.help or ""))
    return tuple(out)


def _usage(cmd: Any) -> str:
    pieces = ["[OPTIONS]"]
    for p in cmd.params:
        if getattr(p, "param_type_name", "") != "argument":
            continue
        name = (p.metavar or p.name).upper() + ("..." if p.nargs == -1 else "")
        pieces.append(name if p.required else f"[{name}]")
    if hasattr(cmd, "commands"):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def commands(group: Any, prefix: str = "") -> list[Command]:
    """Every visible command of `group` (a click Group), subcommands after their group."""
    out: list[Command] = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        if getattr(cmd, "hidden", False):
            continue
        path = f"{prefix}{name}"
        out.append(Command(path, _usage(cmd), (cmd.help or "").strip(), _options(cmd)))
        if hasattr(cmd, "commands"):
            out.extend(commands(cmd, path + " "))
    return out


def _roff(text: str) -> str:
    """Text safe in a roff line: backslashes escaped, hyphens as \\-, no leading . or '."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = [("\\&" + ln) if ln.startswith((".", "'")) else ln for ln in text.splitlines()]
    return "\n".join(lines)


ENVIRONMENT = (
    ("GITLANE_LANE", "binds a process to a lane (set by git lane exec): it becomes a worker"),
    ("GITLANE_ROLE", "worker makes a process a worker; nothing makes a bound process the owner"),
    ("GITLANE_PROGRESS_INTERVAL", "seconds between progress lines on stderr (default 10)"),
    ("NO_COLOR", "any non-empty value: no colour (colour is only ever used on a terminal)"),
    ("XDG_CONFIG_HOME", "the user's config is $XDG_CONFIG_HOME/git-lane/config.toml"),
    ("XDG_CACHE_HOME", "lane worktrees live under $XDG_CACHE_HOME/git-lane/worktrees"),
)


def render(group: Any) -> str:
    from guard import __version__
    from guard import config as cfgmod

    out = [
        '.TH GIT\\-LANE 1 "" "git\\-lane ' + _roff(__version__) + '" "git-lane manual"',
        ".SH NAME",
        "git\\-lane \\- " + _roff((group.help or "").split(":", 1)[-1].strip()),
        ".SH SYNOPSIS",
        ".B git lane",
        _roff("[-C PATH] [--json] COMMAND [ARGS]..."),
        ".br",
        ".B git lane",
        _roff("COMMAND -h"),
        ".SH DESCRIPTION",
        _roff(
            "Every writer (a coding agent or a person) gets a lane: its own git worktree on "
            "its own branch lane/KEY. main moves by one door only, git lane land: under one "
            "integration lock, the lane clean and fresh, the owner's gate command passing at "
            "the exact commit that becomes main, then a fast-forward. Hooks installed by "
            "git lane install refuse every other move of main."
        ),
        ".PP",
        _roff(
            "Every command takes --json and then prints one JSON object on stdout. A refusal "
            "prints one line on stderr: git-lane: refused [CODE]: what happened. Next: the "
            "command to run."
        ),
        ".SH OPTIONS",
    ]
    helped = Option("-h", "Show the help (of git lane, or of COMMAND) and exit.")
    for opt in (*_options(group), helped):
        out += [".TP", ".B " + _roff(opt.names), _roff(opt.help)]
    out.append(".SH COMMANDS")
    for c in commands(group):
        out += [".TP", ".B " + _roff(f"git lane {c.path} {c.usage}"), _roff(c.help)]
        for opt in c.options:
            out += [".RS", ".TP", ".B " + _roff(opt.names), _roff(opt.help), ".RE"]
    out += [".SH CONFIGURATION", _roff("Set with git lane config set KEY VALUE:")]
    for name, spec in cfgmod.KEYS.items():
        shown = f"{cfgmod.type_of(name)}, default {cfgmod.default_shown(name)}: {spec.help}"
        out += [".TP", ".B " + _roff(name), _roff(shown)]
    out += [
        ".SH EXIT STATUS",
        _roff("0 success, 1 refusal, 2 usage error, 3 internal error (a crash file is written)."),
        ".SH ENVIRONMENT",
    ]
    for name, meaning in ENVIRONMENT:
        out += [".TP", ".B " + _roff(name), _roff(meaning)]
    out += [
        ".SH FILES",
        _roff(
            "$(git rev-parse --git-common-dir)/git-lane/: config.toml, lanes/, epoch.json, "
            "events.jsonl, locks/, landing.json."
        ),
        ".SH SEE ALSO",
        ".BR git\\-worktree (1),",
        ".BR git\\-rebase (1),",
        ".BR githooks (5)",
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    from guard.cli import cli

    page = render(cli)
    if argv == ["--write"]:
        PAGE.parent.mkdir(exist_ok=True)
        PAGE.write_text(page)
        return 0
    if argv:
        sys.stderr.write("usage: python3 -m guard.manpage [--write]\n")
        return 2
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
