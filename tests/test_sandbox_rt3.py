"""Red team round 3 of issue 11, findings 1 and 2: a sandboxed lane's own object store is
hostile input (guard/objects.py sanitize; bounded reads, guard/git.py LANE_READ_TIMEOUT),
and exec ends what CMD left running before it waits for its own socket land or absorb
(guard/commands/exec.py, guard/reap.py). Real kernel, real processes, the real CLI; every
wait is bounded, so a regression fails instead of hanging."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import NODAC, LaneRun, Repo, lane, needs_modes, owner_argv, owner_lane
from enginehelp import events, pid_alive, wait_for
from sandboxhelp import NEEDS_LANDLOCK

from guard import git

pytestmark = NEEDS_LANDLOCK

SHA = "1111111111111111111111111111111111111111"

# CMD plants a FIFO in its own object store under a made-up object name and points its
# branch at that name: git reading that object (the supervisor's absorb, a land's import,
# the owner's status) opens the FIFO, and open(2) of a FIFO blocks until a writer comes
# (the sandbox now refuses CMD the FIFO itself: no MAKE_FIFO in its store; CMD checks
# that, and a plain process, _Planter below, puts the FIFO there for it)
FIFO = r"""
set -e
sha=1111111111111111111111111111111111111111
mkdir -p "$GIT_OBJECT_DIRECTORY/11"
if mkfifo "$GIT_OBJECT_DIRECTORY/11/cmd-made" 2>/dev/null; then exit 7; fi
while [ ! -p "$GIT_OBJECT_DIRECTORY/11/${sha#11}" ]; do sleep 0.02; done
printf '%s\n' "$sha" > "$1"
sleep 3
"""


class _Planter:
    """A plain process in the lane (no sandbox) that puts a FIFO at the made-up object's
    place in the lane's store (`<admin>/objects/11/...`): once, or (`again`) back each
    time it is removed, until stopped."""

    def __init__(self, admin: Path, again: bool = False) -> None:
        import threading

        self.again = again
        self.fifo = admin / "objects" / "11" / SHA[2:]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                if self.fifo.parent.is_dir() and not self.fifo.is_fifo():
                    os.mkfifo(self.fifo)
                    if not self.again:
                        return
            except OSError:
                pass
            time.sleep(0.02)

    def __enter__(self) -> _Planter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _bounded(argv: list[str], cwd: Path, env: dict[str, str], limit: float) -> int | None:
    """argv's exit status, or None when it still ran after `limit` seconds (then killed,
    with its process group: exec blocks SIGTERM while it ends CMD's tree)."""
    p = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None


def _admin(lane_path: Path) -> Path:
    return Path(
        subprocess.run(
            ["git", "-C", str(lane_path), "rev-parse", "--absolute-git-dir"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )


def _fifos(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_fifo()]


def _release(fifos: list[Path]) -> None:
    """Give a reader blocked in open(2) of each FIFO its writer (then EOF): a git this test
    leaves blocked (its timeout was in a process the test killed) ends."""
    for f in fifos:
        try:
            os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_a_fifo_in_the_lane_store_neither_hangs_exec_nor_the_owners_status(
    hub: Repo, tmp_path: Path
) -> None:
    """The FIFO CMD planted is removed before each absorb (and at exec's end, logged): exec
    ends, the owner's `git lane status` ends, and no FIFO is left in the lane's store."""
    lane_path = hub.create("alpha")
    body = tmp_path / "fifo.sh"
    body.write_text(FIFO)
    ref = hub.common_dir / "refs" / "heads" / "lane" / "alpha"
    env = dict(os.environ)
    argv = [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--"]
    worktrees = hub.common_dir / "worktrees"
    try:
        with _Planter(_admin(lane_path)):
            rc = _bounded([*argv, "sh", str(body), str(ref)], lane_path, env, 40)
        assert rc is not None, "exec never ended (absorb blocked)"
        assert rc != 7, "the sandbox let CMD make a FIFO in its store"
        assert not _fifos(worktrees), "a FIFO was left in the lane's store"
        status = [sys.executable, "-m", "guard", "status"]
        assert _bounded(status, hub.path, env, 40) is not None, "git lane status never ended"
        removed = [f for ev in events(hub, "lane_store_sanitized") for f in ev["removed"]]
        assert any(f.endswith("/objects/11/" + SHA[2:]) for f in removed), removed
    finally:
        _release(_fifos(worktrees))


# a daemon CMD leaves behind keeps a FIFO in the lane's store (it replants it as soon as
# it is removed), so the socket land CMD asks for blocks reading it whatever the engine's
# walk removed; once told "go" (after exec, in the old order, was killed) it chmod -x's
# the hook: nothing may be left to do it by then
LINGER = r"""
lane=$PWD hook=$1 ref=$2
sha=1111111111111111111111111111111111111111
mkdir -p "$GIT_OBJECT_DIRECTORY/11"
fifo="$GIT_OBJECT_DIRECTORY/11/${sha#11}"
setsid sh -c 'echo $$ > "$0/daemon.pid"
  while [ ! -e "$0/go" ]; do sleep 0.02; done
  chmod -x "$1" && touch "$0/done"' "$lane" "$hook" "$fifo" </dev/null >/dev/null 2>&1 &
while [ ! -p "$fifo" ]; do sleep 0.02; done
printf '%s\n' "$sha" > "$ref"
(git lane land alpha > "$lane/land.out" 2>&1 &)
sleep 3
"""


def test_a_hung_socket_land_does_not_keep_what_cmd_left_running_alive(
    hub: Repo, tmp_path: Path
) -> None:
    """With worker_land = "allow", CMD asks for a land of a branch that names a FIFO in its
    store and leaves a daemon behind that keeps the FIFO there. exec ends the daemon (its
    first end of CMD's tree spares only exec's own land and absorb) before it waits for
    them, while the hooks are still watched: the daemon is gone within seconds of CMD's
    exit, whatever git's reads of the FIFO do; those reads are bounded (killed after
    the timeout: the absorb logs why=timeout), so exec ends, and the hook keeps its mode."""
    hub.config("worker_land", "allow")
    lane_path = hub.create("alpha")
    hook = hub.common_dir / "hooks" / "reference-transaction"
    ref = hub.common_dir / "refs" / "heads" / "lane" / "alpha"
    body = tmp_path / "linger.sh"
    body.write_text(LINGER)
    worktrees = hub.common_dir / "worktrees"
    argv = [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--"]
    p = subprocess.Popen(
        [*argv, "sh", str(body), str(hook), str(ref)],
        env={**os.environ, "GITLANE_TEST_LANE_READ_TIMEOUT": "4"},
        cwd=lane_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pidfile = lane_path / "daemon.pid"
    daemon = 0
    planter = _Planter(_admin(lane_path), again=True).__enter__()
    try:
        wait_for(pidfile.exists, 20, "the daemon's pid file")
        wait_for(lambda: pidfile.read_text().strip().isdigit(), 5, "the daemon's pid")
        daemon = int(pidfile.read_text())
        # CMD exits ~3 s after its land request; the daemon must be ended then, even
        # though exec still waits for a land blocked on the FIFO (up to its timeout)
        wait_for(lambda: not pid_alive(daemon), 15, "exec to end the daemon CMD left")
        planter.__exit__()
        (lane_path / "go").touch()
        time.sleep(0.5)
        assert not (lane_path / "done").exists()
        assert hook.stat().st_mode & 0o111, "the hook lost its mode"
        # the land's and the absorb's reads of the store are bounded (here 4 s): exec
        # then ends on its own, and the FIFO is gone (removed once CMD's tree was)
        try:
            p.wait(timeout=40)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                "exec never ended: a read of the lane store is unbounded"
            ) from None
        assert not _fifos(worktrees), "a FIFO was left in the lane's store"
        ends = events(hub, "exec_end")
        assert ends and daemon in ends[-1]["ended"], ends
        assert hook.stat().st_mode & 0o111, "the hook lost its mode after exec was gone"
    finally:
        planter.__exit__()
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        _release(_fifos(worktrees))
        if daemon and pid_alive(daemon):
            os.kill(daemon, signal.SIGKILL)
        hook.chmod(0o755)


def test_a_git_read_past_its_timeout_is_killed_with_its_process_group(tmp_path: Path) -> None:
    """guard/git.py run(timeout=...): git blocked on a FIFO is killed (its whole group),
    and the call says so (timed_out) instead of blocking for ever."""
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    obj = repo / ".git" / "objects" / "11"
    obj.mkdir(parents=True)
    os.mkfifo(obj / SHA[2:])
    begun = time.monotonic()
    try:
        res = git.run(["cat-file", "-p", SHA], repo, check=False, timeout=1.0)
    finally:
        _release([obj / SHA[2:]])
    assert res.timed_out and not res.ok
    assert "timed out after 1 s" in res.stderr
    assert time.monotonic() - begun < 15


def _plant(hub: Repo, lane_path: Path) -> Path:
    """The lane's own store (made by a sandboxed exec), with what a CMD could leave there
    once its exec was SIGKILLed: a FIFO under an object's name (the branch names it), a
    link, a foreign http-alternates; and a regular file, which is kept."""
    r = hub.lane("exec", "--sandbox", "alpha", "--", "true", cwd=lane_path)
    assert r.rc == 0, r.stderr
    (store,) = (hub.common_dir / "worktrees").glob("*/objects")
    (store / "11").mkdir(exist_ok=True)
    os.mkfifo(store / "11" / SHA[2:])
    (store / "22").mkdir(exist_ok=True)
    (store / "22" / ("2" * 38)).symlink_to("/etc/passwd")
    (store / "info" / "http-alternates").write_text("http://example.invalid/objects\n")
    (store / "33").mkdir(exist_ok=True)
    (store / "33" / ("3" * 38)).write_bytes(b"not an object, but a file: kept\n")
    (hub.common_dir / "refs" / "heads" / "lane" / "alpha").write_text(SHA + "\n")
    return store


def test_the_owners_status_after_a_killed_exec_removes_a_planted_fifo_and_ends(
    hub: Repo,
) -> None:
    lane_path = hub.create("alpha")
    store = _plant(hub, lane_path)
    try:
        status = [sys.executable, "-m", "guard", "status"]
        assert _bounded(status, hub.path, dict(os.environ), 40) is not None, "status hung"
        assert not _fifos(store) and not (store / "22" / ("2" * 38)).is_symlink()
        assert (store / "33" / ("3" * 38)).is_file(), "a regular file was removed"
        assert (store / "info" / "alternates").is_file(), "enroll's alternates was removed"
    finally:
        _release(_fifos(store))


def test_doctor_names_a_fifo_in_a_lane_store_and_reconcile_removes_it(hub: Repo) -> None:
    lane_path = hub.create("alpha")
    store = _plant(hub, lane_path)
    try:
        r = lane("doctor", "--json", cwd=hub.path, timeout=60)
        checks = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "lane object store"]
        assert len(checks) == 1 and checks[0]["status"] == "fail", checks
        assert checks[0]["fix"] == "git lane reconcile"
        assert "lane alpha" in checks[0]["message"]
        r = lane("reconcile", "--json", cwd=hub.path, timeout=60)
        assert r.rc == 0, r.stderr
        done = [c for c in json.loads(r.stdout)["changes"] if c["action"] == "lane_store_sanitized"]
        assert len(done) == 1 and len(done[0]["removed"]) == 3, done
        assert not _fifos(store) and not (store / "info" / "http-alternates").exists()
        assert (store / "33" / ("3" * 38)).is_file(), "a regular file was removed"
        r = lane("doctor", "--json", cwd=hub.path, timeout=60)
        checks = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "lane object store"]
        assert [c["status"] for c in checks] == ["ok"], checks
    finally:
        _release(_fifos(store))


# CMD grows its branch's loose ref (the object name first: git still reads it as the
# branch) and its admin dir's ORIG_HEAD to a sparse 256 MiB (no disk used): every git that
# reads refs would read them whole (red team 14G F7: 20 GB, memory exhaustion)
GROW = r"""
set -e
ref=$(git rev-parse --git-common-dir)/refs/heads/lane/alpha
git rev-parse HEAD > "$(git rev-parse --git-dir)/ORIG_HEAD"
truncate -s 256M "$ref" "$(git rev-parse --git-dir)/ORIG_HEAD"
"""
BIG = 256 << 20


def test_a_ref_cmd_grows_sparse_is_kept_aside_when_exec_ends_and_repair_brings_the_branch_back(
    hub: Repo, tmp_path: Path
) -> None:
    """When CMD ends, exec moves the grown files into kept/ (renamed, whole) before its
    absorb's git reads them, and says so with the command that puts the branch back;
    `git lane repair` then puts it at the commit the lane's worktree last had."""
    lane_path = hub.create("alpha")
    tip = hub.commit(lane_path, "f.txt", "work\n")
    body = tmp_path / "grow.sh"
    body.write_text(GROW)
    r = lane("exec", "--sandbox", "alpha", "--", "sh", str(body), cwd=lane_path)
    assert r.rc == 0, r.stderr
    ref = hub.common_dir / "refs" / "heads" / "lane" / "alpha"
    orig = _admin(lane_path) / "ORIG_HEAD"
    assert not ref.exists() and not orig.exists(), "the grown files were left where git reads"
    (ev,) = events(hub, "oversized_kept")
    kept = {d["file"]: Path(d["kept"]) for d in ev["moved"]}
    rel_orig = str(orig.relative_to(hub.common_dir))
    assert set(kept) == {"refs/heads/lane/alpha", rel_orig}, ev
    for p in kept.values():  # moved, never copied: the same sparse file
        assert p.stat().st_size == BIG and p.stat().st_blocks * 512 < 1 << 20
    assert "git lane repair alpha" in r.stderr, r.stderr
    assert hub.lane("repair", "alpha").rc == 0
    assert hub.sha("refs/heads/lane/alpha") == tip


def test_every_engine_command_keeps_a_grown_ref_aside_before_its_git_reads_it(
    hub: Repo,
) -> None:
    """A lane still running (or a plain process) grew a ref after exec's check: the next
    engine command moves it into kept/ before it runs git (the lane's HEAD written back
    naming its branch), says so (its --json warnings), and doctor then fails the lane
    until the fix it prints puts the branch back."""
    hub.create("alpha")
    beta = hub.create("beta")
    ref = hub.common_dir / "refs" / "heads" / "lane" / "beta"
    head = _admin(beta) / "HEAD"
    for p in (ref, head):
        with open(p, "r+b") as f:
            f.truncate(BIG)
    r = hub.jlane("status")
    assert r.rc == 0, r.stderr
    assert any("git lane repair beta" in w for w in r.json["warnings"]), r.json
    assert not ref.exists()
    assert head.read_text() == "ref: refs/heads/lane/beta\n"  # written back, from the record
    (ev,) = events(hub, "oversized_kept")
    assert {Path(d["kept"]).stat().st_size for d in ev["moved"]} == {BIG}
    d = hub.jlane("doctor")
    assert d.rc == 1 and d.code == "doctor_failed"
    fix = next(c["fix"] for c in d.json["checks"] if c["status"] == "fail")
    done = subprocess.run(["sh", "-c", fix], cwd=hub.path, capture_output=True, text=True)
    assert done.returncode == 0, (fix, done.stdout, done.stderr)
    after = hub.jlane("doctor")
    assert after.rc == 0, after.stdout
    assert hub.sha("refs/heads/lane/beta") == hub.sha("refs/heads/lane/alpha")


def test_execs_absorb_never_reads_a_branch_ref_cmd_grew_while_it_runs(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While CMD runs, exec's Absorber looks at the lane's branch every POLL seconds with
    git, which would read a grown ref whole each time: it skips the look until the ref is
    back to a size git writes (CMD's end moves the grown one into kept/)."""
    from guard import objects
    from guard.commands.exec import Absorber
    from guard.repo import Repo as GRepo

    hub.create("alpha")
    repo = GRepo.discover(hub.path)
    rec = repo.store.read_lane("alpha")
    assert rec is not None
    looked: list[str] = []
    monkeypatch.setattr(Absorber, "POLL", 0.02)
    monkeypatch.setattr(objects, "branch_tip", lambda _repo, branch: looked.append(branch))
    ref = hub.common_dir / "refs" / "heads" / "lane" / "alpha"
    text = ref.read_bytes()
    for size, want in ((BIG, []), (len(text), ["lane/alpha"])):
        with open(ref, "r+b") as f:
            f.truncate(size)
        looked.clear()
        absorber = Absorber(repo, rec)
        absorber.start()
        time.sleep(0.3)
        absorber.stop()
        assert sorted(set(looked)) == want, (size, looked)


# Red team 14H-A: what the check missed. CMD detaches its own worktree (HEAD an object
# name) and starts a "bisect" by hand, BISECT_START grown sparse: every worktree listing
# (git worktree add, branch -D/-m, fetch: create, release) reads it whole, get_branch.
BISECT = r"""
set -e
gd=$(git rev-parse --git-dir)
git rev-parse HEAD > "$gd/HEAD.new" && mv "$gd/HEAD.new" "$gd/HEAD"
: > "$gd/BISECT_LOG"
echo lane/alpha > "$gd/BISECT_START"
truncate -s 256M "$gd/BISECT_START"
"""
# ... or a loose ref 31 levels under refs/heads/lane/, past the 24 the check looks into
# (git reads refs at any depth), grown sparse
DEEP = r"""
set -e
d=$(git rev-parse --git-common-dir)/refs/heads/lane/alpha-deep
for i in $(seq 1 30); do d=$d/d$i; done
mkdir -p "$d"
git rev-parse HEAD > "$d/x"
truncate -s 256M "$d/x"
"""


@pytest.mark.parametrize(
    "script, then, kept",
    [
        (BISECT, ("create", "beta"), "BISECT_START"),
        (
            DEEP,
            ("status",),
            "refs/heads/lane/alpha-deep/" + "/".join(f"d{i}" for i in range(1, 25)),
        ),
    ],
    ids=["bisect_start", "deeper_than_the_check_looks"],
)
def test_what_cmd_grew_where_the_check_did_not_look_is_kept_aside_too(
    hub: Repo, tmp_path: Path, script: str, then: tuple[str, ...], kept: str
) -> None:
    """Red team 14H-A F1, F3: exec's check held the admin dir's HEAD, ORIG_HEAD, rebase
    state to a ref's size but not BISECT_START, and looked 24 levels under the lane refs
    only: the owner's next `git lane create` (or status) read 256 MiB whole (20 GB costs
    the lane no disk). Now BISECT_START is held too, and a directory past the levels the
    check looks into goes into kept/ whole, as a grown file does."""
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "f.txt", "work\n")
    body = tmp_path / "grow.sh"
    body.write_text(script)
    r = lane("exec", "--sandbox", "alpha", "--", "sh", str(body), cwd=lane_path)
    assert r.rc == 0, r.stderr
    (ev,) = events(hub, "oversized_kept")
    moved = [str(d["file"]) for d in ev["moved"]]
    assert any(f.endswith(kept) for f in moved), ev
    grown = [
        p
        for p in hub.common_dir.rglob("*")
        if "git-lane" not in p.parts and p.is_file() and p.stat().st_size >= BIG
    ]
    assert not grown, grown
    c = hub.jlane(*then)  # (what read it whole before)
    assert c.rc == 0, c.stdout


# CMD makes, each under its bound (sparse: no disk used), reflogs of no ref under the lane
# refs and per-worktree ones in its admin dir (git gc reads every worktree's), loose refs by
# the thousand beside the branches, and grows its own branch's reflog just under the bound
BULK = r"""
set -e
c=$(git rev-parse --git-common-dir)
gd=$(git rev-parse --git-dir)
tip=$(git rev-parse HEAD)
for i in 1 2 3 4; do truncate -s 30M "$c/logs/refs/heads/lane/junk$i"; done
mkdir -p "$gd/logs/refs/bisect"
truncate -s 31M "$gd/logs/refs/bisect/bad"
truncate -s 63M "$c/logs/refs/heads/lane/alpha"
i=0
while [ $i -lt 1100 ]; do echo "$tip" > "$c/refs/heads/lane/x$i"; i=$((i + 1)); done
"""


def test_what_cmd_makes_in_bulk_under_the_lane_refs_is_held_to_a_total_when_exec_ends(
    hub: Repo, tmp_path: Path
) -> None:
    """Each reflog and ref CMD may write is held to a bound, but not their number: under
    Landlock CMD makes 1100 loose refs beside the branches (every git branch reads them)
    and reflogs of 30 MiB by the handful (git gc reads them all). When CMD ends, what is
    no lane's own is back within STRAY_MAX entries and STRAY_LOG_MAX bytes, the largest
    moved into kept/ (event oversized_kept); the lane's branch and its reflog, however
    big, stay."""
    from guard import oversize

    lane_path = hub.create("alpha")
    tip = hub.commit(lane_path, "f.txt", "work\n")
    body = tmp_path / "bulk.sh"
    body.write_text(BULK)
    r = lane("exec", "--sandbox", "alpha", "--", "sh", str(body), cwd=lane_path)
    assert r.rc == 0, r.stderr
    heads = hub.common_dir / "refs" / "heads" / "lane"
    logs = hub.common_dir / "logs" / "refs" / "heads" / "lane"
    assert (heads / "alpha").read_text().strip() == tip
    assert (logs / "alpha").stat().st_size == 63 << 20, "the lane's own reflog was moved"
    # each pool on its own (red team 15C F3): the lane refs and their reflogs, and the
    # lane's admin dir (its 31 MiB bisect log is within its own bounds: it stays)
    strays = [p for p in [*heads.iterdir(), *logs.iterdir()] if p.name != "alpha"]
    assert len(strays) <= oversize.STRAY_MAX, len(strays)
    size = sum(p.stat().st_size for p in strays if p.is_file())
    assert size <= oversize.STRAY_LOG_MAX, size
    bisect = _admin(lane_path) / "logs" / "refs" / "bisect" / "bad"
    assert bisect.stat().st_size == 31 << 20
    (ev,) = events(hub, "oversized_kept")
    assert all(d.get("bulk") for d in ev["moved"]) and not ev["failed"], ev
    for d in ev["moved"]:  # kept at its path there, nothing lost
        assert Path(d["kept"]).exists() and d["kept"].endswith(d["file"]), d
    assert f"{oversize.STRAY_MAX} entries" in r.stderr, r.stderr
    listed = hub.git("for-each-ref", "--format=%(refname)", "refs/heads/lane/").stdout.split()
    assert "refs/heads/lane/alpha" in listed and len(listed) <= oversize.STRAY_MAX + 1


@needs_modes  # red team 14I
def test_oversize_sets_aside_a_grown_ref_in_a_directory_the_lane_made_unlistable(
    hub: Repo,
) -> None:
    """oversize.set_aside walks refs/heads/lane/ with dirfd.scan and skips what it may not
    open (no `refused`, no owner's bits given back): a sandboxed lane grows its branch ref
    (`truncate -s 20G refs/heads/lane/KEY`) and then `chmod 0100 refs/heads/lane` (both
    granted: the lane refs are the lane's, chmod is no Landlock right). Nothing is moved
    into kept/, and every engine command's `git worktree list` reads the ref whole by name
    (reproduced with 1 GiB under `ulimit -v 900000`: internal error "Out of memory,
    realloc failed" from status and reconcile; the owner's own `git worktree list` too);
    doctor says `ok oversized` all the same. Here a 1 MiB sparse ref (past REF_MAX) stands
    for it."""
    repo = hub
    repo.create("alpha")
    heads = repo.common_dir / "refs" / "heads" / "lane"
    ref = heads / "alpha"
    with open(ref, "r+b") as f:  # what the sandboxed lane writes: its own branch ref
        f.truncate(1 << 20)
    heads.chmod(0o100)
    try:
        st = owner_lane("status", "--json", cwd=repo.path)
        heads.chmod(0o755)
        grown = ref.exists() and ref.stat().st_size > 4096
        assert not grown, (
            "a 1 MiB branch ref in a directory the lane chmodded 0100 was left for git "
            f"to read whole (status rc {st.rc}: {st.stderr[-300:]})"
        )
    finally:
        heads.chmod(0o755)


@needs_modes  # red team 14I
def test_doctor_never_says_no_oversized_ref_where_it_could_not_look(hub: Repo) -> None:
    """The same lane (its branch ref grown past REF_MAX, `chmod 0100 refs/heads/lane`):
    doctor's first check says `ok oversized: no ref, HEAD or reflog a lane may write is
    larger than git writes them` although it could not list the directory, and its later
    checks fail on git's `Out of memory` (1 GiB ref, `ulimit -v 900000`) with no fix. A
    check that cannot establish a fact must refuse (or the file be moved, as it would be
    were the directory listable)."""
    repo = hub
    repo.create("alpha")
    heads = repo.common_dir / "refs" / "heads" / "lane"
    ref = heads / "alpha"
    with open(ref, "r+b") as f:
        f.truncate(1 << 20)
    heads.chmod(0o100)
    try:
        doc = owner_lane("doctor", "--json", cwd=repo.path)
        heads.chmod(0o755)
        grown = ref.exists() and ref.stat().st_size > 4096
        checks = {c["name"]: c for c in json.loads(doc.stdout).get("checks", [])}
        said = checks.get("oversized", {})
        assert not (grown and said.get("status") == "ok"), (
            f"doctor: {said} while refs/heads/lane/alpha is {ref.stat().st_size} bytes"
        )
    finally:
        heads.chmod(0o755)


@needs_modes  # red team 14I
def test_a_deep_lane_ref_directory_the_lane_made_read_only_never_stops_every_command(
    hub: Repo,
) -> None:
    """oversize moves a directory past 24 levels under refs/heads/lane/ whole; renaming a
    directory to another parent needs write on the directory itself (its `..`), and
    owner_may gives the write bit back only to the parent. A sandboxed lane makes
    `refs/heads/lane/c1/.../c24/projects` and `chmod 0500` it (both granted): every engine
    command (set_aside is each one's first step) refuses git_file_oversized, and its
    next, `mkdir -p -- KEPT/... && mv -n -T -- <common>/refs/heads/lane/.../projects
    KEPT/...`, fails as written (mv: Permission denied): the owner is stopped for good."""
    repo = hub
    repo.create("alpha")
    deep = repo.common_dir / "refs" / "heads" / "lane"
    for i in range(1, 25):
        deep = deep / f"c{i}"
    (deep / "projects").mkdir(parents=True)
    (deep / "projects").chmod(0o500)
    try:
        first = owner_lane("status", "--json", cwd=repo.path)
        if first.rc == 1 and json.loads(first.stdout)["code"] == "git_file_oversized":
            for step in json.loads(first.stdout)["next"]:
                if step.startswith("git lane"):
                    break
                subprocess.run(owner_argv("sh", "-c", step), cwd=repo.path, check=False)
        again = owner_lane("status", "--json", cwd=repo.path)
        assert again.rc == 0, f"after the next as written: {again.stdout[:400]}"
    finally:
        if (deep / "projects").exists():
            (deep / "projects").chmod(0o700)


@needs_modes  # red team 14I
def test_oversize_sets_aside_a_grown_file_in_an_admin_dir_the_lane_made_unlistable(
    hub: Repo,
) -> None:
    """The lane's admin dir `worktrees/<id>/` is granted to it as well: an ORIG_HEAD grown
    past REF_MAX there and `chmod 0100` on the admin dir and on `worktrees/` (reached by
    path: chmod is no Landlock right). The owner's status gives each directory its read
    and search bits back, moves the file into kept/, and runs."""
    repo = hub
    lp = repo.create("alpha")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    orig = admin / "ORIG_HEAD"
    with open(orig, "wb") as f:
        f.truncate(1 << 20)
    admin.chmod(0o100)
    admin.parent.chmod(0o100)  # `worktrees/` itself: the owner's, reachable by path
    try:
        st = owner_lane("status", "--json", cwd=repo.path)
        admin.parent.chmod(0o755)
        admin.chmod(0o755)
        assert not orig.exists(), f"status rc {st.rc}: {st.stderr[-300:]}"
        assert st.rc == 0, st.stdout[-400:]
    finally:
        admin.parent.chmod(0o755)
        admin.chmod(0o755)


def _runs_nexts(out: LaneRun, cwd: Path) -> None:
    """Run a git_file_oversized refusal's `next` steps as the owner runs them, up to the
    first that fails."""
    if out.rc == 1 and out.code == "git_file_oversized":
        for step in out.json["next"]:
            done = subprocess.run(owner_argv("sh", "-c", step), cwd=cwd, check=False)
            if done.returncode:
                break


@needs_modes  # red team 15A F1
def test_a_lane_ref_directory_readable_but_not_searchable_never_stops_every_command(
    hub: Repo,
) -> None:
    """A sandboxed lane makes `refs/heads/lane/P/victim` and `chmod 0400 P` (both granted:
    the lane refs are the lane's, chmod is no Landlock right). The check opened P (r is
    enough) and listed it, then could not open `victim`: giving the child its bits back
    through an O_PATH fd needs the parent's search bit too. Every command of a non-root
    owner refused git_file_oversized ("another owner's directory", which it is not) with
    an `mv` that failed as written. Now P gets its owner's bits back through its own fd."""
    repo = hub
    lp = repo.create("alpha")
    r = lane(
        "exec",
        "--sandbox",
        "alpha",
        "--",
        "sh",
        "-c",
        'cd "$(git rev-parse --git-common-dir)/refs/heads/lane" && mkdir -p P/victim '
        "&& chmod 0400 P",
        cwd=lp,
    )
    assert r.rc == 0, r.stderr
    heads = repo.common_dir / "refs" / "heads" / "lane"
    assert (heads / "P").stat().st_mode & 0o777 == 0o400
    try:
        first = owner_lane("status", "--json", cwd=repo.path)
        _runs_nexts(first, repo.path)
        again = owner_lane("status", "--json", cwd=repo.path)
        assert first.rc == 0 and again.rc == 0, (first.stdout[:300], again.stdout[:300])
    finally:
        if (heads / "P").exists():
            (heads / "P").chmod(0o755)


@needs_modes  # red team 15A F1
def test_a_grown_per_worktree_ref_below_an_admin_dir_made_readable_only_is_set_aside(
    hub: Repo,
) -> None:
    """The same for the admin dir: `chmod 0400` on `worktrees/<id>/` and on `worktrees/`
    (reached by path: chmod is no Landlock right), a per-worktree ref grown past REF_MAX
    below it. The owner's status gives each its bits back, moves the ref into kept/, and
    runs."""
    repo = hub
    lp = repo.create("alpha")
    admin = _admin(lp)
    ref = admin / "refs" / "bisect" / "bad"
    ref.parent.mkdir(parents=True)
    ref.write_text(repo.sha() + "\n")
    with open(ref, "r+b") as f:
        f.truncate(1 << 20)
    admin.chmod(0o400)
    admin.parent.chmod(0o400)
    try:
        st = owner_lane("status", "--json", cwd=repo.path)
        _runs_nexts(st, repo.path)
        admin.parent.chmod(0o755)
        admin.chmod(0o755)
        assert not ref.exists(), f"status rc {st.rc}: {st.stdout[-300:]}"
        assert st.rc == 0, st.stdout[-400:]
    finally:
        admin.parent.chmod(0o755)
        admin.chmod(0o755)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root to play an owner of a foreign directory",
)
def test_a_lane_ref_directory_the_owner_cannot_list_is_never_said_to_hold_nothing(
    hub: Repo,
) -> None:
    """A directory under refs/heads/lane/ the owner may neither list nor give its bits
    back (another uid's, mode 0100): oversize could not look, so the engine refuses
    git_file_oversized and doctor FAILs its oversized check; neither says nothing is
    there."""
    repo = hub
    repo.create("alpha")
    heads = repo.common_dir / "refs" / "heads" / "lane"
    other = heads / "other"
    other.mkdir()
    os.chown(other, 65534, 65534)
    other.chmod(0o100)
    # the owner without CAP_FOWNER either: it may not chmod another uid's directory
    pre = [c.replace("dac_read_search", "dac_read_search,-fowner") for c in NODAC]
    try:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*pre, sys.executable, "-m", "guard", *args],
                cwd=repo.path,
                text=True,
                capture_output=True,
                timeout=120,
            )

        st = run("status", "--json")
        assert st.returncode == 1, st.stdout[-400:]
        out = json.loads(st.stdout)
        assert out["code"] == "git_file_oversized", out
        assert out["details"]["failed"][0]["file"] == "refs/heads/lane/other", out
        # no shell mv by a path a lane can re-point (red team 15A F1b): the check again,
        # once uid 65534 (named) or root removed it
        assert out["next"] == ["git lane status"], out
        assert out["details"]["uids"] == {"refs/heads/lane/other": 65534}, out
        doc = json.loads(run("doctor", "--json").stdout)  # refused as every command, or FAIL
        said = {c["name"]: c for c in doc.get("checks", [])}.get("oversized", {})
        assert doc.get("code") == "git_file_oversized" or said.get("status") == "fail", doc
    finally:
        os.chown(other, 0, 0)
        other.chmod(0o755)
