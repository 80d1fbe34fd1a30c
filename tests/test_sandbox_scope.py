"""What the sandbox keeps CMD from reaching besides files (red team of issue 11, findings
5-9): the shared temp dir (another lane's clean gate worktree), the owner's terminal
(TIOCSTI), processes outside the sandbox (signals), a root CMD's capabilities, and the
land socket's supervisor (no traceback on any request). Real kernel, real processes;
skipped only where the kernel has no usable Landlock."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandboxhelp import NEEDS_LANDLOCK
from conftest import LaneRun, Repo

from guard import sandbox, seccomp

_ABI = sandbox.abi()
pytestmark = NEEDS_LANDLOCK


def _exec(
    hub: Repo, tmp_path: Path, body: str, *args: str, key: str = "alpha", **kw: object
) -> LaneRun:
    script = tmp_path / f"body-{key}.sh"
    script.write_text(body)
    return hub.lane("exec", "--sandbox", key, "--", "sh", str(script), *args, **kw)  # type: ignore[arg-type]


# -- finding 5: the temp dir ------------------------------------------------------------------
def test_private_temp_dir_and_shared_one_not_writable(hub: Repo, tmp_path: Path) -> None:
    """CMD's TMPDIR/TMP/TEMP name a fresh 0700 dir under exec's temp dir, removed after;
    the shared temp dir itself is not writable (here one outside the repository), and
    python's tempfile and a cache dir still work."""
    tmp = tmp_path / "shared-tmp"
    tmp.mkdir()
    hub.create("alpha")
    body = r"""
echo "TMPDIR=$TMPDIR TMP=$TMP TEMP=$TEMP"
stat -c 'MODE %a' "$TMPDIR"
echo x > "$1/planted" 2>/dev/null && echo CASE shared_writable
python3 -c 'import tempfile; f = tempfile.NamedTemporaryFile(); f.write(b"x"); print("PY", f.name)'
mkdir -p "$XDG_CACHE_HOME/scope-test" && echo cached > "$XDG_CACHE_HOME/scope-test/f" && echo CACHE ok
"""
    r = _exec(hub, tmp_path, body, str(tmp), env={"TMPDIR": str(tmp)})
    assert r.rc == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("TMPDIR="))
    private = line.split()[0].split("=", 1)[1]
    assert private.startswith(str(tmp) + "/git-lane-alpha-"), line
    assert line == f"TMPDIR={private} TMP={private} TEMP={private}"
    assert "MODE 700" in r.stdout
    assert f"PY {private}/" in r.stdout
    assert "CACHE ok" in r.stdout
    assert "CASE" not in r.stdout and not (tmp / "planted").exists()
    assert not os.path.exists(private), "the private temp dir outlived CMD"


def test_clean_gate_worktree_of_another_lane_out_of_reach(hub: Repo, tmp_path: Path) -> None:
    """Red team finding 5: lane alpha's sandboxed process watches the shared temp dir for
    the owner's `gate_worktree = "clean"` checkout of lane beta and rewrites its gate
    script. It no longer can: the failing lane is not landed, no rewritten script runs."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    (hub.path / "check.sh").write_text("exit 1\n")  # the gate fails every tip
    hub.git("add", "check.sh")
    hub.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "gate script")
    hub.config("gate_worktree", "clean")
    hub.config("gate_command", "sleep 3; sh check.sh")
    hub.create("alpha")
    beta = hub.create("beta")
    hub.commit(beta, "b.txt", "b\n")
    evidence = tmp_path / "evidence"
    seen = tmp_path / "seen"
    watch = tmp_path / "watch.sh"
    watch.write_text(
        'end=$(( $(date +%s) + 20 ))\nwhile [ "$(date +%s)" -lt $end ]; do\n'
        '  for d in "$1"/git-lane-gate-*; do\n'
        '    if [ -f "$d/check.sh" ] && ! grep -q tampered "$d/check.sh"; then\n'
        '      printf "# tampered\\necho ran >> \'%s\'\\nexit 0\\n" "$2" > "$d/check.sh"\n'
        "    fi\n  done\n  sleep 0.1\ndone\n"
    )
    full = {**os.environ, **env}
    cmd = [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--", "sh"]
    attacker = subprocess.Popen(
        [*cmd, str(watch), str(tmp), str(evidence), str(seen)], cwd=hub.path, env=full
    )
    try:
        time.sleep(2)
        main_before = hub.sha()
        r = hub.lane("land", "beta", env=env)
        assert r.rc != 0, r.stdout + r.stderr
        assert hub.sha() == main_before, "a lane whose gate fails was landed"
        assert not evidence.exists(), "the tampered gate ran outside the sandbox"
    finally:
        attacker.kill()
        attacker.wait()


# -- red team 13U, finding 4: code the owner runs later --------------------------------------
def _private_cache(hub: Repo, key: str = "alpha") -> Path:
    from guard.repo import Repo as GRepo

    cache = Path(os.environ["XDG_CACHE_HOME"]).resolve()
    return cache / "git-lane-sandbox" / GRepo.discover(hub.path).slug / key


def test_pre_commits_hook_clones_in_the_owners_cache_are_out_of_cmds_reach(
    hub: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 13U finding 4. pre-commit clones each hook repository into the owner's
    cache dir (`$XDG_CACHE_HOME/pre-commit/repo*`) and runs the hook from that clone,
    unconfined, at the owner's next `pre-commit run`. The owner's cache dir is not
    writable from the sandbox: CMD gets its own (XDG_CACHE_HOME, PRE_COMMIT_HOME in it),
    kept between its runs, and the owner's hook clone stays as pre-commit made it."""
    import shutil

    if shutil.which("pre-commit") is None:
        pytest.skip("pre-commit is not installed")
    monkeypatch.delenv("PRE_COMMIT_HOME", raising=False)
    hooks = tmp_path / "hookrepo"
    hooks.mkdir()
    (hooks / ".pre-commit-hooks.yaml").write_text(
        "- id: check\n  name: check\n  entry: ./check.sh\n  language: script\n"
        "  pass_filenames: false\n"
    )
    (hooks / "check.sh").write_text("#!/bin/sh\necho checked\n")
    (hooks / "check.sh").chmod(0o755)
    subprocess.run(["git", "init", "-q"], cwd=hooks, check=True)
    subprocess.run(["git", "add", "-A"], cwd=hooks, check=True)
    subprocess.run(["git", "commit", "-qm", "hooks"], cwd=hooks, check=True)
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=hooks, capture_output=True, text=True, check=True
    ).stdout.strip()
    (hub.path / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hooks}\n  rev: {rev}\n  hooks:\n  - id: check\n"
    )
    first = subprocess.run(
        ["pre-commit", "run", "--all-files"], cwd=hub.path, capture_output=True, text=True
    )
    assert first.returncode == 0, first.stdout + first.stderr
    owners = Path(os.environ["XDG_CACHE_HOME"]) / "pre-commit"
    assert list(owners.glob("repo*/check.sh"))
    lane_path = hub.create("alpha")
    marker = tmp_path / "PWNED"
    direct = tmp_path / "direct"
    body = (
        f'touch {direct} 2>/dev/null; echo "CACHE $XDG_CACHE_HOME $PRE_COMMIT_HOME"; '
        f"for f in {owners}/repo*/check.sh; do "
        f"printf '#!/bin/sh\\nid > {marker}\\n' > \"$f\" && echo REWROTE; done; "
        'mkdir -p "$XDG_CACHE_HOME/pip" && echo kept > "$XDG_CACHE_HOME/pip/f"; exit 0'
    )
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", body, cwd=lane_path)
    assert r.rc == 0 and not direct.exists(), (r.stdout, r.stderr)  # CMD itself is confined
    own = _private_cache(hub)
    assert f"CACHE {own} {own}/pre-commit" in r.stdout, r.stdout
    assert "REWROTE" not in r.stdout, r.stdout
    subprocess.run(["pre-commit", "run", "--all-files"], cwd=hub.path, capture_output=True)
    assert not marker.exists(), "the owner's pre-commit ran code a sandboxed CMD wrote"
    # CMD's own cache dir: 0700, kept between runs, gone with the lane
    assert (own / "pip" / "f").read_text() == "kept\n"
    assert own.stat().st_mode & 0o777 == 0o700
    again = hub.lane("exec", "--sandbox", "alpha", "--", "cat", str(own / "pip" / "f"))
    assert again.stdout == "kept\n", again.stderr
    done = hub.lane("release", "alpha", "--confirm", "yes-discard-lane")
    assert done.rc == 0, done.stderr
    assert not own.exists(), "CMD's cache dir outlived its lane"


def test_git_lane_run_from_the_cache_dir_is_out_of_cmds_reach(hub: Repo, tmp_path: Path) -> None:
    """Red team 13U finding 4, git-lane's own case. A git-lane run the way `uvx` runs a
    tool lives in the cache dir (`~/.cache/uv/archive-v0/<id>/.../guard`), and so do the
    hooks' GITLANE_PYPATH and the land socket's child. A sandboxed CMD cannot append to
    that guard package: the owner's next `git lane status` runs it as it was."""
    import shutil

    from conftest import ROOT

    site = Path(os.environ["XDG_CACHE_HOME"]) / "uv" / "archive-v0" / "x1" / "site-packages"
    site.mkdir(parents=True)
    for part in ("guard", "hooks", "shims", "install"):  # as a wheel has them (resources.py)
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, site / part)
    lane_path = hub.create("alpha")
    marker = tmp_path / "PWNED"
    payload = tmp_path / "payload.py"
    payload.write_text(f"\nopen({str(marker)!r}, 'w').write('owner ran it')\n")
    body = f"cat {payload} >> {site}/guard/__init__.py && echo APPENDED; exit 0"
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", body, cwd=lane_path)
    assert r.rc == 0 and "APPENDED" not in r.stdout, (r.stdout, r.stderr)
    owner_env = {**os.environ, "PYTHONPATH": str(site)}  # the owner's git-lane, from the cache
    ran = subprocess.run(
        [sys.executable, "-m", "guard", "status"], cwd=hub.path, env=owner_env,
        capture_output=True, text=True,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert not marker.exists(), "the owner's git-lane ran code a sandboxed CMD appended to it"


def test_a_grant_of_the_code_git_lane_runs_is_refused(hub: Repo, tmp_path: Path) -> None:
    """No `sandbox_writable` entry may enclose or lie in the code the owner runs outside
    the sandbox: git-lane's own package, its python, the hooks' GITLANE_PYPATH, or
    pre-commit's hook clones (PRE_COMMIT_HOME): refused (sandbox_failed), nothing run,
    and the printed next (the other entries kept) lets exec run."""
    import guard

    lane_path = hub.create("alpha").resolve()
    ok = tmp_path / "agent"
    ok.mkdir()
    pkg = Path(guard.__file__).resolve().parent
    pre = Path(os.environ["XDG_CACHE_HOME"]) / "pre-commit"
    pre.mkdir(parents=True)
    ran = lane_path / "ran"
    for bad in (pkg, pkg / "commands", Path(sys.prefix), pre, pre / "repoabc"):
        hub.config("sandbox_writable", f"{ok},{bad}")
        r = hub.lane("--json", "exec", "--sandbox", "alpha", "--", "touch", str(ran))
        assert (r.rc, r.code) == (1, "sandbox_failed"), (bad, r.stdout, r.stderr)
        assert "code the owner runs" in r.json["message"], r.json["message"]
        assert not ran.exists()
        (fix,) = r.json["next"][:1]
        assert fix == f"git lane config set sandbox_writable {ok}", r.json["next"]
    assert hub.lane(*fix.split()[2:]).rc == 0  # the next, as printed
    done = hub.lane("exec", "--sandbox", "alpha", "--", "touch", str(ran))
    assert done.rc == 0 and ran.exists(), done.stderr


# -- red team 13U, finding 6: /dev/shm ----------------------------------------------------------
def test_a_repository_under_dev_shm_stays_out_of_the_sandboxs_reach(
    gitlane_on_path: Path, tmp_path: Path
) -> None:
    """Red team 13U finding 6. `/dev/shm` (granted for shm_open) passes the fence like
    every other grant: for a repository that lives in /dev/shm (a RAM disk, CI) it is left
    out, --explain says so, and a sandboxed CMD can write neither main's ref nor the hub."""
    import shutil
    import tempfile

    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    base = Path(tempfile.mkdtemp(prefix="rt13u-", dir="/dev/shm"))
    try:
        hub = Repo(base / "hub")
        hub.path.mkdir()
        hub.git("init", "-q", "-b", "main")
        hub.commit(hub.path, "a.txt", "base\n")
        assert hub.lane("install").rc == 0
        hub.config("gate_command", "true")
        lane_path = hub.create("alpha")
        main = hub.sha()
        common = hub.common_dir
        body = (
            "/usr/bin/git -c core.hooksPath=/dev/null commit -q --allow-empty -m x; "
            f"git rev-parse HEAD > {common}/refs/heads/main; "
            f"printf pwned > {hub.path}/a.txt; exit 0"
        )
        r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", body, cwd=lane_path)
        assert r.rc == 0, r.stderr
        moved = subprocess.run(
            ["git", "rev-parse", "main"], cwd=hub.path, capture_output=True, text=True
        ).stdout.strip()
        hub_file = (hub.path / "a.txt").read_text()
        assert (moved, hub_file) == (main, "base\n"), (r.stdout, r.stderr)
        j = hub.lane("--json", "exec", "--sandbox", "--explain", "alpha").json
        assert "/dev/shm" not in j["writable"], j["writable"]
        assert any(n.startswith("/dev/shm is not writable") for n in j["notes"]), j["notes"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_dev_shm_holding_the_temp_dir_is_not_granted(hub: Repo) -> None:
    """TMPDIR=/dev/shm: /dev/shm holds the engine's shared temp files (clean gate
    worktrees, land socket dirs), so it is not granted; CMD's private temp dir in it is,
    and CMD cannot write next to it."""
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    hub.create("alpha")
    env = {"TMPDIR": "/dev/shm"}
    j = hub.lane("--json", "exec", "--sandbox", "--explain", "alpha", env=env).json
    assert "/dev/shm" not in j["writable"], j["writable"]
    name = f"/dev/shm/gitlane-fixE-{os.getpid()}"
    body = f'printf x > "$TMPDIR/ok" && echo PRIVATE; printf x > {name} && echo SHARED; exit 0'
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", body, env=env)
    try:
        assert "PRIVATE" in r.stdout and "SHARED" not in r.stdout, (r.stdout, r.stderr)
    finally:
        if os.path.exists(name):
            os.unlink(name)


# -- finding 6: TIOCSTI ------------------------------------------------------------------------
INJECT = """import fcntl, sys, termios
try:
    for b in (sys.argv[1] + "\\n").encode():
        fcntl.ioctl(0, termios.TIOCSTI, bytes([b]))
    print("INJECTED")
except OSError as e:
    print("REFUSED", e.errno)
"""


def test_tiocsti_cannot_type_into_the_owners_shell(hub: Repo, tmp_path: Path) -> None:
    """Red team finding 6, under a pty: CMD's ioctl(TIOCSTI) on the owner's terminal
    fails with EPERM (the seccomp filter), so nothing is typed into the owner's shell."""
    import pty
    import select

    hub.create("alpha")
    cfg = hub.common_dir / "config"
    before = cfg.read_text()
    inject = tmp_path / "inject.py"
    inject.write_text(INJECT)
    line = f"echo '# typed by the lane' >> '{cfg}'"
    pid, fd = pty.fork()
    if pid == 0:  # the owner's interactive shell
        os.chdir(hub.path)
        os.execvp("sh", ["sh", "-i"])
    seen: list[bytes] = []
    try:
        cmd = f"git lane exec alpha --sandbox -- python3 '{inject}' \"{line}\"\n"
        os.write(fd, cmd.encode())
        end = time.time() + 8
        while time.time() < end and not re.search(rb"(REFUSED|INJECTED).*\n", b"".join(seen)):
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    seen.append(os.read(fd, 65536))
                except OSError:
                    break
        time.sleep(1)
        os.write(fd, b"exit\n")
    finally:
        time.sleep(0.5)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
    out = b"".join(seen).decode(errors="replace")
    assert "REFUSED 1" in out, out
    assert cfg.read_text() == before, out


def test_seccomp_program_shape() -> None:
    """The filter checks the ABI first and knows x86_64 (with x32) and aarch64; any other
    machine has none, which exec refuses (sandbox_failed) rather than run unfiltered."""
    x86 = seccomp.program("x86_64")
    assert x86[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
    ks = {k for _, _, _, k in x86}
    assert {0xC000003E, 0x40000003, 16, 0x40000000 | 16, 0x40000000 | 514} <= ks
    assert {seccomp.TIOCSTI, seccomp.TIOCLINUX} <= ks
    assert {0xC00000B7, 29} <= {k for _, _, _, k in seccomp.program("aarch64")}
    with pytest.raises(sandbox.SandboxError):
        seccomp.program("riscv64")


def test_no_seccomp_filter_refuses(
    hub: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the filter cannot be had, --sandbox refuses sandbox_failed: CMD never runs."""
    from guard.commands import exec as exec_cmd
    from guard.errors import Refusal
    from guard.repo import Repo as GRepo

    hub.create("alpha")
    monkeypatch.setattr(seccomp, "ARCHES", {})  # as on a machine we have no table for
    marker = tmp_path / "ran"
    with pytest.raises(Refusal) as exc:
        exec_cmd.run(GRepo.discover(hub.path), "alpha", ["touch", str(marker)], sandbox=True)
    assert exc.value.code == "sandbox_failed"
    assert "no seccomp filter" in exc.value.message
    assert not marker.exists()


# -- finding 8: signals and abstract sockets ---------------------------------------------------
def test_signals_do_not_reach_processes_outside(hub: Repo, tmp_path: Path) -> None:
    """Red team finding 8 (Landlock ABI 6): CMD cannot signal a process outside its
    sandbox, but still signals its own children; exec still passes a signal on to CMD."""
    if _ABI < sandbox.SCOPE_ABI:
        pytest.skip("signal scoping needs Landlock ABI 6")
    hub.create("alpha")
    victim = subprocess.Popen(["sleep", "60"])
    try:
        body = (
            f"kill -TERM {victim.pid} 2>/dev/null && echo CASE outside\n"
            'sleep 30 & kid=$!\nkill -TERM $kid && wait $kid; echo "child=$?"\n'
        )
        r = _exec(hub, tmp_path, body)
        time.sleep(0.3)
        assert victim.poll() is None, "a sandboxed process killed a process outside it"
        assert "CASE" not in r.stdout and "child=143" in r.stdout, r.stdout + r.stderr
    finally:
        victim.kill()
        victim.wait()
    # the supervisor (outside) forwards SIGTERM to CMD (inside)
    script = tmp_path / "trap.sh"
    script.write_text(
        "trap 'echo got-term; kill $!; exit 7' TERM\necho ready\nsleep 30 >/dev/null & wait\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--", "sh", str(script)],
        cwd=hub.path,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(15)
    out, _ = p.communicate(timeout=20)
    assert "got-term" in out and p.returncode == 7, (out, p.returncode)


def test_abstract_socket_outside_unreachable(hub: Repo, tmp_path: Path) -> None:
    """ABI 6: CMD cannot connect to an abstract Unix socket a process outside serves."""
    if _ABI < sandbox.SCOPE_ABI:
        pytest.skip("abstract socket scoping needs Landlock ABI 6")
    import socket

    hub.create("alpha")
    name = f"git-lane-scope-{os.getpid()}"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind("\0" + name)
    srv.listen(1)
    try:
        client = tmp_path / "client.py"
        client.write_text(
            "import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
            "try:\n    s.connect('\\0' + sys.argv[1]); print('CONNECTED')\n"
            "except OSError as e:\n    print('REFUSED', e.errno)\n"
        )
        r = hub.lane("exec", "--sandbox", "alpha", "--", "python3", str(client), name)
        assert "REFUSED" in r.stdout, r.stdout + r.stderr
    finally:
        srv.close()


# -- finding 7: pointers at servers outside ------------------------------------------------
def test_server_pointers_unset_in_sandbox(hub: Repo) -> None:
    hub.create("alpha")
    env = {"TMUX": "/tmp/tmux-0/default,1,0", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"}
    show = ["sh", "-c", 'echo "tmux=${TMUX-unset} dbus=${DBUS_SESSION_BUS_ADDRESS-unset}"']
    r = hub.lane("exec", "--sandbox", "alpha", "--", *show, env=env)
    assert "tmux=unset dbus=unset" in r.stdout, r.stdout + r.stderr


# -- LOW: a root CMD's capabilities -------------------------------------------------------------
def test_root_cmd_has_no_capabilities(hub: Repo, tmp_path: Path) -> None:
    """As root, CMD (and what it execs) holds no capability; lane work still works."""
    if os.geteuid() != 0:
        pytest.skip("runs as root only")
    hub.create("alpha")
    body = r"""
grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status
echo w > w.txt && git add w.txt && git commit -qm w && echo COMMIT ok
git rebase -q main && echo REBASE ok
python3 -c 'print("PY ok")'
"$GITLANE_PYTHON" -c '
import os, sys
sys.path.insert(0, os.environ["GITLANE_PYPATH"])
from guard import seccomp
s = seccomp.prepare()
s()
print("RESEAL", s.drop_caps)
'
"""
    r = _exec(hub, tmp_path, body)
    assert r.rc == 0, r.stderr
    caps = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("Cap")]
    assert caps == ["0000000000000000"] * 4, r.stdout
    # a sandbox inside the sandbox has nothing left to drop, and seals again
    for ok in ("COMMIT ok", "REBASE ok", "PY ok", "RESEAL False"):
        assert ok in r.stdout, r.stdout + r.stderr


# -- finding 9: the supervisor never tracebacks ---------------------------------------------
@pytest.mark.parametrize(
    "raw",
    [
        b'{"lane": null, "sync": false, "json": false, "wait": 1' + b"0" * 400 + b"}\n",
        b"[" * 3000 + b"\n",
    ],
    ids=["bigint-wait", "deep-nesting"],
)
def test_land_socket_bad_request_refused(hub: Repo, tmp_path: Path, raw: bytes) -> None:
    """Red team finding 9: a `wait` too large for a float or deep nesting is refused
    (land_via_supervisor_failed), never a traceback; exec goes on."""
    hub.create("alpha")
    hub.config("worker_land", "allow")
    client = tmp_path / "client.py"
    client.write_text(
        "import os, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['GITLANE_LAND_SOCKET'])\n"
        f"s.sendall({raw!r}); s.settimeout(5); d = s.recv(65536)\n"
        "print('reply', d); print('still here')\n"
    )
    r = hub.lane("exec", "--sandbox", "alpha", "--", "python3", str(client))
    assert "Traceback" not in r.stderr, r.stderr
    assert "land_via_supervisor_failed" in r.stdout and "bad_request" in r.stdout, r.stdout
    assert "still here" in r.stdout and r.rc == 0


def test_land_socket_any_error_refused_and_logged(hub: Repo, tmp_path: Path) -> None:
    """Any other exception while serving a request (here the repository cannot be read:
    its git-lane config is not TOML) becomes a refusal frame (reason `error`) and a logged
    event; exec ends with CMD's status."""
    hub.create("alpha")
    hub.config("worker_land", "allow")
    client = tmp_path / "client.py"
    client.write_text(
        "import os, socket\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['GITLANE_LAND_SOCKET'])\n"
        's.sendall(b\'{"lane": null, "sync": false, "json": false, "wait": null}\\n\')\n'
        "s.settimeout(10); d = s.recv(65536); print('reply', d[5:])\n"
    )
    from guard.landsock import Server

    def boom(self: Server, req: object) -> list[str]:
        raise RuntimeError("injected")

    # a real supervisor in this process, its request handling made to fail
    from guard.commands import exec as exec_cmd
    from guard.repo import Repo as GRepo

    mp = pytest.MonkeyPatch()
    mp.setattr(Server, "_args", boom)
    try:
        res = exec_cmd.run(
            GRepo.discover(hub.path), "alpha", ["python3", str(client)], sandbox=True
        )
    finally:
        mp.undo()
    assert res["exit_status"] == 0
    events = (hub.common_dir / "git-lane" / "events.jsonl").read_text().splitlines()
    errs = [json.loads(e) for e in events if '"land_via_supervisor"' in e]
    assert errs and errs[-1]["code"] == "error" and "injected" in errs[-1]["error"], errs


def test_socket_land_gate_sealed_like_cmd(hub: Repo) -> None:
    """The gate of a land CMD asks for runs under the lane's sandbox (guard/commands/land.py)
    and also under CMD's seccomp filter, private TMP/TEMP and, as root, no capabilities:
    the gate passes only if it finds all three."""
    from enginehelp import head, ready_lane
    from test_sandbox import _socket_land

    hub.config("worker_land", "allow")
    hub.config(
        "gate_command",
        "grep -q '^Seccomp:[[:space:]]*2' /proc/self/status && "
        "grep -q '^CapEff:[[:space:]]*0000000000000000' /proc/self/status && "
        'case "$TMP" in */git-lane-alpha-*) true;; *) false;; esac',
    )
    path = ready_lane(hub, "alpha")
    r = _socket_land(hub)
    assert r.rc == 0, r.stdout + r.stderr
    assert hub.sha() == head(path)


def test_a_write_the_sandbox_denies_is_a_refusal_not_a_bug(hub: Repo) -> None:
    """A git-lane command inside the sandbox that needs git-lane's state (a nested exec
    takes the registry lock) is refused sandbox_denied, with the owner's command; no
    crash file, no exit 3."""
    hub.create("alpha")
    r = hub.lane("exec", "alpha", "--sandbox", "--", "sh", "-c", "git lane exec alpha -- true")
    assert r.rc == 1, r.stderr
    assert "git-lane: refused [sandbox_denied]" in r.stderr
    assert "Next: git lane exec alpha -- true  # as the repository owner" in r.stderr
    assert "internal error" not in r.stderr


def test_a_sandboxed_worker_marks_its_lane_ready_through_its_supervisor(hub: Repo) -> None:
    """git-lane's state is out of the sandbox's reach: `git lane ready` inside goes to the
    supervisor, which marks the lane as that worker's word; the owner's queue lands it."""
    hub.create("alpha")
    script = (
        "echo work > w.txt && git add w.txt && git commit -q -m work && "
        "git lane ready --unset && git lane ready --json"
    )
    r = hub.lane("exec", "alpha", "--sandbox", "--", "sh", "-c", script)
    assert r.rc == 0, r.stderr
    mark = json.loads(r.stdout.splitlines()[-1])["mark"]
    assert (mark["by"], mark["current"]) == ("worker", True)
    other = hub.lane("exec", "alpha", "--sandbox", "--", "git", "lane", "ready", "beta")
    assert other.rc == 1 and "role_forbidden" in other.stderr
    q = hub.jlane("queue")
    assert (q.rc, q.json["landed"]) == (0, ["alpha"]), q.stdout + q.stderr
