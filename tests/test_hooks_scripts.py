"""The hook scripts themselves: POSIX sh that dash parses, one shared helper block, the
fast path that never starts Python (nor even git) for ordinary refs, the config reader,
and the Python slow path's diff parsing (a decision table plus properties)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Repo, git, shellcheck
from enginehelp import fifo_packed_refs
from hookfix import assert_refused, events, grepo, install, make_lane, run, sha
from hypothesis import given, settings
from hypothesis import strategies as st

from guard import config, hookcheck
from guard.commands import install as hookinstall
from guard.policy import conflict_blocks

HOOKS_DIR = ROOT / "hooks"
Z = "0" * 40


def _shellcheck(path: Path) -> None:
    exe = shellcheck()
    if exe:
        res = subprocess.run([exe, "-s", "sh", str(path)], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout


def _parses(path: Path) -> None:
    for sh in ("dash", "sh"):
        if shutil.which(sh):
            res = subprocess.run([sh, "-n", str(path)], capture_output=True, text=True)
            assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("name", hookinstall.HOOKS)
def test_hook_is_posix_sh(name: str, tmp_path: Path) -> None:
    path = HOOKS_DIR / name
    text = path.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert hookinstall.OUR_ID in text.splitlines()
    assert os.access(path, os.X_OK)
    _parses(path)
    # what runs is the rendered hook: shellcheck that, whole (the source alone names
    # helpers only common.sh defines)
    out = tmp_path / name
    out.write_bytes(hookinstall.script_bytes(name))
    _parses(out)
    _shellcheck(out)


def test_common_sh_is_posix_sh() -> None:
    path = HOOKS_DIR / "common.sh"
    _parses(path)
    _shellcheck(path)


@pytest.mark.parametrize("name", hookinstall.HOOKS)
def test_each_hook_holds_the_common_block_once_rendered(name: str) -> None:
    """The source has the placeholder line once; the rendered hook has common.sh's block
    in its place, the embedded Python, and no line that sources a file at run time."""
    src = (HOOKS_DIR / name).read_text()
    assert src.splitlines().count(hookcheck.COMMON_LINE) == 1
    common = (HOOKS_DIR / "common.sh").read_text()
    block = common[common.index(hookcheck.COMMON_START) :]
    text = hookinstall.script_bytes(name, "/x/python").decode()
    assert block in text
    assert hookcheck.COMMON_LINE not in text
    assert text.count(hookcheck.COMMON_START) == 1
    assert "GITLANE_PYTHON=/x/python" in text.splitlines()
    assert not [ln for ln in text.splitlines() if ln.lstrip().startswith(". ")]


def test_rendered_hooks_run(repo: Repo, tmp_path: Path) -> None:
    """Each rendered hook, run by hand outside any hooks directory, decides: pre-rebase and
    pre-commit refuse on main and pass on another branch; reference-transaction refuses
    moving main and passes a lane branch."""
    main = sha(repo.path, "refs/heads/main")
    hooks = {}
    for name in hookinstall.HOOKS:
        p = tmp_path / "rendered" / name
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(hookinstall.script_bytes(name))
        p.chmod(0o755)
        hooks[name] = p

    def run_hook(name: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(hooks[name]), *args], input=stdin, cwd=repo.path, capture_output=True, text=True
        )

    assert_refused(run_hook("pre-commit"))
    assert_refused(run_hook("pre-rebase", "lane/x"))
    assert_refused(
        run_hook("reference-transaction", "prepared", stdin=f"{main} {'5' * 40} refs/heads/main\n")
    )
    assert (
        run_hook(
            "reference-transaction", "prepared", stdin=f"{Z} {main} refs/heads/other\n"
        ).returncode
        == 0
    )
    git(repo.path, "switch", "-q", "-c", "side")
    assert run_hook("pre-commit").returncode == 0
    assert run_hook("pre-rebase", "main").returncode == 0


def test_an_unrendered_hook_stops_instead_of_running_half_made(repo: Repo, tmp_path: Path) -> None:
    """A hook source copied alone (no common.sh beside it) fails at the placeholder line:
    the commit does not go through with the helpers missing."""
    hooks = repo.common_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in hookinstall.HOOKS:
        shutil.copy2(HOOKS_DIR / name, hooks / name)
    before = sha(repo.path, "refs/heads/main")
    res = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "--no-verify", "-m", "x"],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert res.returncode != 0
    assert sha(repo.path, "refs/heads/main") == before


def test_hook_without_embedded_python_falls_back(repo: Repo) -> None:
    """A rendered hook with no Python embedded still finds guard through PATH.
    (Moved from test_install.py: the shipped source alone no longer runs.)"""
    install(repo)
    d = repo.common_dir / "hooks"
    text = hookinstall.script_bytes("pre-commit").decode()
    lines = [
        hookinstall.PY_LINE if ln.startswith("GITLANE_PYTHON=") else ln for ln in text.split("\n")
    ]
    (d / "pre-commit").write_text("\n".join(lines))
    lane = make_lane(repo, "a")
    (lane / "f.txt").write_text("<<<<<<< a\n=======\n>>>>>>> b\n")
    git(lane, "add", "f.txt")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    assert_refused(run(lane, "commit", "-q", "-m", "m", env=env), "conflict_markers_present")
    assert grepo(repo).common_dir == repo.common_dir


# -- the fast path ---------------------------------------------------------------------
@pytest.fixture
def spy(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose git and python3 only record that they were started."""
    bindir = tmp_path / "spybin"
    bindir.mkdir()
    log = tmp_path / "spy.log"
    for tool in ("git", "python3", "python", "git-lane-hook"):
        p = bindir / tool
        p.write_text(f'#!/bin/sh\necho "{tool} $*" >>"{log}"\nexit 0\n')
        p.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bindir}:/usr/bin:/bin"
    return env, log


def _run_hook(
    repo: Repo, name: str, args: list[str], stdin: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    path = repo.common_dir / "hooks" / name
    return subprocess.run(
        [str(path), *args],
        input=stdin,
        cwd=cwd or repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # a hook that waits (on a FIFO) fails its test, never blocks the suite
    )


def test_reference_transaction_fast_path_starts_nothing(
    repo: Repo, spy: tuple[dict[str, str], Path]
) -> None:
    env, log = spy
    install(repo)
    a, b = "1" * 40, "2" * 40
    lines = f"{a} {b} HEAD\n{a} {b} refs/heads/lane/x\n{a} {b} ORIG_HEAD\n{a} {b} refs/tags/v1\n{a} {b} refs/remotes/o/main\n"
    for state in ("prepared", "preparing", "committed", "aborted"):
        res = _run_hook(repo, "reference-transaction", [state], lines, env)
        assert res.returncode == 0, res.stderr
    # committed/aborted never decide, even for main
    for state in ("committed", "aborted"):
        res = _run_hook(repo, "reference-transaction", [state], f"{a} {b} refs/heads/main\n", env)
        assert res.returncode == 0
    assert not log.exists(), log.read_text()


def test_reference_transaction_fast_path_reads_the_configured_main_without_a_fork(
    repo: Repo, spy: tuple[dict[str, str], Path]
) -> None:
    """Before it skips HEAD or refs/remotes/* lines, the fast path looks whether main
    (main, master, a `main_branch` of either config.toml) is a symbolic ref: by reading
    files, never by starting git or Python."""
    env, log = spy
    install(repo)
    git(repo.path, "branch", "trunk")
    repo.state_dir.mkdir(parents=True, exist_ok=True)
    (repo.state_dir / "config.toml").write_text('gate = "make"\nmain_branch = "trunk" # ours\n')
    a, b = "1" * 40, "2" * 40
    res = _run_hook(repo, "reference-transaction", ["prepared"], f"{a} {b} HEAD\n", env)
    assert res.returncode == 0, res.stderr
    assert not log.exists(), log.read_text()


@pytest.mark.parametrize("name", ["main", "trunk"])
def test_reference_transaction_fast_path_skips_nothing_of_a_symbolic_mains(
    repo: Repo, name: str
) -> None:
    """main (or the configured name) a symbolic ref: the lines the fast path skips
    (refs/remotes/*, HEAD, ...) are decided too, and the ones main leads to refused."""
    install(repo)
    main = sha(repo.path, "refs/heads/main")
    assert main
    git(repo.path, "switch", "-q", "--detach")
    if name != "main":
        git(repo.path, "branch", name)
        repo.state_dir.mkdir(parents=True, exist_ok=True)
        (repo.state_dir / "config.toml").write_text(f"main_branch = '{name}'\n")
    git(repo.path, "update-ref", "refs/remotes/o/t", main)
    git(repo.path, "symbolic-ref", f"refs/heads/{name}", "refs/remotes/o/t")
    b = "2" * 40
    env = dict(os.environ)
    for line in (f"{main} {b} refs/remotes/o/t", f"{main} {b} main-worktree/refs/remotes/o/t"):
        res = _run_hook(
            repo, "reference-transaction", ["prepared"], f"{main} {b} HEAD\n{line}\n", env
        )
        if "main-worktree/" in line:  # a shared ref has no such prefix: another ref
            assert res.returncode == 0, res.stderr
        else:
            assert_refused(res)
    res = _run_hook(
        repo, "reference-transaction", ["prepared"], f"{main} {b} refs/remotes/o/u\n", env
    )
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("spied", [False, True], ids=["git", "spy"])
def test_reference_transaction_refuses_a_fifo_at_packed_refs_without_opening_it(
    repo: Repo, spy: tuple[dict[str, str], Path], spied: bool
) -> None:
    """`packed-refs` a FIFO (made outside the sandbox): git reads no ref from it, every
    git that opens it waits for ever. The hook refuses every ref update, the fast path's
    kind too, main_not_plain naming restore-main, with shell tests alone (`[ -e ]`,
    `[ -f ]`): never opened, no git (which would wait on it) nor Python started."""
    env, log = spy if spied else (dict(os.environ), None)
    install(repo)
    main = sha(repo.path, "refs/heads/main")
    with fifo_packed_refs(repo):
        for line in (f"{main} {'5' * 40} refs/heads/main", f"{Z} {main} refs/remotes/o/x"):
            res = _run_hook(repo, "reference-transaction", ["prepared"], line + "\n", env)
            assert_refused(res, "main_not_plain")
            assert "packed-refs is no regular file" in res.stderr, res.stderr
            assert "Next: git lane restore-main\n" in res.stderr, res.stderr
    assert log is None or not log.exists(), log.read_text()


def test_reference_transaction_decides_in_preparing_too(repo: Repo) -> None:
    install(repo)
    main = sha(repo.path, "refs/heads/main")
    res = _run_hook(
        repo,
        "reference-transaction",
        ["preparing"],
        f"{main} {'3' * 40} refs/heads/main\n",
        dict(os.environ),
    )
    assert_refused(res)


def test_pre_commit_in_a_fresh_lane_starts_no_python(
    repo: Repo, spy: tuple[dict[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    env, log = spy
    bindir = Path(env["PATH"].split(":", 1)[0])
    (bindir / "git").unlink()  # the real git, please
    monkeypatch.setattr(sys, "executable", str(bindir / "python3"))  # embedded in the hooks
    install(repo)
    lane = make_lane(repo, "a")
    res = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "x"],
        cwd=lane,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert not log.exists(), log.read_text()
    # and the slow path really goes through the embedded Python
    (lane / "f.txt").write_text("<<<<<<< a\n=======\n>>>>>>> b\n")
    git(lane, "add", "f.txt")
    subprocess.run(
        ["git", "commit", "-q", "-m", "m"], cwd=lane, env=env, capture_output=True, text=True
    )
    called = log.read_text().split()
    assert called[:2] == ["python3", "-I"]  # isolated: not the lane's own guard/, if any
    assert called[-3:] == [str(ROOT), "markers", "a"]  # the guard it was installed from


# -- the config reader -----------------------------------------------------------------
@pytest.mark.parametrize(
    "toml, refused",
    [
        ("enabled = false\n", False),
        ("enabled=false\n", False),
        ("  enabled\t=  false   # switched off\n", False),
        ("enabled = true\n", True),
        ('gate = "off"\n[table]\nenabled = false\n', True),  # keys in tables are not ours
        ('main_branch = "trunk"\n', False),  # main is not protected then
        ("main_branch = 'trunk'\n", False),
        ('main_branch = "main" # the usual\n', True),
        ("", True),
    ],
)
def test_config_reader(repo: Repo, toml: str, refused: bool) -> None:
    install(repo)
    git(repo.path, "branch", "trunk")
    repo.state_dir.mkdir(parents=True, exist_ok=True)
    (repo.state_dir / "config.toml").write_text(toml)
    main = sha(repo.path, "refs/heads/main")
    res = _run_hook(
        repo,
        "reference-transaction",
        ["prepared"],
        f"{main} {'4' * 40} refs/heads/main\n",
        dict(os.environ),
    )
    assert (res.returncode != 0) == refused, res.stderr


def test_hook_config_matches_the_python_reader(repo: Repo) -> None:
    """What config.write produces is what the sh reader understands."""
    install(repo)
    path = repo.state_dir / "config.toml"
    config.write(path, "sandbox_writable", ["/a", "/b"])
    config.write(path, "enabled", False)
    config.write(path, "main_branch", "main")
    main = sha(repo.path, "refs/heads/main")
    res = _run_hook(
        repo,
        "reference-transaction",
        ["prepared"],
        f"{main} {'4' * 40} refs/heads/main\n",
        dict(os.environ),
    )
    assert res.returncode == 0, res.stderr


def test_refusal_event_is_valid_json_with_odd_names(repo: Repo) -> None:
    install(repo)
    name = 'we"ird-\u00fc'
    git(repo.path, "switch", "-q", "-c", name)
    repo.state_dir.mkdir(parents=True, exist_ok=True)
    (repo.state_dir / "config.toml").write_text(f"main_branch = '{name}'\n")
    res = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "x"],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert_refused(res)
    ev = json.loads((repo.state_dir / "events.jsonl").read_text().splitlines()[-1])
    assert ev["branch"] == name and ev["kind"] == "refusal" and ev["source"] == "hook"
    assert events(repo)[-1]["code"] == "main_mutation_refused"


def test_chained_reference_transaction_gets_stdin_in_every_state(repo: Repo) -> None:
    hooks = repo.common_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    log = repo.path.parent / "legacy.log"
    legacy = hooks / "reference-transaction"
    legacy.write_text(f'#!/bin/sh\n{{ echo "state $1"; cat; }} >>"{log}"\n')
    legacy.chmod(0o755)
    install(repo)
    assert (hooks / "reference-transaction.legacy").exists()
    lane = make_lane(repo, "a")
    log.unlink()
    git(lane, "commit", "-q", "--allow-empty", "-m", "x")
    text = log.read_text()
    assert "state prepared" in text and "state committed" in text
    assert text.count("refs/heads/lane/a") == 2
    # a refusing legacy hook fails the transaction
    legacy2 = hooks / "reference-transaction.legacy"
    legacy2.write_text('#!/bin/sh\ncat >/dev/null\n[ "$1" = prepared ] && exit 1\nexit 0\n')
    before = sha(lane)
    res = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "y"],
        cwd=lane,
        capture_output=True,
        text=True,
    )
    assert res.returncode != 0
    assert sha(lane) == before


def test_unexecutable_legacy_is_skipped(repo: Repo) -> None:
    install(repo)
    leg = repo.common_dir / "hooks" / "pre-commit.legacy"
    leg.write_text("#!/bin/sh\nexit 1\n")
    leg.chmod(stat.S_IRUSR | stat.S_IWUSR)
    lane = make_lane(repo, "a")
    git(lane, "commit", "-q", "--allow-empty", "-m", "x")


# -- the Python slow path: diff parsing --------------------------------------------------
def test_added_lines_table() -> None:
    patch = (
        b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,0 +2,2 @@\n+a\n+b\n@@ -5 +7 @@\n-old\n+new\n"
        b'diff --git "a/\\303\\274 \\"q\\"" "b/\\303\\274 \\"q\\""\n--- /dev/null\n+++ "b/\\303\\274 \\"q\\""\n@@ -0,0 +1 @@\n+z\n'
        b"diff --git a/s p b/s p\n--- a/s p\t\n+++ b/s p\t\n@@ -3,0 +4 @@\n+w\n"
        b"diff --git a/gone b/gone\n--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )
    got = hookcheck.added_lines(patch)
    assert got == {b"x": {2, 3, 7}, '\u00fc "q"'.encode(): {1}, b"s p": {4}}


@pytest.mark.parametrize(
    "text, added, expected",
    [
        ("<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n", {1}, [1]),
        ("<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n", {3}, [1]),
        ("<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n", {2, 4}, []),  # only the block's body changed
        ("x\n<<<<<<< a\n1\n=======\n2\n>>>>>>> b\n<<<<<<< a\n=======\n>>>>>>> b\n", {9}, [7]),
        ("Title\n=======\n", {2}, []),
    ],
)
def test_added_blocks_table(text: str, added: set[int], expected: list[int]) -> None:
    assert hookcheck.added_blocks(text.encode(), added) == expected


_lines = st.lists(
    st.sampled_from(
        ["<<<<<<< a", "||||||| base", "=======", ">>>>>>> b", "text", "", "<<<<<<<", ">>>>>>>"]
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(_lines)
def test_added_blocks_properties(lines: list[str]) -> None:
    data = "\n".join(lines).encode()
    everything = set(range(1, len(lines) + 2))
    assert hookcheck.added_blocks(data, everything) == conflict_blocks(data)
    assert hookcheck.added_blocks(data, set()) == []


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\0/"),
        min_size=1,
        max_size=20,
    )
)
def test_unquote_roundtrips_git_quoting(name: str) -> None:
    raw = name.encode()
    quoted = (
        b'"'
        + b"".join(
            b"\\" + b"%03o" % c
            if c < 32 or c >= 127
            else (b"\\" + bytes([c]) if c in b'"\\' else bytes([c]))
            for c in raw
        )
        + b'"'
    )
    assert hookcheck._unquote(quoted) == raw
