"""Helpers shared by the Engine II tests (sync, land, lock, crash, concurrency, log):
reading git state and the state store exactly as a user would, never through guard."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import ROOT, Repo, git


def head(where: Path | str) -> str:
    return git(where, "rev-parse", "HEAD").stdout.strip()


def parents(where: Path | str, rev: str) -> list[str]:
    return git(where, "rev-list", "--parents", "-n", "1", rev).stdout.split()[1:]


def subjects(where: Path | str, rng: str) -> list[str]:
    return git(where, "log", "--format=%s", rng).stdout.splitlines()


def is_ancestor(where: Path | str, a: str, b: str) -> bool:
    return git(where, "merge-base", "--is-ancestor", a, b, check=False).returncode == 0


def rebase_dir(lane_path: Path) -> bool:
    gd = Path(git(lane_path, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())
    return (gd / "rebase-merge").is_dir() or (gd / "rebase-apply").is_dir()


def status_porcelain(where: Path | str) -> str:
    return git(where, "status", "--porcelain=v1", "--untracked-files=all").stdout


def events(repo: Repo, kind: str | None = None) -> list[dict[str, Any]]:
    out = []
    for p in (repo.state_dir / "events.jsonl.1", repo.state_dir / "events.jsonl"):
        if p.exists():
            for line in p.read_text().splitlines():
                ev = json.loads(line)
                if kind is None or ev.get("kind") == kind:
                    out.append(ev)
    return out


def epoch(repo: Repo) -> int:
    p = repo.state_dir / "epoch.json"
    return int(json.loads(p.read_text())["epoch"]) if p.exists() else 0


def owner_file(repo: Repo) -> Path:
    return repo.state_dir / "locks" / "integration.owner"


def landing_file(repo: Repo) -> Path:
    return repo.state_dir / "landing.json"


def lane_status(repo: Repo, key: str) -> dict[str, Any]:
    r = repo.jlane("status")
    assert r.rc == 0, r.stderr
    for ln in r.json["lanes"]:
        if ln["key"] == key:
            return dict(ln)
    raise AssertionError(f"no lane {key} in status")


def assert_linear(repo: Repo, ref: str = "refs/heads/main") -> None:
    assert git(repo.path, "rev-list", "--merges", ref).stdout == ""


def spawn_lane(
    *args: str, cwd: Path | str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`git lane ARGS` started in the background (real process)."""
    full = dict(os.environ)
    if env:
        full.update(env)
    return subprocess.Popen(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd,
        env=full,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(pred: Any, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (a killed, unreaped child is dead for our purposes)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def ready_lane(repo: Repo, key: str, files: dict[str, str] | None = None) -> Path:
    """A lane off main with one commit per file, ready to land."""
    path = repo.create(key)
    for name, content in (files or {f"{key}.txt": f"{key}\n"}).items():
        repo.commit(path, name, content)
    return path


__all__ = ["ROOT"]


def add_submodule(repo: Repo, tmp_path: Path, name: str = "sub", ignore: str | None = None) -> Path:
    """Commit on main a submodule `name` (a one-commit repository made under tmp_path), with
    `submodule.NAME.ignore = ignore` in .gitmodules when given; file:// submodules allowed
    for this test's HOME (git refuses them by default since 2.38.1). Returns its source."""
    home = Path(os.environ["HOME"])
    with open(home / ".gitconfig", "a") as f:
        f.write('[protocol "file"]\n\tallow = always\n')
    sub = tmp_path / f"{name}-source"
    sub.mkdir(parents=True)  # a name with a directory in it (`a/sub`): below a directory
    git(sub, "init", "-q", "-b", "main")
    (sub / "s.txt").write_text("s\n")
    git(sub, "add", "s.txt")
    git(sub, "commit", "-q", "-m", "s")
    git(repo.path, "submodule", "add", "-q", str(sub), name)
    if ignore is not None:
        git(repo.path, "config", "-f", ".gitmodules", f"submodule.{name}.ignore", ignore)
        git(repo.path, "add", ".gitmodules")
    git(repo.path, "commit", "-q", "-m", f"add {name}")
    return sub


def lane_with_submodule(
    repo: Repo, tmp_path: Path, name: str = "sub", ignore: str | None = None
) -> tuple[Path, Path]:
    """main records submodule `name` (add_submodule, its .gitmodules `ignore` setting
    when given); lane alpha has it populated and one commit to land. Returns (the lane's
    path, the submodule's git dir in the lane's admin dir)."""
    add_submodule(repo, tmp_path, name, ignore)
    assert repo.lane("install").rc == 0
    repo.config("gate_command", "true")
    path = repo.create("alpha")
    git(path, "submodule", "update", "--init", "-q")
    repo.commit(path, "alpha.txt", "alpha\n")
    admin = Path(git(path, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())
    moddir = admin / "modules" / name
    assert (moddir / "config").is_file()
    return path, moddir


def flock_holder(repo: Repo) -> subprocess.Popen[bytes]:
    """A live process that holds the integration flock, as a land of this host does for as
    long as its owner record exists (a record alone, the flock free, is a dead land's)."""
    flock = repo.state_dir / "locks" / "integration.flock"
    flock.parent.mkdir(parents=True, exist_ok=True)
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(flock)!r}, os.O_RDWR | os.O_CREAT, 0o644)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "sys.stdout.write('held\\n'); sys.stdout.flush(); time.sleep(120)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"held\n"
    return p


def on_a_terminal(cmd: str, cwd: Path) -> None:
    """Run `cmd` with sh as the owner does at a terminal (stdout and stderr a tty: git
    starts its pager there), in `cwd`; what it prints is read and dropped."""
    import pty

    master, slave = pty.openpty()
    try:
        subprocess.run(
            ["sh", "-c", cmd],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            timeout=60,
            check=False,
        )
    finally:
        os.close(slave)
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass
        os.close(master)


def racing_git(tmp_path: Path, race: str) -> dict[str, str]:
    """A git for the release process that, at its first call that would remove or delete
    anything, first runs `race` (what another process does at that moment)."""
    real = shutil.which("git")
    assert real
    script = tmp_path / "racing-git"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case $a in update-ref|remove|-d|-D) hit=1;; esac; done\n'
        f'if [ -n "$hit" ] && mkdir {shlex.quote(str(tmp_path / "raced"))} 2>/dev/null; then\n'
        f"  {race}\n"
        "fi\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    script.chmod(0o755)
    return {"GITLANE_REAL_GIT": str(script)}


def link_on_mains_way(hub: Repo, shape: str, tip: str) -> tuple[str, Path]:
    """Red team 14H-A F2, F4, made by hand (outside every layer) once lane alpha exists:
    git reads main (at `tip`) through a link that is not at main's own loose ref.
    `parent_directory`: main_branch `team/main`, `refs/heads/team -> lane/x` (main read
    from refs/heads/lane/x/main, in the lane namespace); `heads`: refs/heads itself a
    link; `packed_refs`: main packed, `packed-refs` a link into alpha's admin dir.
    Returns (main's ref, the file git reads main from)."""
    common = hub.common_dir
    heads = common / "refs" / "heads"
    if shape == "parent_directory":
        hub.git("branch", "team/main", tip)
        hub.config("main_branch", "team/main")
        (heads / "lane" / "x").mkdir(parents=True)
        (heads / "team" / "main").rename(heads / "lane" / "x" / "main")
        (heads / "team").rmdir()
        (heads / "team").symlink_to("lane/x")
        return "refs/heads/team/main", heads / "lane" / "x" / "main"
    if shape == "heads":  # every branch read from refs/heads-real: not moved by restore-main
        heads.rename(common / "refs" / "heads-real")
        heads.symlink_to("heads-real")
        return "refs/heads/main", common / "refs" / "heads-real" / "main"
    hub.git("pack-refs", "--all")
    assert not (heads / "main").exists()
    admin = common / "worktrees" / "alpha"
    (common / "packed-refs").rename(admin / "packed-refs")
    (common / "packed-refs").symlink_to("worktrees/alpha/packed-refs")
    return "refs/heads/main", admin / "packed-refs"


def hard_link_planted(hub: Repo, shape: str) -> tuple[str, Path, Path]:
    """Red team 15B F3, made by hand (outside every layer): lane alpha (one commit ahead,
    landed first for `landed`), then a protected ref file given a second name that a
    sandboxed lane may write. `loose_main`: refs/heads/lane/zz for main's loose file;
    `packed_refs`: main packed, refs/heads/lane/yy for packed-refs; `admin_head`: alpha's
    admin HEAD for main's loose file (the lane then detached at main); `landed`:
    refs/heads/lane/ww for land 1's loose landed ref. Returns (the ref git reads through
    the linked file, the second name, the lane)."""
    common = hub.common_dir
    heads = common / "refs" / "heads"
    lane = hub.create("alpha")
    hub.commit(lane, "x.txt", "x\n")
    if shape == "landed":
        r = hub.jlane("land", "alpha")
        assert (r.rc, r.code) == (0, "landed"), r.stdout
        ref = "refs/git-lane/landed/0000000001"
        assert (common / ref).is_file()
        os.link(common / ref, heads / "lane" / "ww")
        return ref, heads / "lane" / "ww", lane
    if shape == "packed_refs":
        hub.git("pack-refs", "--all")
        assert not (heads / "main").exists()
        (heads / "lane").mkdir(parents=True, exist_ok=True)
        os.link(common / "packed-refs", heads / "lane" / "yy")
        return "refs/heads/main", heads / "lane" / "yy", lane
    if shape == "admin_head":
        git(lane, "switch", "-q", "--detach", "main")
        admin = Path(git(lane, "rev-parse", "--absolute-git-dir").stdout.strip())
        (admin / "HEAD").unlink()
        os.link(heads / "main", admin / "HEAD")
        return "refs/heads/main", admin / "HEAD", lane
    assert shape == "loose_main", shape
    os.link(heads / "main", heads / "lane" / "zz")
    return "refs/heads/main", heads / "lane" / "zz", lane


@contextlib.contextmanager
def fifo_packed_refs(repo: Repo, link: bool = False) -> Iterator[Path]:
    """`<common>/packed-refs` made a FIFO (or, `link`, a link to one in the common dir) by a
    process outside every sandbox: every git that reads a ref waits on its open(2) for
    ever. Yields packed-refs' path. On exit every process still waiting on the FIFO,
    wherever it was moved (kept/), is let go (a writer opens and closes it: they read an
    empty file), so a command that hung leaves no git behind."""
    common = repo.common_dir
    packed = common / "packed-refs"
    fifo = common / "packed-refs.fifo" if link else packed
    if packed.exists():
        packed.unlink()
    os.mkfifo(fifo)
    ino = os.stat(fifo).st_ino
    if link:
        packed.symlink_to(fifo.name)
    try:
        yield packed
    finally:
        found = [p for p in (fifo, *repo.state_dir.glob("kept/*")) if _is_fifo(p, ino)]
        for _ in range(50):
            let_go = False
            for p in found:
                try:
                    os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
                    let_go = True
                except OSError as exc:
                    assert exc.errno == errno.ENXIO, exc  # ENXIO: nobody waits on it
            if not let_go:
                break
            time.sleep(0.1)
        for p in (packed, fifo):
            if p.is_symlink() or _is_fifo(p, ino):
                p.unlink()


def _is_fifo(p: Path, ino: int) -> bool:
    try:
        st = os.lstat(p)
    except OSError:
        return False
    return stat.S_ISFIFO(st.st_mode) and st.st_ino == ino


# A lane rewrites its own index (a sandboxed lane's admin dir is granted to it) as what it
# was plus an optional extension `ZZZZ` (upper case: git skips it by its size, and makes
# no checksum pass on read) that is one hole: git in the lane reads it, and it takes no
# disk. git rewrites an index with what it knows only (the extension goes). Red team 15A F5.
GROW_INDEX = r"""
import os, struct, subprocess, sys
gd = subprocess.run(["git", "rev-parse", "--git-dir"], capture_output=True, text=True).stdout.strip()
p = os.path.join(gd, "index")
data = open(p, "rb").read()[:-20]
n = int(sys.argv[1])
with open(p + ".grow", "wb") as f:
    f.write(data + b"ZZZZ" + struct.pack(">I", n))
    f.seek(n, 1)
    f.write(b"\0" * 20)
os.rename(p + ".grow", p)
"""


def grow_index(where: Path, size: int) -> Path:
    """GROW_INDEX run in the lane at `where` (as a process of the lane runs it); its index."""
    subprocess.run([sys.executable, "-c", GROW_INDEX, str(size)], cwd=where, check=True)
    gd = git(where, "rev-parse", "--absolute-git-dir").stdout.strip()
    return Path(gd) / "index"


def lane_capped(
    cwd: Path, *args: str, fsize: int | None = None, memory: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`git lane ARGS` (python -m guard) with no file it writes allowed past `fsize` bytes
    (RLIMIT_FSIZE: a copy that writes a lane's hole out as zeros fails there) and its
    address space held to `memory` bytes (RLIMIT_AS: a lane's grown file read whole
    fails there)."""
    import resource

    def cap() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=300,
        check=False,
    )
