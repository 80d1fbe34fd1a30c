"""Hostile names and bytes, all through the real CLI, the installed hooks and the shims
(`git lane exec KEY -- ...`): lane keys of every shape, and file names with spaces,
newlines, tabs, quotes, backslashes, leading dashes, glob and pathspec-magic characters,
bytes that are not UTF-8, 255-byte components and deep paths, carried through a commit,
status, conflicts (with and without uncommitted work), the hub-overlap check, export
(`git am` in a fresh clone), land, sync, release, and the write/edit shims. Every outcome
is a result (exit 0) or a refusal with a registered code (exit 1); JSON is strict UTF-8;
no traceback; no path outside the lane or the worktrees root is ever written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard import git as ggit
from guard.errors import CODES

# -- running the real CLI with bytes, and judging its outcome ------------------------------


class Out:
    def __init__(self, argv: list[str], res: subprocess.CompletedProcess[bytes]) -> None:
        self.argv = argv
        self.rc = res.returncode
        self.out = res.stdout
        self.err = res.stderr

    @property
    def json(self) -> dict[str, Any]:
        return strict_json(self.out)

    @property
    def code(self) -> str:
        return str(self.json["code"])

    def __repr__(self) -> str:
        return f"{self.argv!r} -> {self.rc}\n{self.out[-2000:]!r}\n{self.err[-2000:]!r}"


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _strings(v)
    elif isinstance(obj, list):
        yield from (s for v in obj for s in _strings(v))


def strict_json(raw: bytes) -> dict[str, Any]:
    """One JSON object as a strict decoder reads it: UTF-8 bytes, no NaN, no duplicate
    keys, and no string that is not Unicode text (a lone surrogate `\\udcff` escape, which
    Python's own decoder lets through, is rejected by serde_json, Go and others)."""

    def pairs(kv: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in kv]
        assert len(keys) == len(set(keys)), keys
        return dict(kv)

    def no_constant(c: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {c}")

    text = raw.decode("utf-8", "strict")
    assert text.count("\n") == 1 and text.endswith("\n"), text[:500]
    obj = json.loads(text, object_pairs_hook=pairs, parse_constant=no_constant)
    assert isinstance(obj, dict), obj
    for s in _strings(obj):
        s.encode("utf-8", "strict")  # raises on a lone surrogate
    return obj


def run_lane(*args: str, cwd: Path, env: dict[str, str] | None = None, data: bytes = b"") -> Out:
    """`git lane ARGS` as a real process; ARGS may hold surrogate-escaped bytes."""
    full = {**os.environ, **(env or {})}
    argv = [sys.executable, "-m", "guard", *args]
    res = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, input=data, timeout=120)
    return Out(list(args), res)


def judged(r: Out, *, as_json: bool = True) -> Out:
    """A result or a registered refusal, never a bug: exit 0 or 1, no traceback, and
    (with --json) one strict JSON object whose code is registered when it refused."""
    assert r.rc in (0, 1), r
    assert b"Traceback" not in r.err and b"Traceback" not in r.out, r
    assert b"internal error" not in r.err, r
    if as_json:
        j = r.json
        assert j["ok"] is (r.rc == 0), r
        if r.rc == 1:
            assert j["code"] in CODES, r
    elif r.rc == 1:
        assert b"git-lane: refused [" in r.err, r
        code = r.err.split(b"git-lane: refused [", 1)[1].split(b"]", 1)[0].decode()
        assert code in CODES, r
    return r


def jl(*args: str, cwd: Path, env: dict[str, str] | None = None, data: bytes = b"") -> Out:
    return judged(run_lane("--json", *args, cwd=cwd, env=env, data=data))


def worktrees_root() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "git-lane" / "worktrees"


def under(path: str | Path, root: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real.startswith(top.rstrip(os.sep) + os.sep)


def lane_branches(repo: Repo) -> set[str]:
    out = git(repo.path, "for-each-ref", "--format=%(refname)", "refs/heads/lane/").stdout
    return set(out.split())


def bname(p: bytes | str) -> bytes:
    return p if isinstance(p, bytes) else os.fsencode(p)


def s(b: bytes) -> str:
    """A file name as argv and the engine carry it (surrogate-escaped when not UTF-8)."""
    return os.fsdecode(b)


def as_json_path(name: bytes) -> str:
    """How --json gives a path: as it is when it is UTF-8; else as git quotes it (octal
    escapes in double quotes). Computed here apart from guard, for the names below."""
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        return '"' + "".join(chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}" for b in name) + '"'


def installed(repo: Repo) -> Repo:
    r = jl("install", cwd=repo.path)
    assert r.rc == 0
    repo.config("gate", "off")
    return repo


@pytest.fixture
def hrepo(repo: Repo) -> Repo:
    return installed(repo)


# -- 1. lane keys of every shape -----------------------------------------------------------

HAND_KEYS = [
    "",
    ".",
    "..",
    "-x",
    "--help",
    "-h",
    "--json",
    "a/b",
    "a b",
    "a\nb",
    "a\tb",
    "é",
    "a" * 300,
    "a" * 63,
    "a" * 64,
    "HEAD",
    "head",
    "main",
    "master",
    "refs/heads/x",
    "a..b",
    "a.lock",
    "@{u}",
    "@",
    "~",
    "x:y",
    " a",
    "a ",
    "-",
    "a-",
    "1",
    "a-b",
    "../../x",
    "/tmp/x",
    "$(touch pwned)",
    "*",
    "a\\b",
    os.fsdecode(b"\xff\xfe"),
    os.fsdecode(b"caf\xe9"),
    "\u2028",
]


def _one_key(repo: Repo, key: str, created: list[str]) -> None:
    """`git lane create --json -- KEY`: created, with a branch and a worktree whose names
    are safe and whose path lies under the worktrees root, then status/land/release work
    on it; or refused with a registered code, leaving no branch and no directory."""
    before_dirs = sorted(worktrees_root().rglob("*")) if worktrees_root().exists() else []
    before_branches = lane_branches(repo)
    r = jl("create", "--", key, cwd=repo.path)
    if r.rc == 1:
        assert r.code in ("invalid_lane_key", "lane_exists"), r
        now = sorted(worktrees_root().rglob("*")) if worktrees_root().exists() else []
        assert now == before_dirs and lane_branches(repo) == before_branches, r
        # and every other command naming it (one each, in turn: a CLI start is the cost)
        cmd = ("status", "land", "release", "path", "sync", "export")[len(key) % 6]
        other = judged(run_lane("--json", cmd, "--", key, cwd=repo.path))
        assert other.rc == 1 and other.code in ("invalid_lane_key", "unknown_lane"), other
        return
    created.append(key)
    ln = r.json["lane"]
    assert ln["key"] == key and ln["branch"] == f"lane/{key}"
    assert under(ln["path"], worktrees_root()) and os.path.basename(ln["path"]) == key
    assert git(repo.path, "check-ref-format", f"refs/heads/lane/{key}", check=False).returncode == 0
    path = Path(ln["path"])
    (path / "k.txt").write_text(key + "\n")
    git(path, "add", "k.txt")
    git(path, "commit", "-q", "-m", f"key {key}")
    st_ = jl("status", "--", key, cwd=repo.path)
    assert [x["key"] for x in st_.json["lanes"]] == [key] and st_.json["lanes"][0]["ahead"] == 1
    landed = jl("land", "--", key, cwd=repo.path)
    assert landed.code == "landed", landed
    assert git(repo.path, "show", "main:k.txt").stdout == key + "\n"
    gone = jl("release", "--", key, cwd=repo.path)
    assert gone.code == "released", gone
    assert not path.exists()


def test_hand_picked_keys(hrepo: Repo) -> None:
    created: list[str] = []
    for key in HAND_KEYS:
        _one_key(hrepo, key, created)
    # the ones the key pattern admits, and only those
    assert created == [
        k for k in HAND_KEYS if k in ("head", "main", "master", "1", "a-b", "a" * 63)
    ]
    assert git(hrepo.path, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "main"
    assert not (hrepo.path / "pwned").exists()


def test_a_key_from_the_environment_of_any_shape(hrepo: Repo) -> None:
    """GITLANE_LANE names the lane of a bound process: a hostile value is refused like a
    hostile argument (it is a worker's, so `role_forbidden` is fine too)."""
    cmds = (["status"], ["land"], ["path"], ["export"], ["check", "write", "README.md"])
    keys = ["../x", "a\nb", os.fsdecode(b"\xff"), "A", "a/b", "-rf", "main;rm"]
    for i, key in enumerate(keys):
        for cmd in (cmds[i % len(cmds)], cmds[(i + 2) % len(cmds)]):  # each command, in turn
            r = jl(*cmd, cwd=hrepo.path, env={"GITLANE_LANE": key})
            assert r.rc == 1 and r.code in ("invalid_lane_key", "unknown_lane"), r


KEYS = st.one_of(
    st.text(max_size=80),
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.from_regex(r"\A[a-z0-9][a-z0-9-]{0,8}[a-z0-9]\Z"),
).filter(lambda k: "\0" not in k)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=KEYS)
def test_any_key(hrepo: Repo, key: str) -> None:
    created: list[str] = []
    _one_key(hrepo, key, created)


# -- 2. file names in lanes ----------------------------------------------------------------

DEEP = b"/".join([b"d%d" % i for i in range(40)]) + b"/deep.txt"
NAMES: list[bytes] = [
    b"with space.txt",
    b"new\nline.txt",
    b"tab\there.txt",
    b"quote\"d'.txt",
    b"back\\slash.txt",
    b"-rf",
    b"--output=x",
    b"--exec=rm",
    b"*?[",
    b":(glob)*",
    b"caf\xe9.txt",  # latin-1, not UTF-8
    b"\xff\xfe",
    b"x" * 255,
    DEEP,
    b" lead",
    b"trail ",
]


def put(where: Path, name: bytes, data: bytes) -> None:
    p = os.path.join(os.fsencode(where), name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)


def read(where: Path, name: bytes) -> bytes:
    with open(os.path.join(os.fsencode(where), name), "rb") as f:
        return f.read()


def sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", cmd], cwd=cwd, capture_output=True, timeout=120)


def tree_names(where: Path, rev: str) -> set[bytes]:
    out = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--name-only", rev], cwd=where, capture_output=True
    ).stdout
    return {n for n in out.split(b"\0") if n}


def test_odd_file_names_through_a_lanes_whole_life(
    hrepo: Repo, tmp_path: Path, gitlane_on_path: Path
) -> None:
    repo = hrepo
    alpha = Path(jl("create", "alpha", cwd=repo.path).json["lane"]["path"])
    beta = Path(jl("create", "beta", cwd=repo.path).json["lane"]["path"])
    for n in NAMES:
        put(alpha, n, b"one\nalpha\nthree\n")
        put(beta, n, b"one\nbeta\nthree\n")
    # a commit through the installed hooks (plain git, as anyone would)
    git(alpha, "add", "-A")
    git(alpha, "commit", "-q", "-m", "odd names")
    want = {as_json_path(n) for n in NAMES}

    st_ = jl("status", "--all", cwd=repo.path).json
    by = {x["key"]: x for x in st_["lanes"]}
    assert by["alpha"]["ahead"] == 1 and not by["alpha"]["dirty"]
    assert (
        by["beta"]["dirty"]
        and set(jl("status", "beta", cwd=repo.path).json["lanes"][0]["dirty_paths"]) == want
    )

    # conflicts: beta's work is uncommitted, so only --include-dirty sees the pair meet
    pairs = {tuple(p["lanes"]): p for p in jl("conflicts", cwd=repo.path).json["pairs"]}
    assert pairs[("alpha", "beta")]["conflict"] is False
    dirty = jl("conflicts", "--include-dirty", cwd=repo.path).json
    pairs = {tuple(p["lanes"]): p for p in dirty["pairs"]}
    assert pairs[("alpha", "beta")]["conflict"] is True
    assert set(pairs[("alpha", "beta")]["paths"]) == want
    assert pairs[("main", "alpha")]["conflict"] is False

    # export: git am onto the base in a fresh clone gives the lane's tree, every name
    mbox = tmp_path / "alpha.mbox"
    ex = jl("export", "alpha", "-o", str(mbox), cwd=repo.path)
    assert ex.code == "exported", ex
    assert {f["path"] for f in ex.json["files"]} == want
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-checkout", str(repo.path), str(clone))
    git(clone, "checkout", "-q", "-b", "applied", ex.json["base"])
    git(clone, "am", "-q", "-k", "--keep-cr", "--no-scissors", str(mbox))
    lane_tree = git(alpha, "rev-parse", "HEAD^{tree}").stdout
    assert git(clone, "rev-parse", "HEAD^{tree}").stdout == lane_tree
    for n in NAMES:
        assert read(clone, n) == b"one\nalpha\nthree\n"

    # the hub overlap check: the owner's uncommitted files of the same names, and
    # unrelated ones (one a glob that would match them all) that must stay where they are
    for n in NAMES:
        put(repo.path, n, b"the owner's\n")
    put(repo.path, b"unrelated*", b"keep\n")
    (repo.path / "README.md").write_text("owner edit\n")
    for _ in range(4):  # each next names at most ten paths: run it as an agent would
        r = jl("land", "alpha", cwd=repo.path)
        if r.rc == 0:
            break
        assert r.code == "hub_dirty", r
        # the names quoted one by one (not the whole message, as a name not UTF-8 made it)
        assert r.json["message"].startswith("the hub "), r
        hits = set(r.json["details"]["paths"])
        assert hits <= want, hits
        ran = sh(" && ".join(r.json["next"][:-1]), repo.path)
        assert ran.returncode == 0, ran
    assert r.code == "landed", r
    assert git(repo.path, "rev-parse", "main^{tree}").stdout == lane_tree
    assert tree_names(repo.path, "main") >= set(NAMES)
    for n in NAMES:  # main has exactly those bytes, and the hub was carried along
        assert read(repo.path, n) == b"one\nalpha\nthree\n"
    assert read(repo.path, b"unrelated*") == b"keep\n"
    assert (repo.path / "README.md").read_text() == "owner edit\n"
    stashed = subprocess.run(
        ["git", "log", "-g", "--format=%H", "refs/stash"], cwd=repo.path, capture_output=True
    ).stdout.split()
    kept: set[bytes] = set()
    for sha in stashed:  # the owner's versions are kept, in the stash and nowhere else
        kept |= tree_names(repo.path, sha.decode() + "^3") & set(NAMES)
    assert kept == set(NAMES)

    # beta: commit, sync onto main (every name a conflict), resolve, continue, land
    git(beta, "add", "-A")
    git(beta, "commit", "-q", "-m", "beta's versions")
    sy = jl("sync", "beta", cwd=repo.path)
    assert sy.code == "sync_conflicts", sy
    assert {f["path"] for f in sy.json["worklist"]["files"]} == want
    for n in NAMES:
        put(beta, n, b"one\nresolved\nthree\n")
    git(beta, "add", "-A")
    assert jl("continue", "beta", cwd=repo.path).code == "synced"
    assert jl("land", "beta", cwd=repo.path).code == "landed"
    for n in NAMES:
        assert read(repo.path, n) == b"one\nresolved\nthree\n"
    for key, path in (("alpha", alpha), ("beta", beta)):
        assert jl("release", key, cwd=repo.path).code == "released"
        assert not path.exists()


def test_hub_overlap_next_stashes_exactly_the_overlapping_untracked_names(
    hrepo: Repo, gitlane_on_path: Path
) -> None:
    """Regression: hub_dirty's `next` was `stash push -- PATHS`: an untracked overlapping
    file made it fail (`did not match any file known to git`), and `*` or `:(glob)x` were
    patterns, which would stash the owner's other work too."""
    repo = hrepo
    alpha = Path(jl("create", "alpha", cwd=repo.path).json["lane"]["path"])
    names = [b"*", b":(glob)*.txt", b"caf\xe9"]
    for n in names:
        put(alpha, n, b"lane\n")
    git(alpha, "add", "-A")
    git(alpha, "commit", "-q", "-m", "globs")
    for n in names:
        put(repo.path, n, b"owner\n")
    put(repo.path, b"notes.txt", b"owner's other work\n")
    r = jl("land", "alpha", cwd=repo.path)
    assert r.code == "hub_dirty", r
    assert sorted(r.json["details"]["paths"]) == sorted(as_json_path(n) for n in names)
    for cmd in r.json["next"]:
        ran = sh(cmd, repo.path)
        assert ran.returncode == 0, (cmd, ran)
    assert read(repo.path, b"notes.txt") == b"owner's other work\n"
    assert (
        git(repo.path, "rev-parse", "main^{tree}").stdout
        == git(alpha, "rev-parse", "HEAD^{tree}").stdout
    )


STAR = ":(glob)*"  # as a pathspec: every file


def test_an_undecided_conflict_on_a_file_named_like_pathspec_magic_removes_only_it(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """Regression: conflicts_unresolved's alternatives (keep ours/theirs, delete) named the
    paths as pathspecs: deleting a conflicted file named `:(glob)*` removed every file."""
    (repo.path / STAR).write_text("base\n")
    (repo.path / "keep.txt").write_text("keep\n")
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-q", "-m", "star")
    installed(repo)
    alpha = Path(jl("create", "alpha", cwd=repo.path).json["lane"]["path"])
    beta = Path(jl("create", "beta", cwd=repo.path).json["lane"]["path"])
    git(beta, "--literal-pathspecs", "rm", "-q", "--", STAR)
    git(beta, "commit", "-q", "-m", "delete star")
    assert tree_names(beta, "HEAD") == {b"README.md", b"keep.txt"}
    assert jl("land", "beta", cwd=repo.path).code == "landed"
    (alpha / STAR).write_text("changed in alpha\n")
    git(alpha, "commit", "-q", "-am", "change star")
    assert jl("sync", "alpha", cwd=repo.path).code == "sync_conflicts"
    r = jl("continue", "alpha", cwd=repo.path)
    assert r.code == "conflicts_unresolved", r
    delete = r.json["alternatives"][2]
    assert sh(delete, repo.path).returncode == 0
    assert tree_names(alpha, "HEAD") == {b"README.md", b"keep.txt"}


def test_markers_in_an_odd_name_refuse_on_one_line_and_the_next_lands(
    hrepo: Repo, gitlane_on_path: Path
) -> None:
    """G9 at the door with a name holding a newline, a quote and a byte that is not UTF-8:
    the refusal is one line (the name quoted), and its `next`, run as written after the
    blocks are removed, commits exactly that file and lands."""
    repo = hrepo
    alpha = Path(jl("create", "alpha", cwd=repo.path).json["lane"]["path"])
    name = b"new\nline 'q' caf\xe9.txt"
    put(alpha, name, b"a\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n")
    git(alpha, "add", "-A")
    git(alpha, "commit", "-q", "--no-verify", "-m", "markers past the hook")
    r = jl("land", "alpha", cwd=repo.path)
    assert r.code == "conflict_markers_present", r
    assert r.json["message"].startswith("lane alpha would bring conflict markers"), r
    assert "\"new\\nline 'q' caf\\351.txt:" in r.json["message"], r
    first = r.err.split(b"\n")[0]
    assert first.startswith(b"git-lane: refused [") and b" Next: " in first, r
    put(alpha, name, b"a\nx\n")
    for cmd in r.json["next"]:
        ran = sh(cmd, repo.path)
        assert ran.returncode == 0, (cmd, ran)
    assert read(repo.path, name) == b"a\nx\n"


# -- the shims: git, write and edit under `git lane exec` ----------------------------------


def test_git_through_the_shim_takes_odd_names_as_paths(hrepo: Repo) -> None:
    repo = hrepo
    alpha = Path(jl("create", "alpha", cwd=repo.path).json["lane"]["path"])
    odd = [
        b"-rf",
        b"--output=x",
        b"--exec=rm",
        b"-C",
        b"--git-dir=..",
        b"*?[",
        b"caf\xe9",
        b"new\nline",
    ]
    for n in odd:
        put(alpha, n, b"x\n")
    os.makedirs(alpha / "--work-tree=" / "tmp")
    put(alpha, b"--work-tree=/tmp/f", b"x\n")

    def ex(*args: str) -> Out:
        return judged(run_lane("exec", "alpha", "--", "git", *args, cwd=alpha), as_json=False)

    assert ex("add", "--", "-rf").rc == 0
    assert ex("add", "--", *[s(n) for n in odd[1:]], "--work-tree=/tmp/f").rc == 0
    assert ex("commit", "-q", "-m", "odd").rc == 0
    assert tree_names(alpha, "HEAD") >= set(odd) | {b"--work-tree=/tmp/f"}
    assert ex("rm", "-q", "--cached", "--", "--exec=rm").rc == 0
    assert ex("restore", "--staged", "--", "--exec=rm").rc == 0
    assert ex("checkout", "HEAD", "--", "--git-dir=..").rc == 0
    assert ex("diff", "--", "--output=x").rc == 0
    assert not (alpha / "x").exists()
    assert git(alpha, "status", "--porcelain").stdout == ""


def test_write_and_edit_shims_with_odd_names_inside_and_outside(
    hrepo: Repo, tmp_path: Path
) -> None:
    repo = hrepo
    alpha = Path(os.path.realpath(jl("create", "alpha", cwd=repo.path).json["lane"]["path"]))
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, alpha / "out")
    around = sorted(os.listdir(alpha.parent))
    inside = [
        b"-rf",
        b"--output=y",
        b"--help",
        b"-",
        b"*?[x",
        b"caf\xe9-2",
        b"new\nline",
        b"sp ace",
        b"q\"'",
        b"a\\b",
        b"x" * 255,
        DEEP,
    ]

    def tool(name: str, *args: str, data: bytes = b"") -> Out:
        return run_lane("exec", "alpha", "--", name, "--json", *args, cwd=alpha, data=data)

    for i, n in enumerate(inside):
        r = judged(tool("write", "--", s(n), data=b"data\n"))
        assert r.code == "written", r
        assert read(alpha, n) == b"data\n"
        if i % 3 == 0:  # edit every third (a CLI start each is the cost)
            r = judged(tool("edit", "--old", "data", "--new", "done", "--", s(n)))
            assert r.code == "edited", r
            assert read(alpha, n) == b"done\n"
    escapes = [
        "../x",
        "a/../../x",
        "out/x",
        "out",
        str(outside / "f"),
        "../" + os.fsdecode(b"\xff"),
        "sub/../../x\ny",
        "out/../../y",
    ]

    def check(path: str) -> Out:
        env = {"GITLANE_LANE": "alpha"}
        return run_lane("--json", "check", "write", "--", path, cwd=alpha, env=env)

    for i, path in enumerate(escapes):
        second = tool("edit", "--old", "a", "--new", "b", "--", path) if i % 2 else check(path)
        for r in (tool("write", "--", path, data=b"no\n"), second):  # write each, and one more
            judged(r)
            assert r.rc == 1 and r.code in ("path_outside_lane", "not_a_file"), r
            # one line on stderr, whatever the name holds
            assert r.err.count(b"\n") == 1 and r.err.startswith(b"git-lane: refused ["), r
    assert list(outside.iterdir()) == []
    assert sorted(os.listdir(alpha.parent)) == around
    assert not (tmp_path / "x").exists()


# -- 3. the quoting a `next` relies on -----------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    word=st.one_of(
        st.text(min_size=1, max_size=30),
        st.binary(min_size=1, max_size=30).map(lambda b: b.decode("utf-8", "surrogateescape")),
    ).filter(lambda w: "\0" not in w)
)
def test_a_quoted_word_is_exactly_that_word_to_sh(word: str) -> None:
    """Regression: git.q spelled a character it could not print as one octal escape of
    its code point: a byte that is not UTF-8 (0xe9 as U+DCE9) became `\\156351`, which
    printf reads as `n351`, so `next` named another file."""
    out = subprocess.run(
        ["sh", "-c", f"printf %s {ggit.q(word)}"], capture_output=True, check=True
    ).stdout
    assert out == os.fsencode(word)


def test_refusal_json_is_strict_for_a_key_that_is_not_utf8(hrepo: Repo) -> None:
    """Regression: a refusal's JSON (and the write/edit shims' own) carried a lone
    surrogate (`"\\udcff"`) for bytes that are not UTF-8."""
    r = jl("create", "--", os.fsdecode(b"\xffkey"), cwd=hrepo.path)
    assert r.code == "invalid_lane_key" and r.json["details"]["key"] == '"\\377key"'
