"""`git lane conflicts` and `status --conflicts`: predicted conflicts are what a real
rebase then hits (shape by shape, lane against main and lane against lane), nothing in any
worktree, index or ref changes, uncommitted work is predicted from a temporary index, and
a lane that cannot be predicted is listed with its reason."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, git, lane, owner_argv
from enginehelp import GROW_INDEX, grow_index, lane_capped, rebase_dir
from sandboxhelp import NEEDS_LANDLOCK

BASE = "".join(f"line {i}\n" for i in range(1, 11))
WEIRD = "we\"ird 'name'\nwith newline.txt"


def edit_line(path: Path, name: str, n: int, text: str) -> None:
    lines = (path / name).read_text().splitlines(keepends=True)
    lines[n - 1] = text + "\n"
    (path / name).write_text("".join(lines))


def commit_all(where: Path, msg: str) -> None:
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", msg)


def pair(result: dict[str, Any], a: str, b: str) -> dict[str, Any]:
    for p in result["pairs"]:
        if p["lanes"] == [a, b]:
            return dict(p)
    raise AssertionError(f"no pair {a} {b} in {result['pairs']}")


def unmerged(where: Path) -> list[str]:
    out = git(where, "diff", "--name-only", "-z", "--diff-filter=U").stdout
    return sorted(p for p in out.split("\0") if p)


def seed(repo: Repo, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        p = repo.path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    commit_all(repo.path, "seed")


Edit = Callable[[Path], None]


def _same_line(side: str) -> Edit:
    return lambda p: edit_line(p, "f.txt", 2, f"{side} two")


def _rename(p: Path) -> None:
    git(p, "mv", "f.txt", "g.txt")


def _delete(p: Path) -> None:
    git(p, "rm", "-q", "f.txt")


def _binary(side: str) -> Edit:
    return lambda p: (p / "bin.dat").write_bytes(b"\0\1\2" + side.encode() * 50)


def _add(side: str) -> Edit:
    return lambda p: (p / "new.txt").write_text(f"added by {side}\n")


def _dir_rename(p: Path) -> None:
    git(p, "mv", "d", "e")


def _dir_add(p: Path) -> None:
    (p / "d" / "new.txt").write_text("new in d\n")


def _weird(side: str) -> Edit:
    return lambda p: edit_line(p, WEIRD, 2, f"{side} two")


# (lane's edit, main's edit, conflict expected, the paths the pair reports)
SHAPES: dict[str, tuple[Edit, Edit, bool, list[str]]] = {
    "same_line": (_same_line("lane"), _same_line("main"), True, ["f.txt"]),
    "delete_modify": (_delete, _same_line("main"), True, ["f.txt"]),
    "modify_delete": (_same_line("lane"), _delete, True, ["f.txt"]),
    "rename_modify": (_rename, _same_line("main"), False, ["f.txt"]),
    "rename_delete": (_rename, _delete, True, ["g.txt"]),
    "binary": (_binary("lane"), _binary("main"), True, ["bin.dat"]),
    "add_add": (_add("lane"), _add("main"), True, ["new.txt"]),
    "clean_overlap": (
        _same_line("lane"),
        lambda p: edit_line(p, "f.txt", 9, "main nine"),
        False,
        ["f.txt"],
    ),
    "disjoint": (_add("lane"), lambda p: edit_line(p, "f.txt", 9, "main nine"), False, []),
    # a directory rename moves the lane's new file: no path in common, still a conflict
    # (merge.directoryRenames = conflict): why no pair is pruned by its changed paths
    "dir_rename_add": (_dir_add, _dir_rename, True, ["e/new.txt"]),
    "weird_name": (_weird("lane"), _weird("main"), True, [WEIRD]),
}


def seeded(repo: Repo) -> None:
    seed(
        repo,
        {
            "f.txt": BASE.encode(),
            "bin.dat": b"\0\1\2base" * 10,
            "d/a.txt": b"a\n" * 20,
            "d/b.txt": b"b\n" * 20,
            WEIRD: BASE.encode(),
        },
    )


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_lane_against_main_predicts_what_the_sync_then_hits(repo: Repo, shape: str) -> None:
    edit_lane, edit_main, conflict, paths = SHAPES[shape]
    seeded(repo)
    path = repo.create("alpha")
    edit_lane(path)
    commit_all(path, "lane work")
    edit_main(repo.path)
    commit_all(repo.path, "main work")

    r = repo.jlane("conflicts")
    assert r.rc == 0, r.stderr
    p = pair(r.json, "main", "alpha")
    assert p["conflict"] is conflict and p["main"] is True
    assert p["state"] == ("conflict" if conflict else ("overlap" if paths else "clean"))
    assert p["paths"] == paths
    assert r.json["counts"]["conflict"] == int(conflict)

    s = repo.jlane("sync", "alpha")
    if conflict:
        assert s.rc == 1 and s.code == "sync_conflicts", s.stdout
        assert unmerged(path) == sorted(paths)  # what git itself says is unmerged
    else:
        assert s.rc == 0, s.stdout + s.stderr
        assert not rebase_dir(path)


def test_lane_against_lane_predicts_what_the_second_sync_hits(repo: Repo) -> None:
    seeded(repo)
    repo.config("gate", "off")
    paths = {k: repo.create(k) for k in ("alpha", "beta", "gamma", "delta")}
    edit_line(paths["alpha"], "f.txt", 2, "alpha two")
    edit_line(paths["beta"], "f.txt", 2, "beta two")  # conflicts with alpha
    edit_line(paths["gamma"], "f.txt", 9, "gamma nine")  # same file, other line: clean
    _binary("delta")(paths["delta"])  # nothing in common with alpha
    _binary("alpha")(paths["alpha"])  # ... but with delta: both change the binary file
    for k, p in paths.items():
        commit_all(p, f"work in {k}")

    r = repo.jlane("conflicts")
    assert r.rc == 0, r.stderr
    res = r.json
    assert pair(res, "alpha", "beta")["paths"] == ["f.txt"]
    assert pair(res, "alpha", "beta")["conflict"] is True
    assert pair(res, "alpha", "gamma") | {"kinds": []} == {
        "lanes": ["alpha", "gamma"],
        "main": False,
        "conflict": False,
        "state": "overlap",
        "paths": ["f.txt"],
        "shared": ["f.txt"],
        "kinds": [],
    }
    assert pair(res, "alpha", "delta")["paths"] == ["bin.dat"]
    assert pair(res, "beta", "delta")["state"] == "clean"
    assert [p["lanes"] for p in res["pairs"] if p["main"] and p["conflict"]] == []
    assert res["counts"] == {
        "pairs": 10,
        "conflict": 2,  # alpha-beta, alpha-delta
        "overlap": 2,  # alpha-gamma, beta-gamma
        "clean": 6,
        "skipped": 0,
    }
    # conflicts first, then overlaps, then clean pairs
    states = [p["state"] for p in res["pairs"]]
    assert states == sorted(states, key=["conflict", "overlap", "clean"].index)

    land = repo.jlane("land", "alpha")
    assert land.rc == 0, land.stdout + land.stderr
    for k, expect in (("beta", ["f.txt"]), ("delta", ["bin.dat"]), ("gamma", [])):
        s = repo.jlane("sync", k)
        assert unmerged(paths[k]) == expect, (k, s.stdout)
        assert (s.code == "sync_conflicts") is bool(expect)


def snapshot(repo: Repo, lanes: list[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "refs": git(repo.path, "for-each-ref", "--format=%(objectname) %(refname)").stdout,
        "worktrees": repo.worktrees(),
        "stash": git(repo.path, "stash", "list").stdout,
    }
    for w in [repo.path, *lanes]:
        gd = Path(git(w, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())
        idx = gd / "index"
        st = idx.stat()
        out[str(w)] = (
            git(
                w,
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                env={"GIT_OPTIONAL_LOCKS": "0"},  # this look itself must not refresh the index
            ).stdout,
            hashlib.sha256(idx.read_bytes()).hexdigest(),
            st.st_mtime_ns,
            st.st_ino,
            sorted(os.listdir(gd)),
            git(w, "reflog", "-n", "5").stdout,
        )
    return out


def test_nothing_changes_and_dirty_work_comes_from_a_temporary_index(repo: Repo) -> None:
    seed(repo, {"f.txt": BASE.encode(), ".gitignore": b"*.log\n"})
    alpha, beta = repo.create("alpha"), repo.create("beta")
    edit_line(repo.path, "f.txt", 2, "main two")
    commit_all(repo.path, "main work")
    # alpha: committed work apart from main, but an uncommitted edit of main's line, a
    # staged new file, an untracked one (with a space) and an ignored one
    edit_line(alpha, "f.txt", 9, "alpha nine")
    commit_all(alpha, "alpha work")
    edit_line(alpha, "f.txt", 2, "alpha two, uncommitted")
    (alpha / "staged.txt").write_text("staged\n")
    git(alpha, "add", "staged.txt")
    (alpha / "untracked file.txt").write_text("untracked\n")
    (alpha / "debug.log").write_text("ignored\n")
    (beta / "untracked file.txt").write_text("beta's own\n")  # add/add with alpha's, uncommitted
    (beta / "staged.txt").write_text("beta's staged\n")  # add/add with alpha's staged one
    (beta / "debug.log").write_text("beta's ignored\n")  # ignored on both sides: no pair
    before = snapshot(repo, [alpha, beta])

    plain = repo.jlane("conflicts")
    assert plain.rc == 0, plain.stderr
    assert plain.json["include_dirty"] is False
    assert pair(plain.json, "main", "alpha")["conflict"] is False
    assert pair(plain.json, "alpha", "beta")["state"] == "clean"
    assert {v["key"]: v["dirty"] for v in plain.json["lanes"]} == {"alpha": None, "beta": None}

    r = repo.jlane("conflicts", "--include-dirty")
    assert r.rc == 0, r.stderr
    assert pair(r.json, "main", "alpha")["paths"] == ["f.txt"]
    # staged and untracked files count, .gitignore is honoured (debug.log is in no pair)
    assert pair(r.json, "alpha", "beta")["paths"] == ["staged.txt", "untracked file.txt"]
    lanes = {v["key"]: v for v in r.json["lanes"]}
    assert lanes["alpha"]["dirty"] is True and lanes["alpha"]["merged"] != lanes["alpha"]["tip"]
    merged = lanes["alpha"]["merged"]
    # the commit of the dirty work was made in a temporary object directory, gone now
    assert git(repo.path, "cat-file", "-e", merged, check=False).returncode != 0

    for args in (("status", "--conflicts"), ("conflicts", "alpha", "--include-dirty")):
        assert repo.jlane(*args).rc == 0
    assert snapshot(repo, [alpha, beta]) == before  # no worktree, index, ref or git dir file


def test_a_clean_lane_under_include_dirty_is_merged_as_its_tip(repo: Repo) -> None:
    seed(repo, {"f.txt": BASE.encode()})
    alpha = repo.create("alpha")
    edit_line(alpha, "f.txt", 2, "alpha")
    commit_all(alpha, "a")
    r = repo.jlane("conflicts", "--include-dirty")
    (v,) = r.json["lanes"]
    assert v["dirty"] is False and v["merged"] == v["tip"]


def test_lanes_that_cannot_be_predicted_are_listed_with_their_reason(repo: Repo) -> None:
    seed(repo, {"f.txt": BASE.encode()})
    paths = {k: repo.create(k) for k in ("alpha", "gone", "nobranch", "rebasing", "merging")}
    edit_line(repo.path, "f.txt", 2, "main two")
    commit_all(repo.path, "main")
    edit_line(paths["alpha"], "f.txt", 2, "alpha two")
    commit_all(paths["alpha"], "alpha")
    edit_line(paths["rebasing"], "f.txt", 2, "rebasing two")
    commit_all(paths["rebasing"], "r")
    assert repo.jlane("sync", "rebasing").code == "sync_conflicts"
    shutil.rmtree(paths["gone"])
    git(paths["nobranch"], "checkout", "-q", "--detach")
    git(repo.path, "update-ref", "-d", "refs/heads/lane/nobranch")
    # a merge stopped on conflicts (not a sync): its uncommitted work is no one state
    edit_line(paths["merging"], "f.txt", 2, "merging two")
    commit_all(paths["merging"], "m")
    git(paths["merging"], "merge", "-q", "main", check=False)
    assert unmerged(paths["merging"]) == ["f.txt"]

    r = repo.jlane("conflicts", "--include-dirty")
    assert r.rc == 0, r.stderr
    assert "Traceback" not in r.stderr
    why = {v["key"]: (v["skipped"] or {}).get("code") for v in r.json["lanes"]}
    assert why == {
        "alpha": None,
        "gone": "lane_not_active",
        "nobranch": "lane_branch_missing",
        "rebasing": "rebase_in_progress",
        "merging": "lane_unmerged",
    }
    assert [p["lanes"] for p in r.json["pairs"]] == [["main", "alpha"]]
    assert r.json["counts"]["skipped"] == 4
    # committed work only: the merging lane's tip is predicted
    plain = repo.jlane("conflicts")
    assert pair(plain.json, "main", "merging")["conflict"] is True

    st = repo.jlane("status", "--conflicts")
    assert st.rc == 0, st.stderr
    wc = {v["key"]: v["would_conflict"] for v in st.json["lanes"]}
    assert wc == {
        "alpha": ["main", "merging"],
        "gone": None,
        "nobranch": None,
        "rebasing": None,
        "merging": ["main", "alpha"],
    }
    assert all(v["would_conflict"] is None for v in repo.jlane("status").json["lanes"])
    text = repo.lane("status", "--conflicts")
    assert text.rc == 0 and "CONFLICTS" in text.stdout
    assert repo.lane("conflicts").rc == 0


@NEEDS_LANDLOCK
def test_conflicts_never_writes_out_a_sparse_index_the_lane_grew(hub: Repo, tmp_path: Path) -> None:
    """Red team 15A F5. A sandboxed lane rewrites its own index (its admin dir is granted)
    as what it was plus an optional extension of 256 MiB that is one hole (GROW_INDEX):
    git reads it, and `git status` in the lane works. `conflicts --include-dirty` copied
    that index into a temp dir with shutil.copy2 (sendfile: every hole written out), 256
    MiB here, a terabyte for the same lane cost: the owner's temp dir (often tmpfs, RAM)
    filled; under a 64 MiB file-size limit the command died (exit 3). The copy keeps
    holes as holes; one that still cannot be made leaves the lane out, index_copy_failed,
    whose next (git rewrites the index with what it knows) works as written."""
    lp = hub.create("alpha")
    script = tmp_path / "grow.py"
    script.write_text(GROW_INDEX)
    r = lane(
        "exec", "--sandbox", "alpha", "--", "sh", "-c",
        f"echo hi > new.txt && {sys.executable} {script} {256 << 20}", cwd=lp,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    done = lane_capped(hub.path, "conflicts", "--include-dirty", "--json", fsize=64 << 20)
    assert done.returncode in (0, 1), (
        "the owner's `git lane conflicts --include-dirty` wrote the lane's sparse 256 MiB "
        f"index out in full (rc {done.returncode} under a 64 MiB file size limit): "
        f"{done.stdout[-300:]}"
    )
    (skip,) = [v["skipped"] for v in json.loads(done.stdout)["lanes"] if v["key"] == "alpha"]
    assert skip["code"] == "index_copy_failed", skip
    for step in skip["next"][:-1]:
        ran = subprocess.run(owner_argv("sh", "-c", step), cwd=hub.path, capture_output=True)
        assert ran.returncode == 0, (step, ran.stderr)
    again = lane_capped(hub.path, "conflicts", "--include-dirty", "--json", fsize=64 << 20)
    (after,) = [v for v in json.loads(again.stdout)["lanes"] if v["key"] == "alpha"]
    assert after["skipped"] is None, after
    # without the limit the copy is made (holes as holes) and the work is predicted
    grow_index(lp, 256 << 20)
    free = hub.jlane("conflicts", "--include-dirty")
    assert free.rc == 0 and all(v["skipped"] is None for v in free.json["lanes"]), free.stdout


def test_keys_and_workers(repo: Repo) -> None:
    seed(repo, {"f.txt": BASE.encode()})
    for k in ("alpha", "beta", "gamma"):
        p = repo.create(k)
        edit_line(p, "f.txt", 2, f"{k} two")
        commit_all(p, k)
    r = repo.jlane("conflicts", "beta")
    assert r.rc == 0
    assert sorted(p["lanes"] for p in r.json["pairs"]) == [
        ["alpha", "beta"],
        ["beta", "gamma"],
        ["main", "beta"],
    ]
    assert all(p["conflict"] for p in r.json["pairs"] if not p["main"])
    worker = {"GITLANE_LANE": "gamma"}
    own = repo.jlane("conflicts", env=worker)
    assert own.rc == 0
    assert all("gamma" in p["lanes"] for p in own.json["pairs"]) and len(own.json["pairs"]) == 3
    other = repo.jlane("conflicts", "alpha", env=worker)
    assert other.rc == 1 and other.code == "role_forbidden"
    assert other.json["next"] == ["git lane conflicts gamma"]
    unknown = repo.jlane("conflicts", "nosuch")
    assert unknown.rc == 1 and unknown.code == "unknown_lane"
    bad = repo.jlane("conflicts", "Not A Key")
    assert bad.rc == 1 and bad.code == "invalid_lane_key"


def test_a_merge_git_cannot_run_is_a_refusal_never_clean(repo: Repo) -> None:
    seed(repo, {"f.txt": BASE.encode()})
    alpha = repo.create("alpha")
    edit_line(alpha, "f.txt", 2, "alpha two, a blob only this lane has")
    commit_all(alpha, "alpha")
    edit_line(repo.path, "f.txt", 2, "main two")
    commit_all(repo.path, "main")
    blob = git(alpha, "rev-parse", "HEAD:f.txt").stdout.strip()
    obj = repo.common_dir / "objects" / blob[:2] / blob[2:]
    obj.unlink()  # a corrupt repository: merge-tree cannot read the lane's side

    r = repo.jlane("conflicts")
    assert r.rc == 1, r.stdout
    assert r.code == "conflict_check_failed"
    assert "Traceback" not in r.stderr
    assert r.json["next"] == ["git fsck --connectivity-only"]
    st = repo.jlane("status", "--conflicts")
    assert st.rc == 1 and st.code == "conflict_check_failed"


def test_one_process_per_merge_answers_as_the_batch_does(repo: Repo) -> None:
    """Where git has no `merge-tree --stdin`, each merge runs on its own: same answers."""
    from guard import conflicts
    from guard.repo import Repo as GuardRepo

    seeded(repo)
    tips = {}
    main = repo.sha()
    for name, (edit_lane, edit_main, _c, _p) in SHAPES.items():
        for side, edit in (("l", edit_lane), ("m", edit_main)):
            git(repo.path, "switch", "-q", "-c", f"{side}-{name}", "main")
            edit(repo.path)
            commit_all(repo.path, name)
            tips[f"{side}-{name}"] = git(repo.path, "rev-parse", "HEAD").stdout.strip()
            git(repo.path, "switch", "-q", "main")
    assert main is not None
    pairs = [(tips[f"m-{n}"], tips[f"l-{n}"]) for n in SHAPES] + [
        (a, b) for a in tips.values() for b in tips.values() if a < b
    ]
    cwd = str(GuardRepo.discover(repo.path).common_dir)
    batch = conflicts.merge_many(cwd, pairs, jobs=2)
    each = conflicts._merge_each(cwd, list(pairs))
    assert batch == each
    assert any(not m.clean for m in batch) and any(m.clean for m in batch)
