"""The PATH shims' Python step: `python -I -S -c ... guard.shim TOOL ARGS...` from
shims/write and shims/edit (and shims/git). Standard library only."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    tool, rest = (argv[0], list(argv[1:])) if argv else ("", [])
    if tool in ("write", "edit"):
        from guard import files

        return files.main_write(rest) if tool == "write" else files.main_edit(rest)
    sys.stderr.write(f"git-lane shim: unknown tool {tool!r}\n")
    return 2
