"""Codex's writable roots (agent-setup --for codex) and exec --own-objects, which starts
Codex: no root may be re-pointed by a sandboxed CMD of the lane (red team 17 F4), and exec
looks at every root again, right before Codex starts, through directory fds.
Real kernel, real processes, the real CLI; Codex modelled with git-lane's own Landlock
code (what Codex's sandbox does with a root: canonicalize it, grant everything beneath)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import Repo, git
from sandboxhelp import NEEDS_LANDLOCK

import guard

GUARD_ROOT = str(Path(guard.__file__).resolve().parent.parent)

# What Codex's Linux sandbox does with a writable root: it resolves the path (canonical,
# symlinks followed: the landlock crate's PathFd opens it with O_PATH and no O_NOFOLLOW,
# bubblewrap's --bind follows it too) and grants every right beneath what it names;
# reads stay open everywhere. Modelled with git-lane's own Landlock layer.
FAKE_CODEX = r"""
import os, re, sys
sys.path.insert(0, os.environ["GUARD_ROOT"])
from guard import sandbox
roots = []
for i, a in enumerate(sys.argv):
    if a.startswith("sandbox_workspace_write.writable_roots="):
        roots = re.findall(r'"([^"]+)"', a)
resolved = [os.path.realpath(r) for r in roots]   # as Codex canonicalizes them
g = sandbox.Grants(writable=[*resolved, os.path.realpath(os.getcwd())])
confine = sandbox.prepare(g)
confine()                                          # Codex's sandbox is now on
try:                                               # (it is: the common config is not writable)
    open(os.path.join(os.environ["COMMON"], "config"), "a").close()
    sys.exit("not confined")
except PermissionError:
    pass
# a command Codex runs (a prompt-injected one): main's ref file, through the TMPDIR root
tmp_root = roots[-1]
with open(os.path.join(tmp_root, "main"), "w") as f:
    f.write(os.environ["EVIL"] + "\n")
print("wrote", os.path.join(tmp_root, "main"))
"""


def _setup(hub: Repo, key: str) -> dict[str, Any]:
    r = hub.lane("agent-setup", key, "--for", "codex", "--json")
    assert r.rc == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _roots(argv: list[str]) -> list[str]:
    arg = next(a for a in argv if a.startswith("sandbox_workspace_write.writable_roots="))
    roots: list[str] = json.loads(arg.split("=", 1)[1])
    return roots


@NEEDS_LANDLOCK
def test_a_sandboxed_cmd_cannot_repoint_codexs_temp_root_at_refs_heads(
    hub: Repo, tmp_path: Path
) -> None:
    """F4: Codex's temp root (its TMPDIR, a writable root) lay in CMD's own cache dir, which
    `exec --sandbox` grants with every right, links too: a sandboxed CMD replaced it with a
    link to `<common>/refs/heads`, Codex (started later as agent-setup printed it)
    resolved the root and its commands wrote refs/heads/main. Now the root lies where no
    grant reaches its parent, so CMD cannot replace it (nor the old name in its cache
    dir, which nothing names any more), and main stays."""
    lane_path = hub.create("kappa")
    common = hub.common_dir.resolve()
    setup = _setup(hub, "kappa")
    argv = setup["argv"]
    tmp_root = _roots(argv)[-1]
    env = setup["argv"]
    assert env  # (argv printed)
    assert os.path.isdir(tmp_root) and not os.path.islink(tmp_root)
    # an agent of the same lane, under exec --sandbox, tries to re-point it (and the old
    # place, in its own cache dir)
    heads = shlex.quote(str(common / "refs" / "heads"))
    root = shlex.quote(tmp_root)
    plant = tmp_path / "plant.sh"
    plant.write_text(
        f"rm -rf {root}; ln -s {heads} {root}\n"
        f'rm -rf "$XDG_CACHE_HOME/tmp"; ln -s {heads} "$XDG_CACHE_HOME/tmp"\n'
        f"mv {root} {root}.x; ln -s {heads} {root}\n"
        "exit 0\n"
    )
    r = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "kappa", "--", "sh", str(plant)],
        cwd=hub.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert os.path.isdir(tmp_root) and not os.path.islink(tmp_root), r.stderr
    # later, the owner starts Codex as agent-setup printed it (codex modelled, see above)
    fake = tmp_path / "codex.py"
    fake.write_text(FAKE_CODEX)
    i = argv.index("codex")
    run = [*argv[:i], sys.executable, str(fake), *argv[i + 1 :]]
    before = hub.sha()
    evil = git(hub.path, "commit-tree", "-m", "evil", f"{before}^{{tree}}").stdout.strip()
    subprocess.run(
        run, cwd=lane_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "GUARD_ROOT": GUARD_ROOT, "EVIL": evil, "COMMON": str(common)},
    )  # fmt: skip
    assert hub.sha() == before, "main moved from Codex's sandbox"


def test_codexs_temp_root_lies_in_no_grant_of_exec_sandbox(hub: Repo) -> None:
    """No path `exec --sandbox` grants the lane (its own cache dir included) is, holds or
    lies above Codex's temp root or its parent; nor may a `sandbox_writable` entry."""
    from guard import lane, sandbox
    from guard.repo import Repo as GRepo

    hub.create("kappa")
    tmp_root = _roots(_setup(hub, "kappa")["argv"])[-1]
    grepo = GRepo.discover(hub.path)
    g = sandbox.grants(grepo, lane.get(grepo, "kappa"))
    parent = os.path.dirname(tmp_root)
    for w in g.writable:
        assert not (parent == w or parent.startswith(w.rstrip("/") + "/")), (w, tmp_root)
    assert not tmp_root.startswith(g.private_cache + "/")
    for entry in (os.path.dirname(parent), parent, tmp_root):
        assert hub.lane("config", "set", "sandbox_writable", entry).rc == 0
        r = hub.lane("exec", "--json", "--sandbox", "kappa", "--", "true")
        assert (r.rc, r.code) == (1, "sandbox_failed"), (entry, r.stdout)
    assert hub.lane("config", "unset", "sandbox_writable").rc == 0


def test_exec_own_objects_refuses_a_codex_root_that_is_a_link_and_the_next_works(
    hub: Repo, tmp_path: Path
) -> None:
    """A process outside every sandbox (an unconfined run of the lane's agent) replaces
    Codex's temp root with a link to refs/heads: `exec --own-objects` (how Codex starts)
    looks at every root agent-setup names, each component through directory fds, and
    refuses sandbox_failed before CMD starts; its next (agent-setup) makes the root anew,
    and the exec then runs."""
    hub.create("kappa")
    common = hub.common_dir.resolve()
    tmp_root = Path(_roots(_setup(hub, "kappa")["argv"])[-1])
    tmp_root.rmdir()
    tmp_root.symlink_to(common / "refs" / "heads")
    marker = tmp_path / "ran"
    r = hub.lane("exec", "--json", "--own-objects", "kappa", "--", "touch", str(marker))
    assert (r.rc, r.code) == (1, "sandbox_failed"), r.stdout + r.stderr
    assert not marker.exists()
    assert r.json["next"] == ["git lane agent-setup kappa --for codex"], r.json
    for cmd in r.json["next"]:
        done = subprocess.run(["sh", "-c", cmd], cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    assert tmp_root.is_dir() and not tmp_root.is_symlink()
    assert (common / "refs" / "heads" / "main").is_file()  # what the link named: untouched
    r = hub.lane("exec", "--json", "--own-objects", "kappa", "--", "touch", str(marker))
    assert r.rc == 0, r.stdout + r.stderr
    assert marker.exists()


def test_exec_own_objects_refuses_a_link_above_a_root(hub: Repo, tmp_path: Path) -> None:
    """A link on the way to a root (its parent re-pointed) is refused as the root itself
    would be: each component is opened O_NOFOLLOW."""
    hub.create("kappa")
    tmp_root = Path(_roots(_setup(hub, "kappa")["argv"])[-1])
    parent = tmp_root.parent
    moved = parent.with_name(parent.name + ".real")
    parent.rename(moved)
    parent.symlink_to(moved)
    try:
        marker = tmp_path / "ran"
        r = hub.lane("exec", "--json", "--own-objects", "kappa", "--", "touch", str(marker))
        assert (r.rc, r.code) == (1, "sandbox_failed"), r.stdout + r.stderr
        assert not marker.exists()
    finally:
        parent.unlink()
        moved.rename(parent)


def test_exec_own_objects_refuses_a_printed_command_naming_a_root_in_cmds_cache_dir(
    hub: Repo, tmp_path: Path
) -> None:
    """A command printed by an older agent-setup names Codex's temp root in CMD's own cache
    dir (re-pointable by any sandboxed CMD of the lane): exec --own-objects refuses to
    start it, and agent-setup (its next) prints the command with the new root."""
    hub.create("kappa")
    setup = _setup(hub, "kappa")
    argv = list(setup["argv"])
    from guard import sandbox
    from guard.repo import Repo as GRepo

    grepo = GRepo.discover(hub.path)
    cache = os.path.realpath(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"))
    old = os.path.join(sandbox.private_cache(cache, grepo.slug, "kappa"), "tmp")
    os.makedirs(old, exist_ok=True)
    roots = [*_roots(argv)[:-1], old]
    argv = [
        "sandbox_workspace_write.writable_roots=" + json.dumps(roots)
        if a.startswith("sandbox_workspace_write.writable_roots=")
        else a
        for a in argv
    ]
    i = argv.index("codex")
    marker = tmp_path / "ran"
    run = [*argv[: i - 1], "--json", "--", "sh", "-c", f"touch {marker}", "codex", *argv[i + 1 :]]
    done = subprocess.run(run, cwd=hub.path, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["code"] == "sandbox_failed"
    assert not marker.exists()


def test_release_removes_codexs_temp_dir(hub: Repo) -> None:
    """Codex's temp dir goes with the lane, as CMD's cache dir does: a lane made later
    under the same key starts with none."""
    hub.create("kappa")
    tmp_root = Path(_roots(_setup(hub, "kappa")["argv"])[-1])
    (tmp_root / "left").write_text("x")
    r = hub.lane("release", "kappa", "--confirm", "yes-discard-lane")
    assert r.rc == 0, r.stdout + r.stderr
    assert not tmp_root.exists()
