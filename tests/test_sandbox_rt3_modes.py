"""Red team round 3 of issue 11, finding 3: file modes under `git lane exec --sandbox`.
No file becomes setuid or setgid from the sandbox (the seccomp filter, whoever runs CMD);
a root CMD can still change the other mode bits of files root owns, outside its grants
too (chmod needs no capability for a file's owner): exec warns, doctor notes it, and
docs/trust-boundary.md says so. Real kernel, real processes, the real CLI."""

from __future__ import annotations

import json
import os
import shlex
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo, needs_modes, owner_argv
from sandboxhelp import NEEDS_LANDLOCK

from guard import seccomp
from guard.commands.exec import ROOT_MODES

# every way CMD could try to make a file in its lane setuid/setgid, and what must still work
MODES = r"""
import ctypes, errno, os, stat, subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sh(cmd):
    r = subprocess.run(["sh", "-c", cmd + " 2>/dev/null"])
    print(cmd, "->", "ok" if r.returncode == 0 else "refused")
def call(what, f):
    try:
        f()
        print(what, "-> ok")
    except OSError as e:
        print(what, "->", errno.errorcode[e.errno])
def raw(what, *args):
    res = libc.syscall(*args)
    print(what, "->", "ok" if res >= 0 else errno.errorcode[ctypes.get_errno()])
open("prog", "w").write("#!/bin/sh\necho ran\n")
for m in ("4755", "2755", "6755", "u+s", "g+s"):
    sh("chmod " + m + " prog")
sh("chmod +x prog")
sh("chmod 700 prog")
sh("chmod 755 prog")
call("os.chmod 04755", lambda: os.chmod("prog", 0o4755))
fd = os.open("prog", os.O_RDONLY)
call("fchmod 02755", lambda: os.fchmod(fd, 0o2755))
call("fchmod 0755", lambda: os.fchmod(fd, 0o755))
raw("fchmodat2 04755", 452, -100, b"prog", 0o4755, 0)
call("creat-open 04755", lambda: os.open("made", os.O_CREAT | os.O_WRONLY, 0o4755))
call("creat-open 0644", lambda: os.open("made2", os.O_CREAT | os.O_WRONLY, 0o644))
call("plain-open mode 04755", lambda: os.open("prog", os.O_RDONLY, 0o4755))
call("mknod 04644", lambda: os.mknod("node", stat.S_IFREG | 0o4644))
how = ctypes.create_string_buffer(24)  # struct open_how: flags, mode, resolve
raw("openat2", 437, -100, b"made3", how, 24)
params = ctypes.create_string_buffer(120)
raw("io_uring_setup", 425, 1, params)
print("MODE", oct(os.stat("prog").st_mode))
"""


@NEEDS_LANDLOCK
def test_setuid_setgid_refused_in_the_lane_plain_chmod_works(hub: Repo, tmp_path: Path) -> None:
    """Inside its own lane CMD cannot set S_ISUID/S_ISGID by any chmod, a creating open
    or mknod (EPERM); openat2 is ENOSYS and io_uring_setup EPERM; chmod +x and other plain
    mode changes work (agents need them)."""
    lane_path = hub.create("alpha")
    body = tmp_path / "modes.py"
    body.write_text(MODES)
    r = hub.lane("exec", "--sandbox", "alpha", "--", "python3", str(body), cwd=lane_path)
    assert r.rc == 0, r.stderr
    out = r.stdout
    for refused in (
        "chmod 4755 prog -> refused",
        "chmod 2755 prog -> refused",
        "chmod 6755 prog -> refused",
        "chmod u+s prog -> refused",
        "chmod g+s prog -> refused",
        "os.chmod 04755 -> EPERM",
        "fchmod 02755 -> EPERM",
        "fchmodat2 04755 -> EPERM",
        "creat-open 04755 -> EPERM",
        "mknod 04644 -> EPERM",
        "openat2 -> ENOSYS",
        "io_uring_setup -> EPERM",
    ):
        assert refused in out, out + r.stderr
    for works in (
        "chmod +x prog -> ok",
        "chmod 700 prog -> ok",
        "chmod 755 prog -> ok",
        "fchmod 0755 -> ok",
        "creat-open 0644 -> ok",
        "plain-open mode 04755 -> ok",  # no O_CREAT: the mode is not used
    ):
        assert works in out, out + r.stderr
    assert "MODE 0o100755" in out, out
    assert not (lane_path / "made").exists()
    assert not (lane_path / "node").exists()


@NEEDS_LANDLOCK
def test_root_cmd_can_still_change_modes_of_root_owned_files_documented(
    hub: Repo, tmp_path: Path
) -> None:
    """What docs/trust-boundary.md says of a root CMD: it owns every root-owned file, and
    chmod needs no capability for the owner, so it can still make a mode-000 root file
    outside its grants readable and read it; exec says so in a warning line and doctor in
    its landlock line. It cannot make a root program setuid (the filter)."""
    if os.geteuid() != 0:
        pytest.skip("runs as root only")
    lane_path = hub.create("alpha")
    out = tmp_path / "outside"
    out.mkdir()
    secret = out / "secret"
    secret.write_text("top secret\n")
    secret.chmod(0)
    prog = out / "prog"
    prog.write_bytes(Path("/bin/true").read_bytes())
    prog.chmod(0o755)
    body = tmp_path / "chmod.sh"
    body.write_text(
        'chmod 644 "$1" && cat "$1"\n'
        'chmod 4755 "$2" 2>/dev/null || echo SETUID refused\n'
        'chmod 2755 "$2" 2>/dev/null || echo SETGID refused\n'
    )
    r = hub.lane(
        "exec", "--sandbox", "alpha", "--", "sh", str(body), str(secret), str(prog), cwd=lane_path
    )
    assert r.rc == 0, r.stderr
    assert f"git-lane: warning: {ROOT_MODES}" in r.stderr.splitlines(), r.stderr
    # the remaining behaviour, documented: a root CMD reads past a root file's mode
    assert "top secret" in r.stdout, r.stdout
    assert secret.stat().st_mode & 0o777 == 0o644
    # but no setuid/setgid root program
    assert "SETUID refused" in r.stdout and "SETGID refused" in r.stdout, r.stdout
    assert prog.stat().st_mode & 0o7777 == 0o755
    doc = (Path(__file__).parent.parent / "docs" / "trust-boundary.md").read_text()
    assert "a root CMD can change the mode bits of any root-owned file" in doc
    assert "cannot `chattr`, mount, read past" not in doc
    d = hub.lane("doctor")
    assert "CMD can still change the mode bits of files root owns" in d.stdout, d.stdout


def test_unsandboxed_exec_has_no_root_warning(hub: Repo) -> None:
    """The warning is the sandbox's: a plain exec does not print it."""
    hub.create("alpha")
    r = hub.lane("exec", "alpha", "--", "true")
    assert r.rc == 0, r.stderr
    assert ROOT_MODES not in r.stderr


# -- the filter on the ABIs this machine cannot run: a classic BPF interpreter -------------
def _run(prog: list[tuple[int, int, int, int]], arch: int, nr: int, args: list[int]) -> int:
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(args + [0] * (6 - len(args))))
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == 0x20:
            (acc,) = struct.unpack_from("=I", data, k)
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x45:
            pc += jt if acc & k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unknown opcode {code:#x}")


ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050001, 0x00050026
X86, X32, I386, ARM64, ARM = 0xC000003E, 0x40000000, 0x40000003, 0xC00000B7, 0x40000028
CREAT, TMPFILE = 0o100, 0o20200000


@pytest.mark.parametrize(
    ("machine", "arch", "nr", "args", "want"),
    [
        ("x86_64", X86, 90, [0, 0o4755], EPERM),  # chmod
        ("x86_64", X86, 90, [0, 0o755], ALLOW),
        ("x86_64", X86, 91, [3, 0o2000], EPERM),  # fchmod
        ("x86_64", X86, 268, [0, 0, 0o6755], EPERM),  # fchmodat
        ("x86_64", X86, 268, [0, 0, 0o777], ALLOW),
        ("x86_64", X86, 2, [0, CREAT, 0o4755], EPERM),  # open
        ("x86_64", X86, 2, [0, 0, 0o4755], ALLOW),
        ("x86_64", X86, 257, [0, 0, TMPFILE, 0o2755], EPERM),  # openat
        ("x86_64", X86, 257, [0, 0, CREAT, 0o644], ALLOW),
        ("x86_64", X86, 85, [0, 0o4700], EPERM),  # creat
        ("x86_64", X86, 259, [0, 0, 0o104755, 0], EPERM),  # mknodat
        ("x86_64", X86, 437, [0, 0, 0, 24], ENOSYS),  # openat2
        ("x86_64", X86, 16, [0, seccomp.TIOCSTI], EPERM),
        ("x86_64", X86, 16, [0, 0x5413], ALLOW),  # TIOCGWINSZ
        ("x86_64", X86, 0, [0, 0o4755], ALLOW),  # read: not checked
        ("x86_64", X86, X32 | 90, [0, 0o4755], EPERM),  # x32 chmod
        ("x86_64", X86, X32 | 257, [0, 0, CREAT, 0o4755], EPERM),
        ("x86_64", X86, X32 | 425, [1, 0], EPERM),  # x32 io_uring_setup
        ("x86_64", I386, 15, [0, 0o4755], EPERM),  # i386 chmod
        ("x86_64", I386, 306, [0, 0, 0o2755], EPERM),  # i386 fchmodat
        ("x86_64", I386, 295, [0, 0, CREAT, 0o4755], EPERM),  # i386 openat
        ("x86_64", I386, 15, [0, 0o755], ALLOW),
        ("x86_64", ARM64, 90, [0, 0o755], EPERM),  # an ABI not listed: nothing runs
        ("aarch64", ARM64, 53, [0, 0, 0o4755], EPERM),  # fchmodat
        ("aarch64", ARM64, 52, [3, 0o644], ALLOW),  # fchmod
        ("aarch64", ARM64, 452, [0, 0, 0o2755, 0], EPERM),  # fchmodat2
        ("aarch64", ARM64, 56, [0, 0, CREAT, 0o6755], EPERM),  # openat
        ("aarch64", ARM64, 33, [0, 0, 0o104755, 0], EPERM),  # mknodat
        ("aarch64", ARM64, 29, [0, seccomp.TIOCLINUX], EPERM),
        ("aarch64", ARM, 15, [0, 0o4755], EPERM),  # arm chmod
        ("aarch64", ARM, 333, [0, 0, 0o4755], EPERM),  # arm fchmodat
        ("aarch64", ARM, 322, [0, 0, CREAT, 0o755], ALLOW),
        ("aarch64", X86, 90, [0, 0o755], EPERM),
    ],
)
def test_filter_on_every_abi(machine: str, arch: int, nr: int, args: list[int], want: int) -> None:
    """The setuid/setgid checks and the terminal ones on every ABI each machine runs,
    32-bit compat and x32 included (which this machine cannot exercise for real)."""
    if sys.byteorder != "little":
        pytest.skip("the interpreter packs seccomp_data little-endian")
    assert _run(seccomp.program(machine), arch, nr, args) == want


@NEEDS_LANDLOCK
def test_shared_repository_commits_inside_the_sandbox(hub: Repo, tmp_path: Path) -> None:
    """With core.sharedRepository = group, git chmods each directory it makes g+s, which
    the filter refuses: exec gives CMD's git core.sharedRepository = umask (after any
    GIT_CONFIG_COUNT entry of its own), so add and commit in the lane still work."""
    lane_path = hub.create("alpha")
    subprocess.run(
        ["git", "-C", str(hub.path), "config", "core.sharedRepository", "group"], check=True
    )
    body = tmp_path / "commit.sh"
    body.write_text(
        'for i in 1 2 3 4 5 6 7 8; do echo "$i" > "s$i"; git add "s$i" && git commit -qm "s$i"'
        " || exit 9; done\n"
        "git config core.sharedRepository; git config user.kept\n"
    )
    r = hub.lane(
        "exec",
        "--sandbox",
        "alpha",
        "--",
        "sh",
        str(body),
        cwd=lane_path,
        env={"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.kept", "GIT_CONFIG_VALUE_0": "yes"},
    )
    assert r.rc == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["umask", "yes"], r.stdout
    log = subprocess.run(
        ["git", "-C", str(hub.path), "log", "--format=%s", "lane/alpha", "-8"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert log.stdout.split() == [f"s{i}" for i in range(8, 0, -1)], log.stdout


@NEEDS_LANDLOCK
@needs_modes
def test_main_made_unreadable_by_a_sandboxed_chmod_has_a_way_back_that_does_not_loop(
    hub: Repo,
) -> None:
    """Landlock does not govern chmod: a sandboxed lane of a non-root owner can
    `chmod 000 .git/refs/heads/main` (the owner's file). Then every land refuses
    `no_main_branch` ("a broken ref file"), next `git lane restore-main`; restore-main
    leaves the file where it is, git cannot lock it ("Permission denied") and it refuses
    `main_update_failed`, next `git lane doctor`; doctor fails `main` with the fix
    `git lane restore-main` again. Nothing in the loop names the mode, and main stays
    unreadable to the owner (a denial of service by a sandboxed lane)."""
    lane = hub.create("alpha")
    hub.commit(lane, "x.txt", "x\n")
    before = hub.sha()
    main_file = hub.common_dir / "refs" / "heads" / "main"
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c",
                 f"chmod 000 {shlex.quote(str(main_file))}")  # fmt: skip
    assert r.rc == 0, r.stderr
    assert main_file.stat().st_mode & 0o600 == 0o600  # exec gave it back once CMD ended
    # as a CMD still running leaves it when the owner acts (exec gives the bits back
    # only once CMD's tree has ended)
    main_file.chmod(0)
    ran: list[str] = []
    step = "git lane restore-main"
    for _ in range(4):  # follow the nexts and doctor's fixes, as written, as the owner
        ran.append(step)
        done = subprocess.run(owner_argv("sh", "-c", step + " --json"), cwd=hub.path,
                              capture_output=True, text=True)  # fmt: skip
        readable = subprocess.run(owner_argv("git", "rev-parse", "--verify", "-q", "main"),
                                  cwd=hub.path, capture_output=True, text=True)  # fmt: skip
        if readable.stdout.strip() == before:
            break
        try:
            out = json.loads(done.stdout)
        except ValueError:
            break
        if "checks" in out:  # doctor: its fix for main
            fixes = [c["fix"] for c in out["checks"] if c["status"] != "ok" and c.get("fix")]
            step = fixes[0] if fixes else ""
        else:
            nxt = [n for n in out.get("next", []) if n]
            step = nxt[0] if nxt else ""
        if not step:
            break
    readable = subprocess.run(owner_argv("git", "rev-parse", "--verify", "-q", "main"),
                              cwd=hub.path, capture_output=True, text=True)  # fmt: skip
    assert readable.stdout.strip() == before, ("the owner's way back loops", ran)
    assert ran == ["git lane restore-main"]  # its first command gives the bits back
    assert "mode_restored" in (hub.state_dir / "events.jsonl").read_text()


@NEEDS_LANDLOCK
@needs_modes
def test_git_lanes_state_made_unwritable_by_a_sandboxed_chmod_is_given_back(hub: Repo) -> None:
    """The same for git-lane's own state (`git-lane/locks` chmod 000: every land refused
    state_write_failed, next the same land, doctor ok): the next command gives the owner's
    bits back first, says so, and lands."""
    hub.config("gate_command", "true")
    lane = hub.create("alpha")
    tip = hub.commit(lane, "x.txt", "x\n")
    locks = hub.state_dir / "locks"
    r = hub.lane("exec", "--sandbox", "alpha", "--", "sh", "-c",
                 f"chmod 000 {shlex.quote(str(locks))}")  # fmt: skip
    assert r.rc == 0, r.stderr
    assert locks.stat().st_mode & 0o700 == 0o700  # exec gave it back once CMD ended
    locks.chmod(0)  # as a CMD still running leaves it when the owner acts
    done = subprocess.run(owner_argv("git", "lane", "land", "alpha"), cwd=hub.path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gave the owner's read and write bits back" in done.stderr
    assert hub.sha() == tip
