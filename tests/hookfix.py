"""Helpers shared by the hook, install, doctor and pre-commit-framework tests: install the
real hooks, create lanes through the engine in-process (fast), run git as a real process
and check a refusal the way a user sees it (exit status, `[code]` on stderr, no traceback)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from conftest import Repo, git

from guard.commands import create as create_cmd
from guard.commands import install as hookinstall
from guard.repo import Repo as GRepo


def grepo(repo: Repo) -> GRepo:
    return GRepo.discover(repo.path)


def install(repo: Repo, **kw: Any) -> dict[str, Any]:
    return dict(hookinstall.run(grepo(repo), **kw))


def make_lane(repo: Repo, key: str) -> Path:
    return Path(create_cmd.run(grepo(repo), key)["lane"]["path"])


def run(
    cwd: Path | str, *args: str, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    if env:
        full.update(env)
    return subprocess.run(
        ["git", *args], cwd=cwd, text=True, capture_output=True, env=full, input=input
    )


def assert_refused(
    res: subprocess.CompletedProcess[str], code: str = "main_mutation_refused"
) -> None:
    assert res.returncode != 0, f"expected a refusal, got success:\n{res.stdout}\n{res.stderr}"
    assert f"git-lane: refused [{code}]" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr, res.stderr


def assert_ok(res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode == 0, f"rc={res.returncode}\n{res.stdout}\n{res.stderr}"
    assert "refused" not in res.stderr, res.stderr


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def commit_file(
    where: Path, name: str, text: str, msg: str | None = None, *extra: str
) -> subprocess.CompletedProcess[str]:
    write(where / name, text)
    git(where, "add", "--", name)
    return run(where, "commit", "-q", *extra, "-m", msg or f"edit {name}")


def sha(where: Path | str, ref: str = "HEAD") -> str | None:
    res = run(where, "rev-parse", "-q", "--verify", ref)
    return res.stdout.strip() or None


def events(repo: Repo) -> list[dict[str, Any]]:
    import json

    p = repo.state_dir / "events.jsonl"
    if not p.exists():
        return []
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
