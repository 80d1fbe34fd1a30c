"""Red team round 2 of issue 11, findings 1 and 4: a sandboxed CMD writes its admin dir
(config.worktree, rebase-merge/), and the owner's git then must not run what it names.
Red team 13I: nor write, commit or block on what the lane put in its index (`index`).

Each `test_hole_*` FAILS TODAY on a real hole (severity in its docstring): the attack runs
inside `git lane exec KEY --sandbox` in a real repository, and the test asserts what
README/docs/trust-boundary.md promise."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from sandboxhelp import NEEDS_LANDLOCK, refused_then_planted
from conftest import LaneRun, Repo, git


pytestmark = NEEDS_LANDLOCK


def _exec(hub: Repo, tmp_path: Path, body: str, *args: str, key: str = "alpha") -> LaneRun:
    script = tmp_path / f"body-{key}.sh"
    script.write_text(body)
    return hub.lane("exec", "--sandbox", key, "--", "sh", str(script), *args)


# Inside the sandbox: commit a .gitattributes naming filter x, then define filter x's clean
# program in the lane's own config.worktree (its admin dir is granted) and dirty a file.
WORKTREE_CONFIG = r"""
set -e
EVIDENCE=$1 HUB_CONFIG=$2
AD=$(git rev-parse --path-format=absolute --git-dir)
echo '* filter=x' > .gitattributes
echo work > w.txt
git add -A && git commit -qm work
P="$PWD/.payload"
cat > "$P" <<P
#!/bin/sh
echo "ran sandbox=\${GITLANE_SANDBOX-none}" >> '$EVIDENCE'
echo '# written by the lane' >> '$HUB_CONFIG'
cat
P
chmod +x "$P"
printf '[filter "x"]\n\tclean = %s\n' "'$P'" > "$AD/config.worktree"
echo more >> w.txt
"""


def test_sandbox_refused_while_worktree_config_is_on(hub: Repo, tmp_path: Path) -> None:
    """Finding 1 (a): with extensions.worktreeConfig on (git sparse-checkout turns it on),
    the lane's <admin>/config.worktree is read by git and CMD could write it: exec
    --sandbox refuses and runs nothing; the next unsets the extension, and it then runs."""
    hub.create("alpha")  # create runs git in the new lane: refused while it is on
    hub.git("config", "extensions.worktreeConfig", "true")
    r = _exec(hub, tmp_path, "echo CMD-RAN\n")
    assert r.rc == 1, r.stdout + r.stderr
    assert "sandbox_failed" in r.stdout + r.stderr or "untrusted_git_config" in r.stderr
    assert "config --unset extensions.worktreeConfig" in r.stdout + r.stderr
    assert "CMD-RAN" not in r.stdout + r.stderr
    hub.git("config", "--unset", "extensions.worktreeConfig")
    r = _exec(hub, tmp_path, "echo CMD-RAN\n")
    assert r.rc == 0, r.stdout + r.stderr
    assert "CMD-RAN" in r.stdout


def test_worktree_config_program_never_runs_in_the_owners_git(hub: Repo, tmp_path: Path) -> None:
    """Finding 1 (b): a lane's config.worktree written while the extension was off (CMD ran
    sandboxed), read once the owner turns it on: the owner's `git lane status` refuses
    untrusted_git_config instead of running the filter, and since red team 14A whatever
    the file holds (a check of it vouches for nothing: test below): the next unsets the
    extension, and status then runs, the filter still not."""
    hub.create("alpha")
    evidence = tmp_path / "evidence"
    cfg = hub.common_dir / "config"
    r = _exec(hub, tmp_path, WORKTREE_CONFIG, str(evidence), str(cfg))
    assert r.rc == 0, r.stdout + r.stderr
    hub.git("config", "extensions.worktreeConfig", "true")
    before = cfg.read_text()
    st = hub.lane("status")
    assert st.rc == 1, st.stdout + st.stderr
    assert "untrusted_git_config" in st.stdout + st.stderr
    assert "Traceback" not in st.stdout + st.stderr
    assert not evidence.exists(), evidence.read_text()
    assert cfg.read_text() == before
    admin = hub.common_dir / "worktrees"
    (wt,) = [p / "config.worktree" for p in admin.iterdir() if (p / "config.worktree").exists()]
    hub.git("config", "--file", str(wt), "--unset-all", "filter.x.clean")
    hub.git("config", "--file", str(wt), "core.sparseCheckout", "false")  # harmless now
    j = hub.jlane("status", "alpha")
    assert j.code == "untrusted_git_config", j
    (nxt,) = j.json["next"]
    assert (
        nxt == f"git -C {shlex.quote(str(hub.common_dir))} config --unset extensions.worktreeConfig"
    )
    subprocess.run(["sh", "-c", nxt], check=True)
    assert hub.lane("status").rc == 0
    assert not evidence.exists()


def test_every_lane_command_refuses_cleanly_while_worktree_config_is_on(
    hub: Repo, tmp_path: Path
) -> None:
    """With extensions.worktreeConfig on, no engine git runs in a lane (red team 14A):
    status, sync, land and release each refuse untrusted_git_config, with no traceback
    and the unset as their next, even with no config.worktree in the lane at all; create
    refuses before it makes anything."""
    hub.create("alpha")
    hub.git("config", "extensions.worktreeConfig", "true")
    for argv in (
        ("status", "alpha"),
        ("sync", "alpha"),
        ("land", "alpha"),
        ("release", "alpha", "--confirm", "yes-discard-lane"),
    ):
        j = hub.jlane(*argv)
        assert j.code == "untrusted_git_config", (argv, j)
        assert "Traceback" not in j.stdout + j.stderr, (argv, j.stderr)
        assert j.json["next"] == [
            f"git -C {shlex.quote(str(hub.common_dir))} config --unset extensions.worktreeConfig"
        ], (argv, j.json)
    j = hub.jlane("create", "beta")  # before it makes a lane no command could use
    assert j.code == "untrusted_git_config", j
    assert hub.sha("refs/heads/lane/beta") is None
    hub.git("config", "--unset", "extensions.worktreeConfig")
    assert hub.lane("status", "alpha").rc == 0


# A process of the lane's still running (a sandboxed CMD may: the admin dir is its to
# write, a same-directory rename needs no REFER) flips `<admin>/config.worktree` between
# what sparse-checkout writes and a clean filter, each by an atomic rename.
_WTCONFIG_FLIPPER = r"""
import os, sys, time
admin, prog = sys.argv[1], sys.argv[2]
good = b"[core]\n\tsparseCheckout = false\n"
bad = ('[filter "x"]\n\tclean = %s\n' % prog).encode()
deadline = time.time() + 120
fd = os.open(admin, os.O_RDONLY | os.O_DIRECTORY)
n = 0
while time.time() < deadline:
    for data, hold in ((good, 0.006), (bad, 0.002)):
        t = f".t{n}"
        n += 1
        g = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
        os.write(g, data)
        os.close(g)
        os.rename(t, "config.worktree", src_dir_fd=fd, dst_dir_fd=fd)
        time.sleep(hold)
"""


def test_the_lanes_config_worktree_is_never_read_by_engine_git_after_its_check(
    hub: Repo, tmp_path: Path
) -> None:
    """Once the owner followed the sparse-checkout refusal's next (`git -C COMMON config
    extensions.worktreeConfig true`), every engine git call in a lane first checked the
    lane's `<admin>/config.worktree` (check_no_worktree_config: `git config --list` of it)
    and then ran git, which read the file again: a lane process still running swapped a
    filter in between. The owner's `git lane status alpha` (its `git status
    --porcelain=v2`, an entry the lane made racy with `update-index --cacheinfo`) ran
    the lane's clean filter, unconfined, as the owner (red team 14A)."""
    lp = hub.create("alpha")
    admin = git(lp, "rev-parse", "--absolute-git-dir").stdout.strip()
    hub.commit(lp, ".gitattributes", "* filter=x\n")
    hub.commit(lp, "f.txt", "v0\n")
    subprocess.run(  # the owner, as the sparse-checkout refusal's next said
        ["git", "-C", str(hub.common_dir), "config", "extensions.worktreeConfig", "true"],
        check=True,
    )
    pwned = tmp_path / "pwned"
    prog = tmp_path / "lanes-filter.sh"
    prog.write_text(
        f"#!/bin/sh\ntr '\\0' ' ' < /proc/$PPID/cmdline >> '{pwned}'\necho >> '{pwned}'\ncat\n"
    )
    prog.chmod(0o755)
    blob = git(lp, "rev-parse", "HEAD:f.txt").stdout.strip()
    flipper = subprocess.Popen([sys.executable, "-c", _WTCONFIG_FLIPPER, admin, str(prog)])
    codes = []
    try:
        for _ in range(50):  # the red team's 4th run was enough
            # the lane: its index entry racy (size 0), so git status reads the file
            subprocess.run(
                ["git", "-c", "core.hooksPath=/dev/null", "-c", "filter.x.clean=cat",
                 "update-index", "--cacheinfo", f"100644,{blob},f.txt"],
                cwd=lp, check=True, capture_output=True,
            )  # fmt: skip
            codes.append(hub.jlane("status", "alpha").code)
            if pwned.exists():
                break
    finally:
        flipper.kill()
        flipper.wait()
    assert not pwned.exists(), (
        f"engine git ran the lane's config.worktree filter as the owner: {pwned.read_text()}"
        f" (after {len(codes)} `git lane status` runs)"
    )
    assert set(codes) == {"untrusted_git_config"}, codes


REBASE_TODO = r"""
set -e
EVIDENCE=$1 HUB_CONFIG=$2
echo w > w.txt && git add w.txt && git commit -qm work
AD=$(git rev-parse --path-format=absolute --git-dir)
P="$AD/pl"
printf '#!/bin/sh\necho "ran sandbox=${GITLANE_SANDBOX-none}" >> "%s"\necho "# pwned" >> "%s"\n' \
  "$EVIDENCE" "$HUB_CONFIG" > "$P"
chmod +x "$P"
GIT_SEQUENCE_EDITOR="sed -i '1i break'" /usr/bin/git rebase -q -i --exec "'$P'" HEAD~1 || true
test -d "$AD/rebase-merge"
"""


def test_rebase_todo_exec_never_runs_on_owner_continue(hub: Repo, tmp_path: Path) -> None:
    """Finding 4. The lane's admin dir is granted, and
    with it `rebase-merge/git-rebase-todo`: CMD leaves a stopped rebase whose todo holds an
    `exec` line; status says `git lane continue alpha`, and the owner's continue runs
    `git rebase --continue` outside any sandbox: refused rebase_todo_untrusted instead."""
    hub.create("alpha")
    evidence = tmp_path / "evidence"
    cfg = hub.common_dir / "config"
    before = cfg.read_text()
    r = _exec(hub, tmp_path, REBASE_TODO, str(evidence), str(cfg))
    assert r.rc == 0, r.stdout + r.stderr
    c = hub.lane("continue", "alpha")
    assert c.rc == 1, c.stdout + c.stderr
    assert "rebase_todo_untrusted" in c.stdout + c.stderr
    assert "git lane abort alpha" in c.stdout + c.stderr
    assert not evidence.exists(), evidence.read_text()
    assert cfg.read_text() == before
    a = hub.lane("abort", "alpha")  # the next: runs no todo line
    assert a.rc == 0, a.stdout + a.stderr
    assert not evidence.exists(), evidence.read_text()
    assert cfg.read_text() == before
    assert hub.lane("sync", "alpha").rc == 0


def test_doctor_says_sandbox_refuses_while_worktree_config_is_on(hub: Repo) -> None:
    hub.git("config", "extensions.worktreeConfig", "true")
    d = hub.lane("doctor")
    assert "exec --sandbox refuses (sandbox_failed)" in d.stdout + d.stderr
    assert "config --unset extensions.worktreeConfig" in d.stdout + d.stderr
    assert d.rc != 0, d.stdout + d.stderr  # a failure, no longer a warning (red team 14A)


# Red team 13I: the lane's index (`<admin>/index`, granted) is the lane's to write. Its
# entries' names are taken by git as they are (no verify_path on a name read from an
# index), and a FIFO there blocks git's open(2) of it.
REAL_GIT = os.path.realpath(shutil.which("git") or "/usr/bin/git")

# CMD rewrites one entry's name to climb out of the worktree (`../../…/hooks/post-checkout`,
# mode 100755, its blob a script CMD wrote), fixes the index checksum, then empties its
# worktree, `.git` file included. The owner's `git lane status` then says "git lane repair
# alpha", and repair filled the directory from that index with `git checkout-index -a`.
PLANT_INDEX = r"""
set -e
G=$1 TARGET=$2
printf '#!/bin/sh\necho "lane code ran unconfined as $(id -un)" > "%s.ran"\n' "$TARGET" > payload
chmod +x payload
$G update-index --add --chmod=+x payload
python3 - "$TARGET" "$($G rev-parse --absolute-git-dir)/index" <<'P'
import hashlib, os, sys
target, index = sys.argv[1:3]
name = os.path.relpath(target, os.getcwd()).encode()
data = open(index, "rb").read()[:-20]
i = data.index(b"payload\0")
# the entry's 16-bit flags (name length in the low 12 bits) sit right before its name
flags = int.from_bytes(data[i - 2 : i], "big") & 0xF000 | min(len(name), 0xFFF)
entry_start = i - 62
old_len = 62 + len(b"payload") + 1
old_len += (8 - old_len % 8) % 8
new = data[entry_start : i - 2] + flags.to_bytes(2, "big") + name + b"\0"
new += b"\0" * ((8 - len(new) % 8) % 8)
data = data[:entry_start] + new + data[entry_start + old_len :]
open(index, "wb").write(data + hashlib.sha1(data).digest())
P
$G ls-files -s | grep post-checkout
find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +
"""


def test_repair_never_writes_an_index_entry_that_climbs_out_of_the_lane(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (a write outside the lane; the lane's program runs unconfined as the owner at
    the next checkout in the hub). repair fills an emptied lane from its index only when
    every entry's name is one git accepts as a path (recovery._check_index_names); else
    it refuses lane_index_unsafe, writes nothing (the directory is left empty), and its
    next (the index rebuilt from the lane's commit, then repair) restores the lane."""
    alpha = hub.create("alpha")
    hub.commit(alpha, "kept.txt", "committed in the lane\n")
    hook = hub.common_dir / "hooks" / "post-checkout"
    assert not hook.exists()
    r = _exec(hub, tmp_path, PLANT_INDEX, REAL_GIT, str(hook))
    assert r.rc == 0, r.stdout + r.stderr
    assert alpha.is_dir() and not os.listdir(alpha)
    assert not hook.exists()  # the sandbox held: nothing outside the lane was written

    rep = hub.jlane("repair", "alpha")
    hub.git("checkout", "-q", "-b", "probe")  # the owner's own next checkout in the hub
    ran = Path(str(hook) + ".ran")
    assert not hook.exists() and not ran.exists(), f"repair wrote {hook}: {rep.stdout}"
    assert rep.rc == 1 and rep.code == "lane_index_unsafe", rep.stdout + rep.stderr
    assert any("post-checkout" in p for p in rep.json["details"]["paths"])
    assert not os.listdir(alpha)  # found empty, left empty
    for cmd in rep.json["next"]:
        done = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    assert not hook.exists() and not ran.exists()
    assert (alpha / "kept.txt").read_text() == "committed in the lane\n"
    assert hub.jlane("status", "alpha").rc == 0


# CMD replaces its index by a FIFO: open(2) of a FIFO for reading blocks until a writer
# comes, and every git the owner runs in the lane opens the index.
PLANT_INDEX_FIFO = r"""
set -e
G=$1
ADMIN=$($G rev-parse --absolute-git-dir)
rm -f "$ADMIN/index"
mkfifo "$ADMIN/index"
"""


def _bounded(argv: list[str], cwd: Path, limit: float) -> subprocess.CompletedProcess[str] | None:
    """argv's result, or None when it still ran after `limit` seconds (then killed, with
    its process group)."""
    p = subprocess.Popen(
        argv, cwd=cwd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None
    return subprocess.CompletedProcess(argv, p.returncode, out.decode(), err.decode())


def test_a_fifo_at_the_lanes_index_never_hangs_the_owners_commands(
    hub: Repo, tmp_path: Path
) -> None:
    """MED (the owner's command hangs). Every engine git call in a lane checks first that
    the lane's index is a regular file (one lstat, git._argv_env): status, checkpoint
    and land end with lane_index_unsafe, whose next (remove it, read the lane's commit
    into a new index) works as printed."""
    alpha = hub.create("alpha")
    hub.commit(alpha, "kept.txt", "committed\n")
    (alpha / "kept.txt").write_text("uncommitted work\n")
    refused_then_planted(
        lambda: _exec(hub, tmp_path, PLANT_INDEX_FIFO, REAL_GIT),
        PLANT_INDEX_FIFO,
        alpha,
        REAL_GIT,
        tmp_path=tmp_path,
    )
    fifo = next((p for p in (hub.common_dir / "worktrees").glob("*/index") if p.is_fifo()), None)
    assert fifo is not None
    try:
        for args in (["status", "alpha"], ["checkpoint", "alpha"], ["land", "alpha"]):
            res = _bounded([sys.executable, "-m", "guard", *args, "--json"], hub.path, 40)
            assert res is not None, f"the owner's `git lane {args[0]}` hung on the lane's index"
            # the worktree listing finds it first (admin_unreadable), a git call in the lane
            # otherwise (lane_index_unsafe): both say how to rebuild it from the commit
            code = json.loads(res.stdout)["code"]
            assert code in ("admin_unreadable", "lane_index_unsafe"), res.stdout + res.stderr
    finally:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    nxt = json.loads(res.stdout)["next"]
    for cmd in nxt:
        done = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    assert hub.jlane("status", "alpha").rc == 0
    assert (alpha / "kept.txt").read_text() == "uncommitted work\n"  # the worktree kept
    cp = hub.jlane("checkpoint", "alpha")
    assert cp.code == "checkpointed" and cp.json["paths"] == ["kept.txt"], cp.stdout


# CMD stages an entry named `../dotdo` (name patched by hand, checksum fixed). Its own
# commit of it would never reach the shared store: import re-checks every object the lane
# wrote with `index-pack --strict` (fsck: hasDotdot). The owner's checkpoint commits the
# lane's index with the owner's git, straight into the shared store.
PLANT_DOTDOT = r"""
set -e
G=$1
printf 'x\n' > dotdotxx
$G update-index --add dotdotxx
python3 - "$($G rev-parse --absolute-git-dir)/index" <<'P'
import hashlib, sys
index = sys.argv[1]
data = open(index, "rb").read()[:-20]
assert data.count(b"dotdotxx\0") == 1
data = data.replace(b"dotdotxx\0", b"../dotdo\0")  # same length: flags unchanged
open(index, "wb").write(data + hashlib.sha1(data).digest())
P
rm dotdotxx
$G ls-files -s
"""


def test_checkpoint_never_commits_an_index_entry_that_climbs_out_of_the_lane(
    hub: Repo, tmp_path: Path
) -> None:
    """LOW (a tree git's fsck refuses reaches the shared store). checkpoint refuses
    lane_index_unsafe when a path it would commit is one git refuses as a path it is
    given; nothing is committed, and the next (the index from the lane's commit, then
    checkpoint) works and keeps the worktree's work."""
    alpha = hub.create("alpha")
    (alpha / "work.txt").write_text("uncommitted work\n")
    before = git(alpha, "rev-parse", "HEAD").stdout.strip()
    r = _exec(hub, tmp_path, PLANT_DOTDOT, REAL_GIT)
    assert r.rc == 0, r.stdout + r.stderr
    cp = hub.jlane("checkpoint", "alpha", "-m", "checkpoint")
    assert git(alpha, "rev-parse", "HEAD").stdout.strip() == before, cp.stdout
    assert cp.rc == 1 and cp.code == "lane_index_unsafe", cp.stdout + cp.stderr
    assert cp.json["details"]["paths"] == ["../dotdo"]
    for cmd in cp.json["next"]:
        done = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    tip = git(alpha, "rev-parse", "HEAD").stdout.strip()
    names = git(hub.path, "ls-tree", "-r", "--name-only", tip).stdout.split("\n")
    assert "work.txt" in names and "../dotdo" not in names
