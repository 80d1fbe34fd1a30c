"""`git lane export`: the lane's commits since its merge-base with main plus its
uncommitted work (untracked included, ignored left out) as one mbox that `git am -k
--keep-cr` applies onto the base in a fresh clone, reproducing the lane's worktree exactly
(tree hash, modes, symlinks, binary and oddly named files), without touching the lane."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo, git
from enginehelp import grow_index, lane_capped

ODD_NAMES = [
    b"with space.txt",
    b"new\nline.txt",
    b"quote\"d'.txt",
    b"-leading-dash.txt",
    b"caf\xe9-latin1.txt",  # not UTF-8
    "ünï.txt".encode(),
]


def _write(p: Path | bytes, data: bytes) -> None:
    with open(p, "wb") as f:
        f.write(data)


def _worktree_tree(where: Path, tmp: Path) -> str:
    """The tree `git add -A` makes of a worktree, in a throwaway index (the expectation,
    computed apart from guard)."""
    env = {"GIT_INDEX_FILE": str(tmp / "expect.index")}
    git(where, "read-tree", "HEAD", env=env)
    git(where, "add", "-A", env=env)
    return git(where, "write-tree", env=env).stdout.strip()


def _bgit(where: Path, *args: str) -> bytes:
    # GIT_OPTIONAL_LOCKS=0: the test's own `git status` must not refresh the index it watches
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    return subprocess.run(
        ["git", *args], cwd=where, capture_output=True, check=True, env=env
    ).stdout


def _snapshot(where: Path) -> tuple[bytes, int, bytes, bytes]:
    """The lane's index bytes and mtime, `git status`, and the object count."""
    idx = Path(git(where, "rev-parse", "--path-format=absolute", "--git-path", "index").stdout[:-1])
    st = idx.stat()
    status = _bgit(where, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    objects = _bgit(where, "count-objects", "-v")
    return idx.read_bytes(), st.st_mtime_ns, status, objects


def _apply(repo: Repo, tmp: Path, base: str, mbox: Path, name: str = "clone") -> Path:
    clone = tmp / name
    git(tmp, "clone", "-q", "--no-checkout", str(repo.path), str(clone))
    git(clone, "checkout", "-q", "-b", "applied", base)
    git(clone, "am", "-q", "-k", "--keep-cr", "--no-scissors", str(mbox))
    return clone


def _files(where: Path, env: dict[str, str] | None = None) -> dict[bytes, tuple[str, bytes]]:
    """Every path of the index (`env` may name another): its mode as git stores it, and
    the worktree's content (a link's target for a symlink)."""
    out: dict[bytes, tuple[str, bytes]] = {}
    listing = subprocess.run(
        ["git", "ls-files", "-s", "-z"], cwd=where, capture_output=True, check=True, env=env
    ).stdout
    for rec in listing.split(b"\0"):
        if not rec:
            continue
        meta, _, name = rec.partition(b"\t")
        full = os.path.join(os.fsencode(where), name)
        data = os.readlink(full) if os.path.islink(full) else Path(os.fsdecode(full)).read_bytes()
        out[name] = (meta.split()[0].decode(), data)
    return out


@pytest.fixture
def busy_lane(repo: Repo, tmp_path: Path) -> tuple[Repo, Path]:
    """A lane with commits (binary, +x, symlink, rename, delete) and uncommitted work of
    every kind: modified, staged, deleted, untracked (odd names, binary), ignored."""
    hub = repo.path
    (hub / "keep.txt").write_text("keep\n")
    (hub / "gone.txt").write_text("to be deleted\n")
    (hub / "moved.txt").write_text("a file long enough to be seen as renamed\n" * 5)
    (hub / "old.bin").write_bytes(bytes(range(256)) * 8)
    (hub / ".gitignore").write_text("*.log\nbuild/\n")
    git(hub, "add", "-A")
    git(hub, "commit", "-q", "-m", "base files")
    lane_path = repo.create("alpha")
    # committed work
    _write(lane_path / "tool.sh", b"#!/bin/sh\necho hi\n")
    (lane_path / "tool.sh").chmod(0o755)
    os.symlink("keep.txt", lane_path / "link")
    _write(lane_path / "blob.bin", os.urandom(4096) + b"\0\xff")
    git(lane_path, "add", "-A")
    git(lane_path, "commit", "-q", "-m", "[wip] tools, a link and a blob")
    git(lane_path, "mv", "moved.txt", "renamed.txt")
    git(lane_path, "rm", "-q", "gone.txt")
    _write(lane_path / "crlf.txt", b"one\r\ntwo\r\n")
    git(lane_path, "add", "-A")
    git(lane_path, "commit", "-q", "-m", "rename, delete, crlf")
    git(lane_path, "commit", "-q", "--allow-empty", "-m", "an empty commit")
    # uncommitted work
    (lane_path / "keep.txt").write_text("keep, edited\n")
    (lane_path / "tool.sh").chmod(0o644)  # a mode change only
    _write(lane_path / "old.bin", os.urandom(2048))
    (lane_path / "staged.txt").write_text("staged and then changed again\n")
    git(lane_path, "add", "staged.txt")
    (lane_path / "staged.txt").write_text("the worktree's version wins\n")
    os.unlink(lane_path / "crlf.txt")
    for n in ODD_NAMES:
        _write(os.path.join(os.fsencode(lane_path), n), b"odd name: " + n + b"\n")
    (lane_path / "dir" / "deep").mkdir(parents=True)
    _write(lane_path / "dir" / "deep" / "x.bin", b"\0\1\2" * 1000)
    os.symlink("dir/deep/x.bin", lane_path / "new-link")
    (lane_path / "debug.log").write_text("ignored\n")
    (lane_path / "build").mkdir()
    (lane_path / "build" / "out.o").write_bytes(b"ignored")
    return repo, lane_path


def test_export_applies_with_git_am_and_reproduces_the_lane_exactly(
    busy_lane: tuple[Repo, Path], tmp_path: Path
) -> None:
    repo, lane_path = busy_lane
    before = _snapshot(lane_path)
    mbox = tmp_path / "alpha.mbox"
    r = repo.jlane("export", "alpha", "-o", str(mbox))
    assert r.rc == 0, r.stderr
    res = r.json
    assert res["code"] == "exported" and res["uncommitted"] is True
    # read-only: index bytes, mtime, status and the object store are exactly as before
    assert _snapshot(lane_path) == before
    assert res["tree"] == _worktree_tree(lane_path, tmp_path)
    base = git(lane_path, "merge-base", "HEAD", "main").stdout.strip()
    assert res["base"] == base and res["head"] == git(lane_path, "rev-parse", "HEAD").stdout.strip()
    assert [c["subject"] for c in res["commits"]] == [
        "[wip] tools, a link and a blob",
        "rename, delete, crlf",
        "an empty commit",
    ]
    assert [c["empty"] for c in res["commits"]] == [False, False, True]
    assert res["patch_bytes"] == mbox.stat().st_size > 0

    clone = _apply(repo, tmp_path, base, mbox)
    assert git(clone, "rev-parse", "HEAD^{tree}").stdout.strip() == res["tree"]
    subjects = git(clone, "log", "--format=%s", f"{base}..HEAD").stdout.splitlines()
    assert subjects == [
        "Uncommitted changes of lane alpha",
        "rename, delete, crlf",
        "[wip] tools, a link and a blob",  # the subject kept whole (am -k)
    ]
    # byte for byte, with modes and symlinks: the clone's checkout is the lane's worktree
    got = _files(clone)
    want = {
        n: v
        for n, v in _files_of_worktree(lane_path, tmp_path).items()
        if not n.endswith(b".log") and not n.startswith(b"build/")
    }
    assert got == want
    assert got[b"tool.sh"][0] == "100644" and got[b"link"][0] == "120000"
    for n in ODD_NAMES:
        assert n in got
    assert b"crlf.txt" not in got and b"gone.txt" not in got and b"moved.txt" not in got
    assert b"debug.log" not in got and b"build/out.o" not in got

    by_path = {f["path"]: f for f in res["files"]}
    assert by_path["renamed.txt"]["status"] == "R"
    assert by_path["renamed.txt"]["old_path"] == "moved.txt"
    assert by_path["gone.txt"]["status"] == "D" and by_path["gone.txt"]["bytes"] == 0
    assert by_path["blob.bin"]["binary"] is True
    assert by_path["blob.bin"]["bytes"] == 4098
    assert by_path['"caf\\351-latin1.txt"']["quoted"] is True
    assert by_path["ünï.txt"]["quoted"] is False
    assert by_path["new\nline.txt"]["status"] == "A"


def _files_of_worktree(where: Path, tmp: Path) -> dict[bytes, tuple[str, bytes]]:
    """The lane's worktree as `add -A` sees it: paths from a throwaway index, content read
    from the worktree itself."""
    env = dict(os.environ, GIT_INDEX_FILE=str(tmp / "expect2.index"))
    subprocess.run(["git", "read-tree", "HEAD"], cwd=where, env=env, check=True)
    subprocess.run(["git", "add", "-A"], cwd=where, env=env, check=True)
    return _files(where, env)


def test_json_envelope_carries_the_same_patch(busy_lane: tuple[Repo, Path], tmp_path: Path) -> None:
    repo, lane_path = busy_lane
    r = repo.lane("export", "alpha", "--format", "json", cwd=lane_path)  # KEY from the cwd
    assert r.rc == 0, r.stderr
    env = json.loads(r.stdout)
    for k in ("lane", "base", "head", "tree", "commits", "files", "patch_bytes", "patch"):
        assert k in env, k
    assert env["ok"] is True and env["format"] == "json"
    # a file of the lane holds the bytes of a latin-1 name: the patch is no UTF-8
    assert env["patch_encoding"] == "base64"
    patch = base64.b64decode(env["patch"])
    assert len(patch) == env["patch_bytes"]
    mbox = tmp_path / "from-json.mbox"
    mbox.write_bytes(patch)
    clone = _apply(repo, tmp_path, env["base"], mbox)
    assert git(clone, "rev-parse", "HEAD^{tree}").stdout.strip() == env["tree"]
    # --json alone means the JSON envelope on stdout too
    r2 = repo.jlane("export", "alpha")
    assert r2.rc == 0 and r2.json["patch"] == env["patch"]
    # the patch format's stdout is the patch alone, the same bytes
    raw = subprocess.run(
        [sys.executable, "-m", "guard", "export", "alpha"], cwd=repo.path, capture_output=True
    )
    assert raw.returncode == 0 and raw.stdout == patch


def test_a_patch_that_is_not_utf8_goes_in_base64(repo: Repo, tmp_path: Path) -> None:
    lane_path = repo.create("alpha")
    _write(lane_path / "latin1.txt", "café, naïve\n".encode("latin-1"))  # text, not UTF-8
    r = repo.jlane("export", "alpha", "--format", "json")
    assert r.rc == 0, r.stderr
    env = r.json
    assert env["patch_encoding"] == "base64"
    patch = base64.b64decode(env["patch"])
    assert len(patch) == env["patch_bytes"] and b"caf\xe9" in patch
    mbox = tmp_path / "l1.mbox"
    mbox.write_bytes(patch)
    clone = _apply(repo, tmp_path, env["base"], mbox)
    assert (clone / "latin1.txt").read_bytes() == (lane_path / "latin1.txt").read_bytes()


def test_nothing_to_export_is_success_with_an_empty_patch(repo: Repo, tmp_path: Path) -> None:
    repo.create("alpha")
    out = tmp_path / "empty.mbox"
    r = repo.jlane("export", "alpha", "-o", str(out))
    assert r.rc == 0 and r.code == "nothing_to_export"
    assert out.read_bytes() == b"" and r.json["files"] == [] and r.json["commits"] == []


def test_a_stale_lane_exports_onto_its_merge_base(repo: Repo, tmp_path: Path) -> None:
    lane_path = repo.create("alpha")
    repo.commit(lane_path, "a.txt", "lane work\n")
    base = repo.sha()
    git(repo.path, "config", "core.hooksPath", "/dev/null")  # main moves without a land
    repo.commit(repo.path, "main.txt", "main moved on\n")
    r = repo.jlane("export", "alpha", "-o", str(tmp_path / "s.mbox"))
    assert r.rc == 0, r.stderr
    assert r.json["base"] == base and r.json["main"] == repo.sha() != base
    clone = _apply(repo, tmp_path, r.json["base"], tmp_path / "s.mbox")
    assert (clone / "a.txt").read_text() == "lane work\n"


def test_merge_commits_are_refused_not_dropped(repo: Repo, tmp_path: Path) -> None:
    lane_path = repo.create("alpha")
    git(lane_path, "switch", "-q", "-c", "side")
    repo.commit(lane_path, "side.txt", "side\n")
    git(lane_path, "switch", "-q", "lane/alpha")
    repo.commit(lane_path, "a.txt", "a\n")
    git(lane_path, "merge", "-q", "--no-edit", "side")
    out = tmp_path / "m.mbox"
    r = repo.jlane("export", "alpha", "-o", str(out))
    assert r.rc == 1 and r.code == "export_unrepresentable"
    assert not out.exists()
    assert " git -C " in f" {r.json['next'][0]}" and " rebase " in r.json["next"][0]


def test_export_refuses_mid_sync_and_on_another_branch(repo: Repo) -> None:
    lane_path = repo.create("alpha")
    git(lane_path, "switch", "-q", "-c", "elsewhere")
    r = repo.jlane("export", "alpha")
    assert r.rc == 1 and r.code == "lane_branch_mismatch"
    git(lane_path, "switch", "-q", "lane/alpha")
    repo.commit(lane_path, "f.txt", "lane\n")
    repo.config("gate", "off")
    other = repo.create("beta")
    repo.commit(other, "f.txt", "beta\n")
    assert repo.jlane("land", "beta").rc == 0
    assert repo.jlane("sync", "alpha").code == "sync_conflicts"
    r = repo.jlane("export", "alpha")
    assert r.rc == 1 and r.code == "rebase_in_progress"


def test_a_worker_exports_its_own_lane_only_and_writes_only_inside_it(
    repo: Repo, tmp_path: Path
) -> None:
    a = repo.create("alpha")
    repo.create("beta")
    (a / "w.txt").write_text("work\n")
    env = {"GITLANE_LANE": "alpha"}
    r = repo.jlane("export", "beta", "-o", str(a / "x.mbox"), env=env, cwd=a)
    assert r.rc == 1 and r.code == "role_forbidden"
    out = tmp_path / "outside.mbox"
    r = repo.jlane("export", "-o", str(out), env=env, cwd=a)
    assert r.rc == 1 and r.code == "path_outside_lane" and not out.exists()
    r = repo.jlane("export", "-o", str(a / ".git"), env=env, cwd=a)
    assert r.rc == 1 and r.code == "protected_path"
    r = repo.jlane("export", "-o", "alpha.mbox", env=env, cwd=a)
    assert r.rc == 0, r.stderr
    assert b"w.txt" in (a / "alpha.mbox").read_bytes()
    r = repo.lane("export", env=env, cwd=a)  # stdout is the worker's own
    assert r.rc == 0 and "Uncommitted changes of lane alpha" in r.stdout


def test_output_is_atomic_and_keeps_an_existing_files_mode(repo: Repo, tmp_path: Path) -> None:
    lane_path = repo.create("alpha")
    (lane_path / "a.txt").write_text("a\n")
    out = tmp_path / "keep-mode.mbox"
    out.write_text("old\n")
    out.chmod(0o600)
    r = repo.jlane("export", "alpha", "-o", str(out))
    assert r.rc == 0 and r.json["output"] == str(out)
    assert (out.stat().st_mode & 0o777) == 0o600 and b"a.txt" in out.read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".git-lane-export")] == []
    r = repo.jlane("export", "alpha", "-o", str(tmp_path))
    assert r.rc == 1 and r.code == "not_a_file"
    r = repo.jlane("export", "alpha", "-o", str(tmp_path / "new" / "dir" / "x.mbox"))
    assert r.rc == 0 and (tmp_path / "new" / "dir" / "x.mbox").stat().st_size > 0


# VmHWM, not ru_maxrss: the latter keeps, across exec, the RSS the forking pytest had
MEASURE = """
import atexit, sys
where = sys.argv[1]
def report():
    with open("/proc/self/status") as st, open(where, "w") as f:
        f.write(next(ln.split()[1] for ln in st if ln.startswith("VmHWM:")))
atexit.register(report)
sys.argv = ["git-lane", *sys.argv[2:]]
from guard.cli import main
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["patch", "json"])
def test_a_large_export_streams(repo: Repo, tmp_path: Path, fmt: str) -> None:
    """A 50 MB binary untracked file: the patch (about 64 MB of base85) goes out without
    git-lane's own process ever holding it: its peak RSS stays far below the patch size."""
    lane_path = repo.create("alpha")
    big = os.urandom(50 * 1024 * 1024)
    _write(lane_path / "big.bin", big)
    digest, size = hashlib.sha256(big).digest(), len(big)
    del big
    out = tmp_path / f"big.{fmt}"
    rss = tmp_path / "rss"
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURE,
            str(rss),
            "export",
            "alpha",
            "--format",
            fmt,
            "-o",
            str(out),
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    peak_mb = int(rss.read_text()) / 1024
    size_mb = out.stat().st_size / 1e6
    assert size_mb > 60, size_mb
    assert peak_mb < 45, f"peak RSS {peak_mb:.0f} MB for a {size_mb:.0f} MB export"
    if fmt == "json":
        env = json.loads(out.read_bytes())
        out.write_bytes(env["patch"].encode())
        assert env["files"][0]["bytes"] == size
    clone = _apply(repo, tmp_path, repo.sha() or "", out)
    assert hashlib.sha256((clone / "big.bin").read_bytes()).digest() == digest


def test_json_and_a_patch_on_stdout_is_a_usage_error(repo: Repo) -> None:
    repo.create("alpha")
    r = repo.jlane("export", "alpha", "--format", "patch")
    assert r.rc == 2 and r.code == "usage_error"


def test_a_reader_that_leaves_early_gets_no_traceback(repo: Repo) -> None:
    lane_path = repo.create("alpha")
    _write(lane_path / "big.bin", os.urandom(4 * 1024 * 1024))
    res = subprocess.run(
        f"{sys.executable} -m guard export alpha | head -c 100 >/dev/null; "
        'echo "${PIPESTATUS[0]}"',
        shell=True,
        executable="/bin/bash",
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert res.stdout.strip() in ("0", "141"), res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr


def test_a_repository_path_with_a_colon_and_a_quote(tmp_path: Path) -> None:
    """The repository's object store is handed to git as an alternate, in a
    colon-separated variable: such a path must reach git whole (C-quoted)."""
    path = tmp_path / 'odd:repo "x"'
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-q", "-m", "init")
    odd = Repo(path)
    lane_path = odd.create("alpha")
    (lane_path / "b.txt").write_text("b\n")
    out = tmp_path / "odd.mbox"
    r = odd.jlane("export", "alpha", "-o", str(out))
    assert r.rc == 0, r.stderr
    clone = _apply(odd, tmp_path, r.json["base"], out)
    assert (clone / "b.txt").read_text() == "b\n"


def test_an_index_the_lane_grew_with_a_hole_is_never_written_out(
    repo: Repo, tmp_path: Path
) -> None:
    """Red team 15A F5, at export: the lane's index grown to 256 MiB of one hole
    (GROW_INDEX, what a sandboxed lane can do) was copied into a temp dir with
    shutil.copy2 (every hole written out: a tmpfs is RAM); under a 64 MiB file-size
    limit, exit 3. The copy keeps holes as holes; one that still cannot be made refuses
    index_copy_failed with nothing written, and its next works as written."""
    a = repo.create("alpha")
    (a / "new.txt").write_text("new\n")
    grow_index(a, 256 << 20)
    mbox = tmp_path / "out.mbox"
    r = lane_capped(repo.path, "export", "alpha", "-o", str(mbox), "--json", fsize=64 << 20)
    assert r.returncode == 1, (r.returncode, r.stdout[-400:])
    out = json.loads(r.stdout)
    assert out["code"] == "index_copy_failed", out
    assert not mbox.exists()
    for step in out["next"][:-1]:
        subprocess.run(step, shell=True, cwd=repo.path, check=True)
    assert out["next"][-1] == "git lane export alpha"
    again = lane_capped(repo.path, "export", "alpha", fsize=64 << 20)
    assert again.returncode == 0, again.stderr[-400:]
    assert "new.txt" in again.stdout


def test_a_file_git_cannot_stage_is_refused_not_left_out(repo: Repo, tmp_path: Path) -> None:
    a = repo.create("alpha")
    (a / ".gitattributes").write_text("*.dat filter=broken\n")
    git(a, "config", "filter.broken.clean", "false")
    git(a, "config", "filter.broken.required", "true")
    (a / "x.dat").write_text("data\n")
    out = tmp_path / "x.mbox"
    r = repo.jlane("export", "alpha", "-o", str(out))
    assert r.rc == 1 and r.code == "export_unrepresentable", r.stdout + r.stderr
    assert not out.exists()
