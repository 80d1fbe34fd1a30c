"""The distribution: the wheel carries hooks/ and shims/ (a plain `pip install` must give
working hooks), installs into a fresh venv with its dependencies from PyPI, and its
console script runs."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, Repo

pytestmark = pytest.mark.slow

DESIGN_HOOKS = {"pre-commit", "pre-rebase", "reference-transaction"}
DESIGN_SHIMS = {"git", "edit", "write"}


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(argv, text=True, capture_output=True, timeout=600, **kw)  # type: ignore[call-overload]
    assert res.returncode == 0, f"{argv}\n{res.stdout}\n{res.stderr}"
    return res  # type: ignore[no-any-return]


def source_files(sub: str) -> dict[str, Path]:
    return {
        str(p.relative_to(ROOT / sub)): p
        for p in sorted((ROOT / sub).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_wheel_installs_into_a_fresh_venv_and_runs(repo: Repo, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)])
    (wheel,) = dist.glob("git_lane-*.whl")

    with zipfile.ZipFile(wheel) as zf:
        entries = {i.filename: i for i in zf.infolist()}
        for sub in ("hooks", "shims"):
            src = source_files(sub)
            shipped = {
                n[len(f"guard/_data/{sub}/") :]
                for n in entries
                if n.startswith(f"guard/_data/{sub}/")
            }
            assert shipped, f"the wheel carries no guard/_data/{sub}/ files"
            assert shipped == set(src), sub
            for rel, path in src.items():
                info = entries[f"guard/_data/{sub}/{rel}"]
                assert zf.read(info) == path.read_bytes(), rel
                want_x = bool(path.stat().st_mode & stat.S_IXUSR)
                assert bool((info.external_attr >> 16) & stat.S_IXUSR) == want_x, rel
        hooks = {n.rsplit("/", 1)[1] for n in entries if n.startswith("guard/_data/hooks/")}
        assert hooks >= DESIGN_HOOKS
        # every shim the source tree has is shipped (checked above); the DESIGN set is
        # required once shims/ holds any of them
        shims = {n.rsplit("/", 1)[1] for n in entries if n.startswith("guard/_data/shims/")}
        if shims & DESIGN_SHIMS:
            assert shims >= DESIGN_SHIMS, f"shims missing: {sorted(DESIGN_SHIMS - shims)}"
        ep = zf.read(next(n for n in entries if n.endswith(".dist-info/entry_points.txt"))).decode()
        assert "git-lane = guard.entry:main" in ep
        # the man page, as wheel data that installs into <prefix>/share/man/man1
        page = [n for n in entries if n.endswith(".data/data/share/man/man1/git-lane.1")]
        assert len(page) == 1, "the wheel carries no share/man/man1/git-lane.1"
        assert zf.read(page[0]) == (ROOT / "man" / "git-lane.1").read_bytes()

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], env=env)

    script = venv / "bin" / "git-lane"
    res = subprocess.run(
        [str(script), "status", "--json"],
        cwd=repo.path,
        text=True,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert (d["ok"], d["main"]["sha"]) == (True, repo.sha())
    # it is the installed copy that ran, not this checkout
    res = run(
        [str(venv / "bin" / "python"), "-c", "import guard; print(guard.__file__)"],
        env=env,
        cwd=tmp_path,
    )
    assert Path(res.stdout.strip()).is_relative_to(venv)
    installed = Path(res.stdout.strip()).parent / "_data" / "hooks"
    for name in DESIGN_HOOKS:
        assert os.access(installed / name, os.X_OK), name
    # where man finds it for a program in <prefix>/bin: `man git-lane` and `git lane --help`
    assert (venv / "share" / "man" / "man1" / "git-lane.1").is_file()
    if shutil.which("man") is not None:
        on_path = {k: v for k, v in env.items() if k != "MANPATH"}
        on_path.update(PATH=f"{venv / 'bin'}:{env['PATH']}", MANPAGER="cat", GIT_PAGER="cat")
        res = run(["man", "-w", "git-lane"], env=on_path)
        assert Path(res.stdout.strip()) == venv / "share" / "man" / "man1" / "git-lane.1"
        res = run(["git", "lane", "--help"], env=on_path, cwd=repo.path)
        assert "git lane land" in res.stdout
