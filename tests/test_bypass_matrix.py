"""The bypass matrix of docs/trust-boundary.md, run row by row through the real layers.

ROWS is the one table: every way to move main or write outside a lane, and for each layer
what really happens when that layer stands alone in a real repository:
- hooks: `git lane install` done, the real git, an unbound process (anyone);
- shims: no hooks installed, the command run by `git lane exec alpha -- sh -c ...` (the
  shims first on PATH, a bound worker);
- sandbox: no hooks installed, `git lane exec --sandbox alpha -- sh -c ...`, with git and
  file writes by paths the shims never see (the real git by its path, `tee`), so what
  stops it is the kernel.
A row that a layer does not stop asserts that the bypass really works there (main moved,
the file outside changed) and what `git lane doctor` fails on afterwards, if anything, so
the doc cannot quietly become wrong. test_doc_matrix_is_the_table keeps the doc's table
and ROWS equal, cell for cell (`python3 tests/test_bypass_matrix.py` prints the table).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

if __name__ != "__main__":
    from conftest import ROOT, LaneRun, Repo, git, lane

    from guard import sandbox
    from guard.commands import doctor
    from guard.repo import Repo as GRepo
else:  # printing the table needs none of the fixtures
    ROOT = Path(__file__).resolve().parent.parent

DOC = ROOT / "docs" / "trust-boundary.md"
LAYERS = ("hooks", "shims", "sandbox")
REAL_GIT = os.path.realpath(shutil.which("git") or "/usr/bin/git")
STRERROR = {
    "EACCES": "Permission denied",
    "EPERM": "Operation not permitted",
    "EXDEV": "Invalid cross-device link",
}
# git's own words for a file or directory it may not create (it leaves out strerror)
GIT_WORDS = (
    "unable to create directory for",
    "could not lock config file",
    "unable to create temporary object directory",  # the shared store is not writable
)


@dataclass(frozen=True)
class Cell:
    """What one layer does with one row: `refused` (a git-lane refusal with `code`),
    `kernel` (the kernel's error `code`), `passes` (the bypass works), `harmless` (it
    runs, and what it aims at stays as it was), `undone` (it works, and the supervising
    `git lane exec` puts it back at once, logging event `code`: a window, not a stop),
    `split` (it runs, on a file of its own: the supervising `git lane exec` gave the
    planted name an inode of its own before CMD started, logging event `code`; what it
    aims at stays as it was), `na` (not a thing in this layer: `code` says why)."""

    kind: str
    code: str = ""

    def text(self) -> str:
        return {
            "refused": f"refused `{self.code}`",
            "kernel": f"kernel `{self.code}`",
            "passes": "**passes**",
            "harmless": "runs, harmless",
            "undone": f"runs, undone by exec (`{self.code}`)",
            "split": f"runs on a copy, split by exec (`{self.code}`)",
            "na": f"n/a ({self.code})",
        }[self.kind]

    @property
    def stops(self) -> bool:
        return self.kind in ("refused", "kernel", "split")


def R(code: str) -> Cell:
    return Cell("refused", code)


MMR = R("main_mutation_refused")
OUTSIDE = R("path_outside_lane")
HOOKS_OFF = R("hooks_disabled")
EACCES = Cell("kernel", "EACCES")
PASSES = Cell("passes")
HARMLESS = Cell("harmless")
UNDONE = Cell("undone", "hook_mode_restored")
SPLIT = Cell("split", "git_dir_links_split")


@dataclass(frozen=True)
class Row:
    id: str
    vector: str  # the doc's words
    script: str  # sh, run in lane alpha; see PRELUDE for the names it may use
    target: str  # what it aims at: "main", or a key of Layer.files
    hooks: Cell
    shims: Cell
    sandbox: Cell
    after: tuple[str, ...] = ()  # every doctor check that fails once it passed the hooks
    pre: str = ""  # sh run beforehand by the owner, outside every layer
    needs: str = ""  # a program the row runs, which the machine may not have

    def cell(self, layer: str) -> Cell:
        return {"hooks": self.hooks, "shims": self.shims, "sandbox": self.sandbox}[layer]


# The script's names: GIT (git: on PATH, or the real git by its path under the sandbox),
# REAL (the real git by its path), MAIN (main's sha), TIP (lane alpha's tip, one commit
# ahead of main), HUB, COMMON (the git common dir), LANE, OUT (a file outside every lane
# and repository), REL (OUT relative to LANE, through ..), SCR (a scratch directory); and
# wr FILE: write stdin to FILE (the `write` shim under the shims, `tee` elsewhere).
ON_MAIN = 'cd "$HUB" && $GIT switch -q main && '
HOOK = '"$COMMON/hooks/reference-transaction"'
MOVE = '$GIT update-ref refs/heads/main "$TIP"'
# A program of the lane's (LANE/evil.sh) that moves main with the hooks off by the real git
# (git runs what its configuration names with its own directory first on PATH); as an
# editor it writes the message too. MOVED: the row's status is whether main moved.
EVIL = (
    'printf "#!/bin/sh\\n%s -C %s -c core.hooksPath=/dev/null update-ref refs/heads/main %s\\n'
    '[ -z \\"\\$1\\" ] || echo msg > \\"\\$1\\"\\n" "$REAL" "$HUB" "$TIP" > "$LANE/evil.sh" && '
    'chmod +x "$LANE/evil.sh" && '
)
MOVED = '; [ "$($REAL -C "$HUB" rev-parse refs/heads/main)" = "$TIP" ]'

ROWS: tuple[Row, ...] = (
    # -- switching the hooks off ---------------------------------------------------------
    Row(
        "no_verify",
        "`git commit --no-verify` on main",
        ON_MAIN + "$GIT commit -q --no-verify --allow-empty -m x",
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "c_hookspath",
        "`git -c core.hooksPath=/dev/null commit` on main",
        ON_MAIN + "$GIT -c core.hooksPath=/dev/null commit -q --allow-empty -m x",
        "main",
        PASSES,
        OUTSIDE,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "c_hookspath_lane",
        "`git -c core.hooksPath=/dev/null update-ref refs/heads/main` from a lane",
        '$GIT -c core.hooksPath=/dev/null update-ref refs/heads/main "$TIP"',
        "main",
        PASSES,
        MMR,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "landed_ref_forged",
        "`git -c core.hooksPath=/dev/null update-ref` of the next landed ref, then of main, to one commit (a main moved by hand made to look landed)",
        '$GIT -c core.hooksPath=/dev/null update-ref refs/git-lane/landed/0000000002 "$TIP" && '
        + '$GIT -c core.hooksPath=/dev/null update-ref refs/heads/main "$TIP"',
        "main",
        PASSES,
        MMR,
        EACCES,
        ("main_moved", "unvouched landed ref"),
    ),
    Row(
        "git_config_count",
        "`GIT_CONFIG_COUNT`/`KEY_0`/`VALUE_0` setting `core.hooksPath`",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/dev/null " + MOVE,
        "main",
        PASSES,
        HOOKS_OFF,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "git_config_parameters",
        "`GIT_CONFIG_PARAMETERS` setting `core.hooksPath`",
        "GIT_CONFIG_PARAMETERS=\"'core.hookspath'='/dev/null'\" " + MOVE,
        "main",
        PASSES,
        HOOKS_OFF,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "config_worktree",
        "`extensions.worktreeConfig` + `git config --worktree core.hooksPath`",
        "$GIT config extensions.worktreeConfig true && $GIT config --worktree core.hooksPath /dev/null && "
        + MOVE,
        "main",
        PASSES,
        HOOKS_OFF,
        EACCES,
        ("hooks path", "worktree config", "main_moved"),
    ),
    Row(
        "common_hookspath",
        "`git config core.hooksPath /dev/null` (the common config)",
        "$GIT config core.hooksPath /dev/null && " + MOVE,
        "main",
        PASSES,
        HOOKS_OFF,
        EACCES,
        ("core.hooksPath", "main_moved"),
    ),
    Row(
        "hook_enabled",
        "`git config hook.reference-transaction.enabled false` (git 2.39 has no config-defined hooks)",
        "$GIT config hook.reference-transaction.enabled false && " + MOVE,
        "main",
        MMR,
        HOOKS_OFF,
        EACCES,
    ),
    Row(
        "hook_delete",
        "deleting `.git/hooks/reference-transaction`",
        f"rm {HOOK}",
        "hook",
        PASSES,
        PASSES,
        EACCES,
        ("hook reference-transaction",),
    ),
    Row(
        "hook_chmod",
        "`chmod -x` of the hook",
        f"chmod -x {HOOK}",
        "hook",
        PASSES,
        UNDONE,
        UNDONE,
        ("hook reference-transaction",),
    ),
    Row(
        "hook_edit",
        "editing the hook to `exit 0`",
        f"printf '#!/bin/sh\\nexit 0 # off\\n' > {HOOK}",
        "hook",
        PASSES,
        PASSES,
        EACCES,
        ("hook reference-transaction",),
    ),
    # -- git commands that move main ---------------------------------------------------------
    Row("update_ref", "`git update-ref refs/heads/main`", MOVE, "main", MMR, MMR, EACCES),
    Row(
        "update_ref_d",
        "`git update-ref -d refs/heads/main`",
        "$GIT update-ref -d refs/heads/main",
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "update_ref_stdin",
        "`git update-ref --stdin`",
        'printf "update refs/heads/main %s\\n" "$TIP" | $GIT update-ref --stdin',
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row("branch_f", "`git branch -f main`", '$GIT branch -f main "$TIP"', "main", MMR, MMR, EACCES),
    Row("branch_D", "`git branch -D main`", "$GIT branch -D main", "main", MMR, MMR, EACCES),
    Row(
        "branch_m", "`git branch -m main old`", "$GIT branch -m main old", "main", MMR, MMR, EACCES
    ),
    Row(
        "branch_M_onto",
        "`git branch -M x main` (rename onto main)",
        '$GIT branch x "$TIP" && $GIT branch -M x main',
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "branch_mov_onto",
        "`git branch --mov --force x main` (a prefix of --move), or `-M x main --sort refname`",
        '$GIT branch x "$TIP" && $GIT branch --mov --force x main',
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "branch_C_onto",
        "`git branch -C x main` (copy onto main, git 2.39: no transaction)",
        '$GIT branch x "$TIP" && $GIT branch -C x main',
        "main",
        PASSES,
        MMR,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "push_dot",
        "`git push . lane/alpha:main`",
        "$GIT push -q . lane/alpha:main",
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "fetch_dot",
        "`git fetch . lane/alpha:main`",
        "$GIT fetch -q . lane/alpha:main",
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "replace",
        "`git replace MAIN TIP`",
        '$GIT replace "$MAIN" "$TIP" && $GIT rev-parse main > /dev/null',
        "main_meaning",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "symref_head",
        "`git symbolic-ref HEAD refs/heads/main`, then commit",
        "$GIT symbolic-ref HEAD refs/heads/main && $GIT commit -q --no-verify --allow-empty -m x",
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "symref_main",
        "`git symbolic-ref refs/heads/main refs/heads/lane/alpha`",
        "$GIT symbolic-ref refs/heads/main refs/heads/lane/alpha",
        "main",
        PASSES,
        MMR,
        EACCES,
        ("main",),
    ),
    Row(
        "symref_main_moved",
        "main a symbolic ref to `refs/remotes/o/x` (unseen), then `git update-ref refs/remotes/o/x`",
        '$GIT update-ref refs/remotes/o/x "$TIP"',
        "main",
        MMR,
        MMR,
        R("main_not_plain"),  # exec --sandbox does not start while main is symbolic
        pre='$REAL update-ref refs/remotes/o/x "$MAIN" && $REAL symbolic-ref refs/heads/main refs/remotes/o/x',
    ),
    Row(
        "symref_main_lane_file",
        "main a symbolic ref to `refs/heads/lane/zz` (unseen), then a plain write of that ref's file",
        'printf "%s\\n" "$TIP" > "$COMMON/refs/heads/lane/zz"',
        "main",
        PASSES,
        PASSES,
        R("main_not_plain"),  # the sandbox grants refs/heads/lane/: exec does not start
        ("main",),
        pre='$REAL update-ref refs/heads/lane/zz "$MAIN" && $REAL symbolic-ref refs/heads/main refs/heads/lane/zz',
    ),
    Row(
        "worktree_add_force",
        "`git worktree add --force DIR main`, then commit there",
        '$GIT worktree add -q --force "$SCR/wt" main && cd "$SCR/wt" && $GIT commit -q --no-verify --allow-empty -m x',
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "checkout_B",
        "`git checkout -B main`",
        '$GIT checkout -q -B main "$TIP"',
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "reset_hard",
        "`git reset --hard HEAD~1` on main",
        ON_MAIN + "$GIT reset -q --hard HEAD~1",
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "rebase",
        "`git rebase` on main",
        ON_MAIN + '$GIT rebase -q "$TIP"',
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "amend",
        "`git commit --amend --no-verify` on main",
        ON_MAIN + "$GIT commit -q --amend --no-verify --allow-empty -m x",
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "cherry_pick",
        "`git cherry-pick` on main",
        ON_MAIN + '$GIT cherry-pick "$TIP"',
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "merge",
        "`git merge --ff-only` on main",
        ON_MAIN + '$GIT merge -q --ff-only "$TIP"',
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "revert",
        "`git revert` on main",
        ON_MAIN + "$GIT revert --no-edit HEAD",
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "am",
        "`git am` on main",
        '$GIT format-patch -q -1 --stdout "$TIP" > "$SCR/p" && ' + ON_MAIN + '$GIT am -q "$SCR/p"',
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "pack_refs",
        "`git pack-refs --all`",
        "$GIT pack-refs --all",
        "main",
        HARMLESS,
        HARMLESS,
        EACCES,
    ),
    Row(
        "gc_prune",
        "`git reflog expire --expire=now --all && git gc --prune=now` (landed tips)",
        "$GIT reflog expire --expire=now --all && $GIT gc -q --prune=now",
        "landed",
        HARMLESS,
        MMR,
        EACCES,
    ),
    Row(
        "reflog_rewind",
        "`git reflog delete --updateref --rewrite main@{0}`",
        "$GIT reflog delete --updateref --rewrite main@{0}",
        "main",
        PASSES,
        MMR,
        EACCES,
        ("main_moved",),
    ),
    # -- around git: other writers, other gits ----------------------------------------------
    Row(
        "loose_ref",
        "writing `.git/refs/heads/main` by hand",
        'printf "%s\\n" "$TIP" > "$COMMON/refs/heads/main"',
        "main",
        PASSES,
        PASSES,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "loose_ref_link",
        "a link at `refs/heads/main` git reads through (`-> ../../worktrees/alpha/HEAD`, made beforehand, outside the layer), then a write of the lane's admin `HEAD`",
        'printf "%s\\n" "$TIP" > "$COMMON/worktrees/alpha/HEAD"',
        "main",
        PASSES,
        PASSES,
        R("main_not_plain"),
        ("main",),
        pre='$REAL -C "$LANE" switch -q --detach "$MAIN" && rm "$COMMON/refs/heads/main" && '
        'ln -s ../../worktrees/alpha/HEAD "$COMMON/refs/heads/main"',
    ),
    Row(
        "loose_ref_hardlink",
        "a hard link at a lane ref's name to main's loose file (`ln refs/heads/main refs/heads/lane/zz`, made beforehand, outside the layer), then a write of that lane ref's file",
        'printf "%s\\n" "$TIP" > "$COMMON/refs/heads/lane/zz"',
        "main",
        PASSES,
        PASSES,
        R("main_not_plain"),
        ("main", "git dir links"),
        pre='ln "$COMMON/refs/heads/main" "$COMMON/refs/heads/lane/zz"',
    ),
    Row(
        "packed_refs_hardlink",
        "`packed-refs` (main packed) hard-linked at a lane ref's name (`refs/heads/lane/yy`, made beforehand, outside the layer), then an in-place edit of that file",
        'sed "s/^$MAIN refs.heads.main\\$/$TIP refs\\/heads\\/main/" "$COMMON/refs/heads/lane/yy" > "$SCR/p" && '
        'cat "$SCR/p" > "$COMMON/refs/heads/lane/yy"',
        "main",
        PASSES,
        PASSES,
        R("main_not_plain"),
        ("main", "git dir links"),
        pre='$REAL -C "$HUB" pack-refs --all && mkdir -p "$COMMON/refs/heads/lane" && '
        'ln "$COMMON/packed-refs" "$COMMON/refs/heads/lane/yy"',
    ),
    Row(
        "packed_refs",
        "hand-editing `packed-refs` (loose main removed)",
        'printf "%s refs/heads/main\\n" "$TIP" > "$COMMON/packed-refs" && rm "$COMMON/refs/heads/main"',
        "main",
        PASSES,
        PASSES,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "reinit_template",
        "re-running `git init --template=DIR` in the hub (main packed: no loose file), DIR holding `refs/heads/main` and a landed ref (also `init.templateDir`, `GIT_TEMPLATE_DIR`): git copies what the git dir lacks with plain writes",
        'mkdir -p "$SCR/tpl/refs/heads" "$SCR/tpl/refs/git-lane/landed" && '
        'echo "$TIP" > "$SCR/tpl/refs/heads/main" && '
        'echo "$TIP" > "$SCR/tpl/refs/git-lane/landed/0000000009" && '
        'cd "$HUB" && $GIT init -q --template="$SCR/tpl"',
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved", "unvouched landed ref"),
        pre='$REAL -C "$HUB" pack-refs --all',
    ),
    Row(
        "dulwich",
        "dulwich (a pure-Python git) setting main",
        'python3 -c "import sys; from dulwich.repo import Repo; Repo(sys.argv[1]).refs[b\'refs/heads/main\'] = sys.argv[2].encode()" "$COMMON" "$TIP"',
        "main",
        PASSES,
        PASSES,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "abs_git",
        "the real git by its path (`/usr/bin/git update-ref`)",
        '"$REAL" update-ref refs/heads/main "$TIP"',
        "main",
        MMR,
        PASSES,
        EACCES,
    ),
    Row(
        "abs_git_hooks_off",
        "the real git by its path with `-c core.hooksPath=/dev/null`",
        '"$REAL" -c core.hooksPath=/dev/null update-ref refs/heads/main "$TIP"',
        "main",
        PASSES,
        PASSES,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "path_reorder",
        "PATH reordered so the real git comes first",
        'PATH="${REAL%/*}:$PATH" git update-ref refs/heads/main "$TIP"',
        "main",
        MMR,
        PASSES,
        EACCES,
    ),
    Row(
        "git_dir",
        "`GIT_DIR=<common dir> git update-ref`",
        'GIT_DIR="$COMMON" ' + MOVE,
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "git_common_dir",
        "`GIT_COMMON_DIR` naming the common dir",
        'GIT_COMMON_DIR="$COMMON" ' + MOVE,
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "git_work_tree",
        "`GIT_WORK_TREE=<hub> git checkout TIP -- tip.txt`",
        'GIT_WORK_TREE="$HUB" $GIT checkout -q "$TIP" -- tip.txt',
        "hub_new",
        PASSES,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "git_index_file",
        "`GIT_INDEX_FILE=<hub's index> git read-tree`",
        'GIT_INDEX_FILE="$COMMON/index" $GIT read-tree "$TIP"',
        "hub_index",
        PASSES,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "dash_C",
        "`git -C <hub> checkout TIP -- tip.txt`",
        '$GIT -C "$HUB" checkout -q "$TIP" -- tip.txt',
        "hub_new",
        PASSES,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "git_dir_opt",
        "`git --git-dir=<common dir> update-ref`",
        '$GIT --git-dir="$COMMON" update-ref refs/heads/main "$TIP"',
        "main",
        MMR,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "work_tree_opt",
        "`git --work-tree=<hub> checkout TIP -- tip.txt`",
        '$GIT --work-tree="$HUB" checkout -q "$TIP" -- tip.txt',
        "hub_new",
        PASSES,
        OUTSIDE,
        EACCES,
    ),
    # -- files outside the lane -----------------------------------------------------------------
    Row(
        "redirect",
        "a shell redirection to a file outside (`> FILE`)",
        'printf x > "$OUT"',
        "out",
        PASSES,
        PASSES,
        EACCES,
    ),
    Row(
        "symlink",
        "writing through a symlink to outside (`write link/file`)",
        'ln -s "${OUT%/*}" link && printf x | wr link/target.txt',
        "out",
        PASSES,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "hardlink",
        "writing through a hard link to an outside file",
        'ln "$OUT" hl && printf x | wr hl',
        "out",
        PASSES,
        OUTSIDE,
        Cell("kernel", "EXDEV"),
    ),
    Row(
        "hardlink_planted",
        "writing through a hard link to an outside file that was made beforehand, outside the layer",
        "printf x | wr planted",
        "out",
        PASSES,
        OUTSIDE,
        PASSES,
        pre='ln "$OUT" planted',
    ),
    Row(
        "hardlink_planted_git_dir",
        "appending to a hard link to the repository's `config` planted in a git dir the sandbox grants (`ln config refs/heads/lane/cfg`, made beforehand, outside the layer)",
        'printf "[core]\\n\\thooksPath = %s\\n" "$SCR" >> "$COMMON/refs/heads/lane/cfg"',
        "config",
        PASSES,
        PASSES,
        SPLIT,
        ("git dir links", "core.hooksPath"),
        pre='mkdir -p "$COMMON/refs/heads/lane" && ln "$COMMON/config" "$COMMON/refs/heads/lane/cfg"',
    ),
    Row(
        "dotdot",
        "a `..` path out of the lane (`write ../../FILE`)",
        'printf x | wr "$REL"',
        "out",
        PASSES,
        OUTSIDE,
        EACCES,
    ),
    Row(
        "truncate",
        "`truncate -s 0` of a hub file",
        'truncate -s 0 "$HUB/README.md"',
        "hub_file",
        PASSES,
        PASSES,
        EACCES,
    ),
    # -- git running a program, or writing, past the shim (red team 13A) -----------------------
    Row(
        "ro_home_config",
        "a read-only `git status` with `HOME` naming the lane, whose `.gitconfig` sets `core.fsmonitor`",
        EVIL
        + 'printf "[core]\\n\\tfsmonitor = %s\\n" "$LANE/evil.sh" > "$LANE/.gitconfig" && HOME="$LANE" $GIT status --short'
        + MOVED,
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved",),
    ),
    Row(
        "trailer_command",
        "`git -c trailer.x.command=PROG interpret-trailers`",
        EVIL
        + '$GIT -c trailer.x.command="$LANE/evil.sh" interpret-trailers --trailer x=1 </dev/null'
        + MOVED,
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved",),
    ),
    Row(
        "path_editor",
        "`GIT_EDITOR=vi git commit` with the lane's own `vi` first on `PATH`",
        EVIL
        + 'mkdir -p "$LANE/.bin" && cp "$LANE/evil.sh" "$LANE/.bin/vi" && '
        + 'PATH="$LANE/.bin:$PATH" GIT_EDITOR=vi $GIT commit -q --allow-empty'
        + MOVED,
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved",),
    ),
    Row(
        "rebase_update_refs",
        "`git rebase --update-refs` over a range main points into",
        "GIT_COMMITTER_DATE=2026-02-02T00:00:00+00:00 GIT_SEQUENCE_EDITOR=true "
        "$GIT rebase -q -i --root --update-refs --force-rebase"
        + MOVED.replace('"$TIP"', '"$MAIN"').replace(" = ", " != "),
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "checkout_guess",
        "`git checkout foo` creating branch foo from `origin/foo` (git's guess)",
        "$GIT checkout -q foo",
        "refs/heads/foo",
        PASSES,
        MMR,
        EACCES,
        pre="$REAL fetch -q . lane/alpha:refs/remotes/origin/foo && $REAL remote add origin /nonexistent",
    ),
    Row(
        "git_config_env",
        "`GIT_CONFIG=FILE git config a.b c` (a file outside)",
        'GIT_CONFIG="$OUT" $GIT config a.b c',
        "out",
        PASSES,
        HOOKS_OFF,
        EACCES,
    ),
    # -- config keys that run a program, options parsed as git does (red team 13D) ------------
    Row(
        "ssh_key_command",
        "`git -c gpg.ssh.defaultKeyCommand=PROG commit` (ssh signing)",
        EVIL
        + '{ $GIT -c gpg.format=ssh -c commit.gpgSign=true -c gpg.ssh.defaultKeyCommand="$LANE/evil.sh" commit -q --allow-empty -m x </dev/null || true; }'
        + MOVED,
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved",),
    ),
    Row(
        "editor_driven",
        "an editor git starts, driven through its stdin (`:!PROG` typed into `git commit`'s vi)",
        EVIL
        + '{ printf ":!%s\\n:q!\\n" "$LANE/evil.sh" | GIT_EDITOR=vi $GIT commit -q --allow-empty >/dev/null || true; }'
        + MOVED,
        "main",
        PASSES,
        PASSES,
        EACCES,
        ("main_moved",),
        needs="vi",
    ),
    Row(
        "tar_filter_command",
        "`git -c tar.X.command=PROG archive --format=X` (archive is read-only)",
        EVIL
        + '$GIT -c tar.evil.command="$LANE/evil.sh" archive --format=evil HEAD >/dev/null'
        + MOVED,
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved",),
    ),
    Row(
        "instruction_format",
        "a message line `exec PROG` made a todo command by `-c rebase.instructionFormat=%B`",
        EVIL
        + '$GIT commit -q --allow-empty -m s -m "exec $LANE/evil.sh" && '
        + "{ $GIT -c rebase.instructionFormat=%B rebase -q --force-rebase HEAD~1 </dev/null || true; }"
        + MOVED,
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved",),
    ),
    Row(
        "clone_config",
        "`git clone -c core.hooksPath=DIR` into the lane (a post-checkout of the lane's)",
        EVIL
        + 'mkdir -p "$LANE/hk" && printf "#!/bin/sh\\nunset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE\\nexec %s\\n" "$LANE/evil.sh" > "$LANE/hk/post-checkout" && chmod +x "$LANE/hk/post-checkout" && '
        + '{ $GIT clone -q -c core.hooksPath="$LANE/hk" "$COMMON" "$LANE/d1" </dev/null || true; }'
        + MOVED,
        "main",
        PASSES,
        HOOKS_OFF,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "gc_prune_expire",
        "`git -c gc.pruneExpire=now gc` with the reflogs expired by config (landed tips)",
        "$GIT -c gc.reflogExpire=now -c gc.reflogExpireUnreachable=now -c gc.pruneExpire=now gc -q",
        "landed",
        HARMLESS,
        MMR,
        EACCES,
    ),
    Row(
        "branch_track",
        "`git branch -f -t main lane/alpha` (`-t` takes no value)",
        "$GIT branch -f -t main lane/alpha",
        "main",
        MMR,
        MMR,
        EACCES,
    ),
    Row(
        "fetch_tag",
        "`git fetch . lane/alpha:refs/tags/v9` (tags are shared)",
        "$GIT fetch -q . lane/alpha:refs/tags/v9",
        "refs/tags/v9",
        PASSES,
        MMR,
        EACCES,
    ),
    Row(
        "fetch_landed",
        "`git fetch . +main:refs/git-lane/landed/x` (git-lane's namespace)",
        "$GIT fetch -q . +lane/alpha:refs/git-lane/landed/x",
        "landed",
        MMR,
        MMR,
        EACCES,
    ),
    # -- git-lane itself -------------------------------------------------------------------------
    Row(
        "uninstall_worker",
        "`git lane uninstall` by a worker",
        "git lane uninstall && " + MOVE,
        "main",
        Cell("na", "no worker outside exec: `hook_delete`"),
        R("role_forbidden"),
        R("role_forbidden"),
    ),
    Row(
        "config_disable_worker",
        "`git lane config set enabled false` by a worker",
        "git lane config set enabled false && " + MOVE,
        "main",
        Cell("na", "no worker outside exec"),
        R("role_forbidden"),
        R("role_forbidden"),
    ),
    Row(
        "config_toml_edit",
        "`enabled = false` written into `config.toml` by hand",
        'printf "enabled = false\\n" >> "$COMMON/git-lane/config.toml" && ' + MOVE,
        "main",
        PASSES,
        PASSES,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "user_config_env",
        "`XDG_CONFIG_HOME` naming a config that says `enabled = false`",
        'mkdir -p "$SCR/x/git-lane" && printf "enabled = false\\n" > "$SCR/x/git-lane/config.toml" && XDG_CONFIG_HOME="$SCR/x" '
        + MOVE,
        "main",
        PASSES,
        HOOKS_OFF,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "forge_lock",
        "a forged lock record naming the writer itself, then `update-ref`",
        'mkdir -p "$COMMON/git-lane/locks" && printf "pid=%s\\nstart_ticks=%s\\ntip=%s\\nmain_before=%s\\n" $$ "$(cut -d" " -f22 /proc/$$/stat)" "$TIP" "$MAIN" > "$COMMON/git-lane/locks/integration.owner" && $GIT update-ref refs/heads/main "$TIP" "$MAIN"',
        "main",
        PASSES,
        MMR,
        EACCES,
        ("main_moved",),
    ),
    Row(
        "lane_record",
        "`lanes/alpha.json` edited to name the hub, then a write there",
        'python3 -c "import json, sys; p = sys.argv[1]; d = json.load(open(p)); d[\'path\'] = sys.argv[2]; open(p, \'w\').write(json.dumps(d))" "$COMMON/git-lane/lanes/alpha.json" "$HUB" && printf x | wr "$HUB/README.md"',
        "hub_file",
        PASSES,
        R("shim_facts_unknown"),
        EACCES,
        ("lane alpha",),
    ),
    Row(
        "epoch_edit",
        "`epoch.json` rewritten by hand",
        'printf "{\\"epoch\\": 0}\\n" > "$COMMON/git-lane/epoch.json"',
        "epoch",
        PASSES,
        PASSES,
        EACCES,
        ("epoch",),
    ),
    Row(
        "epoch_forged_land",
        "`epoch.json` rewritten to name a land at the lane's tip, which no landed ref records (red team 17 hooks F4: restore-main moved main there)",
        'python3 -c "import json, sys; p = sys.argv[1]; d = json.load(open(p)); d.update(epoch=d.get(\'epoch\', 0) + 1, main_after=sys.argv[2]); open(p, \'w\').write(json.dumps(d))" "$COMMON/git-lane/epoch.json" "$TIP"',
        "epoch",
        PASSES,
        PASSES,
        EACCES,
        ("unvouched land",),
    ),
    # -- the process's environment and PATH (red team 13D) -------------------------------------
    Row(
        "git_trace_file",
        "`GIT_TRACE=<hub file> git status` (git appends its trace, argv included, there)",
        'GIT_TRACE="$HUB/README.md" $GIT status --short >/dev/null',
        "hub_file",
        PASSES,
        R("unsafe_config"),
        HARMLESS,
    ),
    Row(
        "path_lane_dir",
        "a PATH with a lane directory first, whose `vi` git starts as the editor",
        EVIL
        + 'mkdir -p "$LANE/bin" && cp "$LANE/evil.sh" "$LANE/bin/vi" && '
        + 'PATH="$LANE/bin:$PATH" GIT_EDITOR=vi $GIT commit -q --allow-empty </dev/null'
        + MOVED,
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved",),
    ),
    Row(
        "allow_protocol_ext",
        "`GIT_ALLOW_PROTOCOL=ext git ls-remote ext::PROG`",
        EVIL + '{ GIT_ALLOW_PROTOCOL=ext $GIT ls-remote "ext::$LANE/evil.sh" || :; }' + MOVED,
        "main",
        PASSES,
        R("unsafe_config"),
        EACCES,
        ("main_moved",),
    ),
    Row(
        "index_file_read_only",
        "`GIT_INDEX_FILE=<hub's index> git status` (a read-only command refreshes the index)",
        'GIT_INDEX_FILE="$COMMON/index" $GIT status --short >/dev/null',
        "hub_index",
        PASSES,
        OUTSIDE,
        HARMLESS,
    ),
    Row(
        "git_dir_read_only",
        "`git --git-dir=<common dir> status` in the lane (a read-only command refreshes the "
        "hub's index against the lane's files)",
        '$GIT --git-dir="$COMMON" status --short >/dev/null',
        "hub_index",
        PASSES,
        OUTSIDE,
        HARMLESS,
    ),
)


def stopped_by(row: Row) -> str:
    names = [layer for layer in LAYERS if row.cell(layer).stops]
    return ", ".join(names) if names else "**none**"


def afterwards(row: Row) -> str:
    """What `git lane doctor` fails on after the row passed the hooks (with the hooks in,
    nothing else would let it through on its own)."""
    if row.hooks.kind != "passes":
        return "—"
    return "doctor " + ", ".join(f"`{a}`" for a in row.after) if row.after else "**nothing**"


def matrix_lines() -> list[str]:
    out = [
        "| test id | vector | hooks | shims | sandbox | stopped by | afterwards |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in ROWS:
        cells = [f"`{r.id}`", r.vector, *(r.cell(x).text() for x in LAYERS)]
        out.append("| " + " | ".join([*cells, stopped_by(r), afterwards(r)]) + " |")
    return out


START, END = "<!-- bypass-matrix:start -->", "<!-- bypass-matrix:end -->"


def doc_lines() -> list[str]:
    text = DOC.read_text()
    assert START in text and END in text, "docs/trust-boundary.md has no bypass matrix"
    body = text.split(START, 1)[1].split(END, 1)[0]
    return [ln for ln in body.splitlines() if ln.startswith("|")]


def test_doc_matrix_is_the_table() -> None:
    """The doc's table is ROWS, row for row and cell for cell: a changed expectation
    changes the doc (python3 tests/test_bypass_matrix.py prints it)."""
    ids = [r.id for r in ROWS]
    assert len(set(ids)) == len(ids)
    # afterwards is tested where the hooks let the row through, and only there
    assert all(not r.after or r.hooks.kind == "passes" for r in ROWS)
    doc = doc_lines()
    doc_ids = [ln.split("|")[1].strip().strip("`") for ln in doc[2:]]
    assert doc_ids == ids
    assert doc == matrix_lines()


# -- the layers ------------------------------------------------------------------------------
@dataclass
class Layer:
    name: str
    repo: Repo
    lane: Path
    main: str
    tip: str
    out: Path
    scratch: Path
    env: dict[str, str]
    snap: dict[str, dict[str, tuple[str, bytes, int]]]
    baseline: set[str]

    @property
    def files(self) -> dict[str, Path]:
        c = self.repo.common_dir
        return {
            "out": self.out,
            "hub_file": self.repo.path / "README.md",
            "hub_new": self.repo.path / "tip.txt",
            "hub_index": c / "index",
            "epoch": c / "git-lane" / "epoch.json",
            "hook": c / "hooks" / "reference-transaction",
            "config": c / "config",
        }


def _trees(layer_repo: Repo, lane_path: Path, out: Path) -> dict[str, Path]:
    return {
        "common": layer_repo.common_dir,
        "hub": layer_repo.path,
        "lane": lane_path,
        "out": out.parent,
    }


def _walk(root: Path, skip: tuple[str, ...]) -> dict[str, tuple[str, bytes, int]]:
    found: dict[str, tuple[str, bytes, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [
            d for d in dirnames if os.path.normpath(os.path.join(rel_dir, d)) not in skip
        ]
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.relpath(p, root))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(p).encode(), 0)
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", b"", stat.S_IMODE(st.st_mode))
            else:
                found[rel] = ("file", Path(p).read_bytes(), stat.S_IMODE(st.st_mode))
    return found


SKIP = {"common": ("objects",), "hub": (".git",), "lane": (), "out": ()}


def snapshot(trees: dict[str, Path]) -> dict[str, dict[str, tuple[str, bytes, int]]]:
    return {k: _walk(p, SKIP[k]) for k, p in trees.items()}


def restore(trees: dict[str, Path], snap: dict[str, dict[str, tuple[str, bytes, int]]]) -> None:
    """Put every tree back as snapshot() saw it (objects/ aside: extra objects move
    nothing)."""
    for key, root in trees.items():
        want = snap[key]
        now = _walk(root, SKIP[key])
        for rel in sorted(set(now) - set(want), reverse=True):
            p = root / rel
            if now[rel][0] == "dir":
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        for rel, (kind, data, mode) in sorted(want.items()):
            p = root / rel
            if now.get(rel) == (kind, data, mode):
                continue
            if p.is_symlink() or (p.exists() and not p.is_dir()):
                p.unlink()
            elif p.is_dir() and kind != "dir":
                shutil.rmtree(p)
            if kind == "dir":
                p.mkdir(exist_ok=True)
                p.chmod(mode)
            elif kind == "link":
                p.symlink_to(data.decode())
            else:
                p.write_bytes(data)
                p.chmod(mode)


def doctor_fails(repo: Repo) -> set[str]:
    """The checks `git lane doctor` fails (its engine, in-process: the row itself ran for
    real; this only reads what it left)."""
    res = doctor.run(GRepo.discover(repo.path))
    return {c["name"] for c in res["checks"] if c["status"] == "fail"}


def build(name: str, factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Layer:
    """A repository for one layer, built in the calling test's hermetic environment (conftest's
    hermetic_seal), which every later test of that layer gets back (Layer.env)."""
    base = factory.mktemp(f"bypass-{name}")
    bindir = base / "bin"  # `git lane` on PATH runs this checkout (conftest's gitlane_on_path)
    bindir.mkdir()
    exe = bindir / "git-lane"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m guard "$@"\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    )
    env = dict(os.environ)
    hub = base / "hub"
    hub.mkdir()
    git(hub, "init", "-q", "-b", "main")
    (hub / "README.md").write_text("hello\n")
    git(hub, "add", "README.md")
    git(hub, "commit", "-q", "-m", "init")
    repo = Repo(hub)
    if name == "hooks":
        assert repo.lane("install").rc == 0
    else:  # a stand-in, for the rows that delete or edit it
        h = repo.common_dir / "hooks" / "reference-transaction"
        h.write_text("#!/bin/sh\nexit 0\n")
        h.chmod(0o755)
    repo.config("gate_command", "true")
    lane_path = repo.create("alpha")
    repo.commit(lane_path, "landed.txt", "landed\n")
    r = repo.lane("land", "alpha")
    assert r.rc == 0, r.stderr
    tip = repo.commit(lane_path, "tip.txt", "tip\n")
    git(hub, "switch", "-q", "--detach")  # git's own "checked out" guards out of the way
    main = repo.sha() or ""
    out = base / "outside" / "target.txt"
    out.parent.mkdir()
    out.write_text("outside\n")
    scratch = base / "scratch"
    scratch.mkdir()
    baseline = doctor_fails(repo)
    layer = Layer(name, repo, lane_path, main, tip, out, scratch, env, {}, baseline)
    layer.snap = snapshot(_trees(repo, lane_path, out))
    return layer


@pytest.fixture(scope="module")
def layers() -> dict[str, Layer]:
    """One repository per layer, built by its first row and shared by the module: each row
    puts it back as it found it (restore)."""
    return {}


@pytest.fixture
def layer(
    request: pytest.FixtureRequest,
    layers: dict[str, Layer],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Layer]:
    name = request.param
    if name == "sandbox" and sandbox.usable(sandbox.abi()):
        pytest.skip(f"no usable Landlock on this kernel: {sandbox.usable(sandbox.abi())}")
    if name not in layers:
        layers[name] = build(name, tmp_path_factory, monkeypatch)
    lay = layers[name]
    for k in set(os.environ) - set(lay.env):
        monkeypatch.delenv(k)
    for k, v in lay.env.items():
        monkeypatch.setenv(k, v)
    yield lay
    restore(_trees(lay.repo, lay.lane, lay.out), lay.snap)
    git(lay.repo.path, "worktree", "prune")


PRELUDE = r"""
set -e
GIT=$1 REAL=$2 MAIN=$3 TIP=$4 HUB=$5 COMMON=$6 LANE=$7 OUT=$8 REL=$9
shift 9
SCR=${1:-${TMPDIR:-/tmp}} WRITER=$2
wr() { if [ "$WRITER" = write ]; then write "$1"; else tee "$1" > /dev/null; fi; }
"""


def run_row(lay: Layer, row: Row) -> LaneRun:
    # the sandbox's private TMPDIR is known only inside: an empty SCR means "$TMPDIR"
    scr = "" if lay.name == "sandbox" else str(lay.scratch)
    args = [
        "git" if lay.name != "sandbox" else REAL_GIT,
        REAL_GIT,
        lay.main,
        lay.tip,
        os.path.realpath(lay.repo.path),
        os.path.realpath(lay.repo.common_dir),
        os.path.realpath(lay.lane),
        str(lay.out),
        os.path.relpath(lay.out, os.path.realpath(lay.lane)),
        scr,
        "write" if lay.name == "shims" else "tee",
    ]
    script = PRELUDE + row.script
    sh = ["sh", "-c", script, "sh", *args]
    if row.pre:
        pre = subprocess.run(["sh", "-c", PRELUDE + row.pre, "sh", *args], cwd=lay.lane)
        assert pre.returncode == 0
    if lay.name == "hooks":
        res = subprocess.run(sh, cwd=lay.lane, text=True, capture_output=True, timeout=120)
        return LaneRun(res.returncode, res.stdout, res.stderr)
    exec_args = ["exec", "--sandbox", "alpha"] if lay.name == "sandbox" else ["exec", "alpha"]
    return lane(*exec_args, "--", *sh, cwd=lay.lane)


def aimed(lay: Layer, row: Row) -> object:
    """What the row aims at, as it stands now."""
    if row.target == "main":
        return lay.repo.sha("main")
    if row.target.startswith("refs/"):
        return lay.repo.sha(row.target)
    if row.target == "main_meaning":  # replace refs change what main's commit means
        return (lay.repo.sha("main"), git(lay.repo.path, "for-each-ref", "refs/replace/").stdout)
    if row.target == "landed":  # every landed tip is still there
        refs = git(lay.repo.path, "for-each-ref", "--format=%(objectname)", "refs/git-lane/landed/")
        shas = refs.stdout.split()
        kept = [git(lay.repo.path, "cat-file", "-t", s, check=False).returncode == 0 for s in shas]
        return (lay.repo.sha("main"), shas, kept)
    p = lay.files[row.target]
    return (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) if p.exists() else None


def events_text(lay: Layer) -> str:
    p = Path(lay.repo.common_dir) / "git-lane" / "events.jsonl"
    return p.read_text() if p.exists() else ""


CASES = [pytest.param(layer, row, id=f"{row.id}-{layer}") for row in ROWS for layer in LAYERS]


@pytest.mark.parametrize(("layer", "row"), CASES, indirect=["layer"])
def test_bypass(layer: Layer, row: Row) -> None:
    cell = row.cell(layer.name)
    if cell.kind == "na":
        pytest.skip(f"not a thing in the {layer.name} layer: {cell.code}")
    if row.id == "dulwich":
        pytest.importorskip("dulwich")
    if row.needs and shutil.which(row.needs) is None:
        pytest.skip(f"no {row.needs} on this machine")
    before = aimed(layer, row)
    r = run_row(layer, row)
    seen = r.stdout + r.stderr
    after = aimed(layer, row)
    # never ours (a third-party library the row runs may print its own)
    assert "Traceback" not in seen or "guard" not in seen.split("Traceback", 1)[1], seen
    if cell.kind == "refused":  # 1 from a shim or the engine; git's own 128 after a hook
        assert r.rc in (1, 128), (r.rc, seen)
        assert f"git-lane: refused [{cell.code}]" in r.stderr, seen
        assert after == before, seen
    elif cell.kind == "kernel":
        assert r.rc != 0, (r.rc, seen)
        assert "git-lane: refused" not in seen, seen
        assert STRERROR[cell.code] in seen or any(w in seen for w in GIT_WORDS), seen
        assert after == before, seen
    elif cell.kind == "harmless":
        assert r.rc == 0, (r.rc, seen)
        assert after == before, seen
    elif cell.kind == "undone":
        assert r.rc == 0, (r.rc, seen)
        assert after == before, seen
        events = events_text(layer)
        assert cell.code in events, events[-2000:]
    elif cell.kind == "split":
        assert r.rc == 0, (r.rc, seen)
        assert after == before, seen
        events = events_text(layer)
        assert f'"kind": "{cell.code}"' in events, events[-2000:]
    else:
        assert cell.kind == "passes"
        assert r.rc == 0, (r.rc, seen)
        assert after != before, seen
        if layer.name != "hooks":  # doctor's baseline is clean only where the hooks are in
            return
        fails = doctor_fails(layer.repo) - layer.baseline
        assert fails == set(row.after), (fails, seen)


if __name__ == "__main__":
    print(START)
    print("\n".join(matrix_lines()))
    print(END)
