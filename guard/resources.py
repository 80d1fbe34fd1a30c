"""Where the shipped sh files live: `guard/_data/<name>` in a wheel (force-included by
pyproject.toml), `<repo root>/<name>` in a source checkout or an editable install."""

from __future__ import annotations

from pathlib import Path

NAMES = ("hooks", "shims", "install")


def data_dir(name: str) -> Path:
    """The `hooks`, `shims` or `install` directory of this installation."""
    if name not in NAMES:
        raise ValueError(f"unknown data directory {name!r}; expected one of {', '.join(NAMES)}")
    here = Path(__file__).resolve().parent
    for cand in (here / "_data" / name, here.parent / name):
        if cand.is_dir():
            return cand
    raise FileNotFoundError(
        f"git-lane's {name}/ directory is missing (looked in {here / '_data' / name} and "
        f"{here.parent / name}); reinstall git-lane"
    )
