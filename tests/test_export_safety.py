"""Issue 12 red-team findings on export and conflicts, as tests that hold once fixed: a
commit message `git am` would cut still exports (applies, tree exact, whole message, a
warning); `-o` the operating system refuses is a refusal; JSON output is strict UTF-8;
`conflicts --include-dirty` writes nothing into the repository's object store."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git


def lane_with_message(repo: Repo, body: str) -> tuple[Path, str]:
    p = repo.create("m")
    (p / "x.txt").write_text("x\n")
    git(p, "add", "x.txt")
    git(p, "commit", "-q", "-m", "subject", "-m", body)
    (p / "y.txt").write_text("y\n")
    git(p, "add", "y.txt")
    git(p, "commit", "-q", "-m", "after it")
    return p, git(repo.path, "rev-parse", "main").stdout.strip()


def am_into_clone(repo: Repo, tmp_path: Path, base: str) -> tuple[Path, int, dict[str, Any]]:
    mbox = tmp_path / "m.mbox"
    r = repo.jlane("export", "m", "-o", str(mbox))
    assert r.rc == 0, r.stderr
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo.path), str(clone))
    git(clone, "switch", "-q", "-c", "review", base)
    res = git(clone, "am", "-q", "-k", "--keep-cr", "--no-scissors", str(mbox), check=False)
    return clone, res.returncode, r.json


BODIES = {
    "diff-line": ("see:\ndiff --git a/zz b/zz\nthat was it", ["diff --git a/zz b/zz"]),
    "index-line": ("see:\nIndex: zz\nthat was it", ["Index: zz"]),
    "dashes-line": ("first part\n---\nsecond part", ["---"]),
    "dashes-name": ("first part\n--- a/zz\nsecond part", ["--- a/zz"]),
    "from-line": (
        "From me Mon Sep 17 00:00:00 2001\nsecond part",
        ["From me Mon Sep 17 00:00:00 2001"],
    ),
    "inbody-header": ("From: Someone <s@x>\nsecond part", ["From: Someone <s@x>"]),
}


@pytest.mark.parametrize("body,cut", BODIES.values(), ids=BODIES.keys())
def test_a_message_git_am_would_cut_exports_whole_and_applies(
    repo: Repo, tmp_path: Path, body: str, cut: list[str]
) -> None:
    """git am ends a message at a `---` or `diff -` line (or fails on it as a bad patch),
    splits the mbox at a `From ` line, takes a first `From:` line as a header; no quoting
    keeps such a line, so the export indents it by one space and warns, naming the commit:
    the series applies, the tree is the lane's, the rest of the message and the author
    are kept."""
    lane, base = lane_with_message(repo, body)
    clone, rc, res = am_into_clone(repo, tmp_path, base)
    assert rc == 0
    assert (
        git(clone, "rev-parse", "HEAD^{tree}").stdout
        == git(lane, "rev-parse", "HEAD^{tree}").stdout
    )
    msgs = git(clone, "log", "--reverse", "--format=%B%x00", f"{base}..HEAD").stdout.split("\0")
    want = "subject\n\n" + body
    for line in cut:
        want = want.replace(line, " " + line)
    assert msgs[0].strip("\n") == want
    assert msgs[1].strip("\n") == "after it"
    authors = git(clone, "log", "--format=%an <%ae> %ad", f"{base}..HEAD").stdout
    assert authors == git(lane, "log", "--format=%an <%ae> %ad", f"{base}..HEAD").stdout
    first = git(lane, "rev-parse", "HEAD~1").stdout.strip()
    assert len(res["warnings"]) == 1 and first[:12] in res["warnings"][0]
    assert next(c["sha"] for c in res["commits"]) == first  # the lane's own commits, untouched
    assert (
        git(lane, "log", "-1", "--format=%B", "HEAD~1").stdout.strip("\n") == "subject\n\n" + body
    )


def test_an_ordinary_message_is_exported_exactly_and_without_warning(
    repo: Repo, tmp_path: Path
) -> None:
    body = "  indented\n-- not a break\n----\nFrom a friend\ndiff-ish words\ttab  "
    lane, base = lane_with_message(repo, body)
    clone, rc, res = am_into_clone(repo, tmp_path, base)
    assert rc == 0
    assert res["warnings"] == []
    got = git(clone, "log", "--reverse", "--format=%B%x00", f"{base}..HEAD").stdout.split("\0")
    assert got[0] == git(lane, "log", "-1", "--format=%B%x00", "HEAD~1").stdout.split("\0")[0]


@pytest.mark.parametrize(
    "target", ["README.md/x.mbox", "n" * 300 + ".mbox"], ids=["under-a-file", "name-too-long"]
)
def test_export_to_an_unwritable_path_is_a_refusal_whose_next_writes(
    repo: Repo, target: str, tmp_path: Path
) -> None:
    p = repo.create("a")
    repo.commit(p, "a.txt", "a\n")
    r = repo.jlane("export", "a", "-o", target)
    assert r.rc == 1, (r.rc, r.stderr)
    assert r.code == "write_failed"
    assert r.json["details"]["errno"]
    assert not [n for n in os.listdir(repo.path) if n.startswith(".git-lane-export-")]
    (nxt,) = r.json["next"]
    argv = shlex.split(nxt)
    assert argv[:3] == ["git", "lane", "export"]
    again = repo.lane(*argv[2:])
    assert again.rc == 0, again.stderr
    assert Path(argv[-1]).is_file() and b"a.txt" in Path(argv[-1]).read_bytes()


def test_json_to_a_file_says_what_the_file_is(repo: Repo, tmp_path: Path) -> None:
    p = repo.create("a")
    repo.commit(p, "a.txt", "a\n")
    out = tmp_path / "x.json"
    r = repo.lane("export", "a", "--format", "json", "-o", str(out))
    assert r.rc == 0, r.stderr
    assert "< " not in r.stdout and "JSON" in r.stdout
    assert json.loads(out.read_bytes())["patch"]
    r = repo.lane("export", "a", "-o", str(tmp_path / "x.mbox"))
    assert "git am -k --keep-cr --no-scissors < " in r.stdout


def test_a_directory_as_output_reads_right(repo: Repo, tmp_path: Path) -> None:
    p = repo.create("a")
    repo.commit(p, "a.txt", "a\n")
    r = repo.jlane("export", "a", "-o", str(tmp_path))
    assert r.rc == 1 and r.code == "not_a_file"
    assert "that is a directory" in r.json["message"]
    assert "a other" not in r.json["message"]


# -- conflicts ----------------------------------------------------------------------------
def strict(stdout: bytes) -> Any:
    """JSON as a strict parser reads it: UTF-8, and no lone surrogate in any string."""
    obj = json.loads(stdout.decode("utf-8"))

    def walk(x: Any) -> None:
        if isinstance(x, str):
            x.encode("utf-8")  # a lone surrogate ("\udce9") raises here
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(k)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(obj)
    return obj


def run_bytes(repo: Repo, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args], cwd=repo.path, capture_output=True
    )


def test_conflicts_json_gives_a_non_utf8_path_as_git_quotes_it(repo: Repo) -> None:
    name = b"l\xe9.txt"
    with open(os.path.join(bytes(repo.path), name), "wb") as f:
        f.write(b"base\n")
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-q", "-m", "latin-1 name")
    for key in ("a", "b"):
        p = repo.create(key)
        with open(os.path.join(bytes(p), name), "wb") as f:
            f.write(key.encode() + b"\n")
        git(p, "commit", "-q", "-am", key)
    res = run_bytes(repo, "conflicts", "--json")
    assert res.returncode == 0, res.stderr
    got = strict(res.stdout)
    (pair,) = [p for p in got["pairs"] if p["conflict"]]
    assert pair["paths"] == ['"l\\351.txt"']  # git's core.quotePath form
    res = run_bytes(repo, "conflicts", "--include-dirty", "--json")
    assert strict(res.stdout)["pairs"][0]["paths"] == ['"l\\351.txt"']


def test_export_json_is_strict_utf8_with_a_non_utf8_output_name(repo: Repo) -> None:
    p = repo.create("a")
    repo.commit(p, "a.txt", "a\n")
    out = os.path.join(bytes(p.parent), b"l\xe9.mbox")
    res = subprocess.run(
        [sys.executable.encode(), b"-m", b"guard", b"export", b"a", b"--json", b"-o", out],
        cwd=repo.path,
        capture_output=True,
    )
    assert res.returncode == 0, res.stderr
    assert strict(res.stdout)["output"].endswith('l\\351.mbox"')
    assert os.path.isfile(out)


def objects(repo: Repo) -> tuple[str, list[str]]:
    out = git(repo.path, "count-objects", "-v").stdout
    loose = sorted(
        str(f.relative_to(repo.common_dir / "objects"))
        for f in (repo.common_dir / "objects").rglob("*")
        if f.is_file()
    )
    return out, loose


def test_include_dirty_writes_nothing_into_the_object_store(repo: Repo) -> None:
    """The untracked files of a lane may be secrets: predicting with them must not leave
    their blobs (or the merged trees) in the shared object store."""
    repo.commit(repo.path, "f.txt", "base\n")
    for key in ("a", "b"):
        p = repo.create(key)
        (p / "f.txt").write_text(f"{key} dirty edit\n")
        (p / "secret.env").write_text(f"TOKEN={key}-do-not-store\n")
    before = objects(repo)
    r = repo.jlane("conflicts", "--include-dirty")
    assert r.rc == 0, r.stderr
    pair = next(x for x in r.json["pairs"] if x["lanes"] == ["a", "b"])
    assert pair["conflict"] and pair["paths"] == ["f.txt", "secret.env"]  # dirty work seen
    assert objects(repo) == before
