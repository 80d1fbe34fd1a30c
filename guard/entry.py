"""The `git-lane` console script and `python -m guard`. `git lane check write [--json] PATH`
is answered here without importing click (50-100 ms by itself): an agent adapter asks it
before every file tool call, on a 50 ms budget. Every other command line, `-h` included,
goes to the click CLI (guard.cli), which also defines `check write` for its help and
for `-C`. Standard library only until guard.cli is imported."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path


def _check_write(rest: Sequence[str]) -> int | None:
    """The exit status of `check write REST`, or None when REST is not the plain form
    (`[--json] PATH`, `--` allowed) that this fast path answers."""
    as_json, paths = False, list[str]()
    for i, a in enumerate(rest):
        if a == "--json":
            as_json = True
        elif a == "--":
            paths.extend(rest[i + 1 :])
            break
        elif a.startswith("-") and a != "-":
            return None
        else:
            paths.append(a)
    if len(paths) != 1:
        return None
    from guard import boundary, files, render

    def body() -> int:
        cwd = os.getcwd()
        b = files.exec_bound(os.environ)
        if b is not None:  # the adapter's case: no engine module, no click
            res = files.check_bound(b, paths[0], cwd)
        else:
            from guard.commands import check

            res = dict(check.write(None, paths[0], cwd))
        if as_json:
            sys.stdout.write(boundary.dumps(res) + "\n")
        else:
            sys.stdout.write(render.check_write(res) + "\n")
        return boundary.EXIT_OK

    def state_dir() -> Path | None:
        common = os.environ.get("GITLANE_COMMON")
        if common and os.path.isdir(os.path.join(common, "git-lane")):
            return Path(common) / "git-lane"
        try:
            from guard.repo import Repo

            return Repo.discover(os.getcwd()).state_dir
        except Exception:
            return None

    argv = ["check", "write", *rest]
    return boundary.guarded(body, argv, lambda: as_json, state_dir)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:2] == ["check", "write"]:
        code = _check_write(args[2:])
        if code is not None:
            sys.stdout.flush()
            raise SystemExit(code)
    from guard.cli import main as cli_main

    cli_main(args)
