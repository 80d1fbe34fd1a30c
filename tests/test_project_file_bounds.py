"""Main's committed `.git-lane.toml` and `.worktreeinclude` are read bounded (red team 17
gate F2). Anyone who lands can commit them at any size (tiny in git: a run of one line
compresses to nothing); they were read whole, every command for the project file, every
clean gate and create for the include patterns (then `git ls-files --exclude-from` held a
pattern a line): 40 MB of `x` lines took a land past 1.4 GB, 200 MB of comments made
`git lane status` take 75 s. Now git says the blob's size first (one `cat-file --batch`),
and one past config.COMMITTED_MAX (1 MiB, as the owner's config.toml) is not read at all:
the project defaults are ignored with a warning (the owner's config and the defaults
apply), and `.worktreeinclude` copies nothing, with a warning in the land's, create's and
setup's result. Never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LaneRun, Repo, git

# config.COMMITTED_MAX, as documented (spelled here so that, without the bound, these
# tests run and fail on what they check rather than on an import)
COMMITTED_MAX = 1 << 20

MAXRSS = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, "
    "text=True); print(r.stdout); print(r.stderr, file=sys.stderr); "
    "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _track(repo: Repo, files: dict[str, bytes]) -> None:
    """Commit FILES on main in the hub (no hooks installed: the owner's own commit)."""
    for name, data in files.items():
        (repo.path / name).write_bytes(data)
    repo.git("add", "--", *files)
    repo.git("commit", "-q", "-m", "project files")


def _padded(text: bytes, size: int) -> bytes:
    """TEXT followed by comment lines, `size` bytes in all."""
    pad = size - len(text)
    assert pad >= 2
    return text + b"#" * (pad - 1) + b"\n"


def _warned(r: LaneRun, name: str) -> list[str]:
    return [w for w in r.json["warnings"] if name in w and "not read" in w]


# -- the reader ---------------------------------------------------------------------------
def test_blob_upto_reads_only_what_fits(repo: Repo) -> None:
    """git.blob_upto: the blob's bytes up to the bound; past it only its size (TooBig);
    None for no such path, a tree, no such revision."""
    from guard import config
    from guard import git as gitmod

    assert config.COMMITTED_MAX == COMMITTED_MAX
    _track(
        repo,
        {
            "small": b"abc\n",
            "edge": b"e" * 1000,
            "big": b"b" * 1001,
            "empty": b"",
        },
    )
    (repo.path / "d").mkdir()
    _track(repo, {"d/f": b"f\n"})
    cwd = str(repo.common_dir)
    assert gitmod.blob_upto(cwd, "main:small", 1000) == b"abc\n"
    assert gitmod.blob_upto(cwd, "main:edge", 1000) == b"e" * 1000
    assert gitmod.blob_upto(cwd, "main:big", 1000) == gitmod.TooBig(1001)
    assert gitmod.blob_upto(cwd, "main:empty", 1000) == b""
    assert gitmod.blob_upto(cwd, "main:missing", 1000) is None
    assert gitmod.blob_upto(cwd, "main:d", 1000) is None  # a tree
    assert gitmod.blob_upto(cwd, "nosuchrev:small", 1000) is None
    assert gitmod.blob_upto(cwd, "main:small\nmain:big", 1000) is None  # one name only


# -- .git-lane.toml -------------------------------------------------------------------------
def test_a_project_file_past_the_bound_is_ignored_with_a_warning(repo: Repo) -> None:
    """One byte past COMMITTED_MAX: its gate_command is not taken (the owner's default,
    unset), every command says why; at the bound exactly it is read as before."""
    at = _padded(b'gate_command = "test -f ok.txt"\n', COMMITTED_MAX)
    _track(repo, {".git-lane.toml": at})
    r = repo.jlane("config", "get", "gate_command")
    assert (r.json["value"], r.json["source"]) == ("test -f ok.txt", "project"), r.stdout
    assert not _warned(r, ".git-lane.toml")
    _track(
        repo, {".git-lane.toml": _padded(b'gate_command = "test -f ok.txt"\n', COMMITTED_MAX + 1)}
    )
    r = repo.jlane("config", "get", "gate_command")
    assert r.rc == 0, r.stdout + r.stderr
    assert (r.json["value"], r.json["source"]) == (None, "default"), r.stdout
    for cmd in (("status",), ("config", "list"), ("create", "alpha")):
        r = repo.jlane(*cmd)
        assert r.rc == 0 and "internal error" not in r.stderr, (cmd, r.stdout, r.stderr)
        assert _warned(r, ".git-lane.toml"), (cmd, r.json["warnings"])
    st = repo.lane("status")
    assert st.rc == 0 and "git-lane: warning: .git-lane.toml" in st.stderr, st.stderr


def test_a_landed_project_file_is_not_read_whole_by_every_command(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """The red team's: 24 MB of comment lines landed once (a few KB in git); `git lane
    status` stays small: under 56 MB (28 MB here; it read and parsed the whole file:
    78 MB at 24 MB, 484 MB and 75 s at 200 MB)."""
    hub = repo
    hub.commit(hub.path, "a.txt", "base\n")
    assert hub.lane("install").rc == 0
    hub.config("gate_command", "true")
    alpha = hub.create("alpha")
    (alpha / ".git-lane.toml").write_bytes(b"# c\n" * 6_000_000)
    git(alpha, "add", ".git-lane.toml")
    git(alpha, "commit", "-qm", "project file")
    assert hub.jlane("land", "alpha").code == "landed"
    res = subprocess.run(
        [sys.executable, "-c", MAXRSS, sys.executable, "-m", "guard", "status", "--json"],
        cwd=hub.path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert '"ok": true' in res.stdout, res.stdout[-500:] + res.stderr[-500:]
    assert "not read" in res.stdout, res.stdout[-1000:]  # the warning, in the JSON result
    kb = int(res.stdout.rsplit("MAXRSS", 1)[1])
    assert kb < 56 * 1024, f"`git lane status` peaked at {kb // 1024} MB reading .git-lane.toml"


# -- .worktreeinclude -----------------------------------------------------------------------
def _include_hub(repo: Repo, include: bytes) -> None:
    _track(repo, {".gitignore": b".env\n", ".worktreeinclude": include})
    (repo.path / ".env").write_text("SECRET=1\n")


def test_a_worktreeinclude_past_the_bound_copies_nothing_at_create(repo: Repo) -> None:
    """create and setup: nothing copied, the warning in their result; at the bound
    exactly the file is read and .env copied."""
    _include_hub(repo, _padded(b".env\n", COMMITTED_MAX))
    r = repo.jlane("create", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert (Path(r.json["lane"]["path"]) / ".env").read_text() == "SECRET=1\n"
    assert not _warned(r, ".worktreeinclude")
    _include_hub(repo, _padded(b".env\n", COMMITTED_MAX + 1))
    r = repo.jlane("create", "beta")
    assert r.rc == 0 and "internal error" not in r.stderr, r.stdout + r.stderr
    beta = Path(r.json["lane"]["path"])
    assert not (beta / ".env").exists()
    assert r.json["included"]["files"] == 0
    assert _warned(r, ".worktreeinclude"), r.json["warnings"]
    r = repo.jlane("setup", "beta")
    assert r.rc == 0, r.stdout + r.stderr
    assert not (beta / ".env").exists()
    assert _warned(r, ".worktreeinclude"), r.json["warnings"]


def test_a_worktreeinclude_of_too_many_patterns_copies_nothing(repo: Repo) -> None:
    """Under the byte bound, but past include.MAX_PATTERNS (1,000) pattern lines: git
    would match every file of the hub against each (minutes per clean gate for 100k
    globs); not used, said. At the count exactly (comments and blanks not counted) it is."""
    _include_hub(repo, b"# a comment\n\n.env\n" + b"**/x*y*z\n" * 999)
    r = repo.jlane("create", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert (Path(r.json["lane"]["path"]) / ".env").exists()
    _include_hub(repo, b".env\n" + b"**/x*y*z\n" * 1000)
    r = repo.jlane("create", "beta")
    assert r.rc == 0, r.stdout + r.stderr
    assert not (Path(r.json["lane"]["path"]) / ".env").exists()
    assert _warned(r, ".worktreeinclude"), r.json["warnings"]


@pytest.mark.parametrize("through", ["land", "queue"])
def test_a_worktreeinclude_past_the_bound_copies_nothing_into_a_clean_gate(
    repo: Repo, gitlane_on_path: Path, through: str
) -> None:
    """A clean gate (land with gate_worktree = clean; the queue's): the gate runs without
    the hub's .env, and the land's warnings say why."""
    _include_hub(repo, _padded(b".env\n", COMMITTED_MAX + 1))
    repo.config("gate_worktree", "clean")
    repo.config("gate_command", "test ! -e .env")  # passes only without the hub's .env
    path = repo.create("alpha")
    repo.commit(path, "b.txt", "b\n")
    if through == "land":
        r = repo.jlane("land", "alpha")
        assert r.rc == 0 and r.code == "landed", r.stdout + r.stderr
    else:
        assert repo.jlane("ready", "alpha").code == "ready"
        r = repo.jlane("queue", "alpha")
        assert r.rc == 0 and r.json["landed"] == ["alpha"], r.stdout + r.stderr
    assert "internal error" not in r.stderr
    assert _warned(r, ".worktreeinclude"), r.json.get("warnings")


def test_a_landed_worktreeinclude_is_not_read_whole_by_every_clean_gate(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """The red team's, smaller: 8 MB of `x` lines landed once; the next clean gate's land
    stays under 56 MB (27 MB here; it read the file whole and handed git a pattern a
    line: 1.4 GB at 40 MB)."""
    hub = repo
    hub.commit(hub.path, "a.txt", "base\n")
    assert hub.lane("install").rc == 0
    hub.config("gate_command", "true")
    hub.config("gate_worktree", "clean")
    alpha = hub.create("alpha")
    beta = hub.create("beta")
    (alpha / ".worktreeinclude").write_bytes(b".env\n" + b"x\n" * 4_000_000)
    git(alpha, "add", ".worktreeinclude")
    git(alpha, "commit", "-qm", "include")
    r = hub.jlane("land", "alpha")
    assert r.rc == 0 and r.code == "landed", r.stdout[-500:]
    hub.commit(beta, "b.txt", "b\n")
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            MAXRSS,
            sys.executable,
            "-m",
            "guard",
            "land",
            "beta",
            "--sync",
            "--json",
        ],
        cwd=hub.path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = res.stdout
    assert '"code": "landed"' in out, out[-1000:] + res.stderr[-1000:]
    assert ".worktreeinclude" in out and "not read" in out, out[-1000:]
    kb = int(out.rsplit("MAXRSS", 1)[1])
    assert kb < 56 * 1024, f"beta's land peaked at {kb // 1024} MB reading main's .worktreeinclude"
