"""The failure types of git-lane and the registry of refusal codes.

A Refusal is an expected 'no': a stable code from CODES, a sentence, and the exact
commands that recover. A GitError is git failing where it should not have (a bug, or a
broken repository): it reaches the error boundary, which writes a crash file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Code:
    """A refusal code: what it means and which layer raises it (the gate, where one applies)."""

    name: str
    layer: str  # engine | hooks | shims | sandbox | install | adapter
    gate: str | None
    meaning: str


def _codes(*rows: tuple[str, str, str | None, str]) -> dict[str, Code]:
    return {r[0]: Code(*r) for r in rows}


# Every code a Refusal (or a hook's gl_refuse) may carry. docs/codes.md documents each;
# tests/test_codes.py holds the two lists equal and checks every Refusal(...) uses one.
CODES: dict[str, Code] = _codes(
    ("not_a_git_repo", "engine", None, "not inside a git repository"),
    ("no_main_branch", "engine", None, "no main, master or configured main branch has a commit"),
    ("invalid_config", "engine", None, "a config file or value is not valid"),
    ("invalid_lane_key", "engine", None, "the lane key does not match the key pattern"),
    ("unknown_lane", "engine", None, "no lane has that key"),
    ("lane_exists", "engine", None, "an active or orphaned lane has that key already"),
    ("branch_exists", "engine", None, "lane/<key> exists and is not a registered lane"),
    (
        "create_interrupted",
        "engine",
        None,
        "a create of the key died between worktree add and the registry write",
    ),
    ("worktree_path_exists", "engine", None, "the lane's worktree directory exists already"),
    ("unknown_process", "engine", None, "the named owner process is not running"),
    ("max_lanes", "engine", None, "max_lanes active lanes exist"),
    ("setup_failed", "engine", None, "setup_command failed or timed out in a created lane"),
    ("role_forbidden", "engine", None, "a worker asked for what only the owner may do"),
    ("lane_owner_conflict", "engine", None, "the lane belongs to another live process"),
    ("lane_not_active", "engine", None, "the lane is released or orphaned"),
    ("lane_branch_mismatch", "engine", None, "the lane worktree has another branch checked out"),
    ("lane_branch_missing", "engine", None, "the lane branch was deleted outside git-lane"),
    ("lane_branch_moved", "engine", None, "the lane branch was moved outside its worktree"),
    (
        "lane_pointers_tampered",
        "engine",
        None,
        "a lane's .git/commondir/gitdir name another repository",
    ),
    (
        "lane_index_unsafe",
        "engine",
        None,
        "a lane's index is no regular file, or names a path outside the lane",
    ),
    (
        "index_copy_failed",
        "engine",
        None,
        "a lane's index could not be copied for the engine's git (a file-size limit, a full disk)",
    ),
    ("worktree_restore_failed", "engine", None, "git could not check a lane out again"),
    ("lane_dirty", "engine", "G2", "the lane has uncommitted changes"),
    ("rebase_in_progress", "engine", "G9", "a sync stopped on conflicts is not finished"),
    ("no_sync_in_progress", "engine", None, "there is no sync to continue or abort"),
    (
        "sync_conflicts",
        "engine",
        "G9",
        "a sync stopped on conflicts: the worklist says what to resolve",
    ),
    (
        "sync_failed",
        "engine",
        None,
        "git could not run the rebase for a reason other than conflicts",
    ),
    ("conflict_markers_present", "engine", "G9", "a file still holds a conflict block"),
    ("conflicts_unresolved", "engine", "G9", "a conflicted path without markers was not decided"),
    (
        "conflict_file_unreadable",
        "engine",
        "G9",
        "a file of the step cannot be read as a regular file for the marker scan",
    ),
    ("stale_lane", "engine", "G3", "main is not an ancestor of the lane tip"),
    ("nothing_to_land", "engine", None, "the lane has no commits main lacks"),
    ("gate_command_unset", "engine", "G4", "the gate is on but no gate_command is set"),
    ("gate_failed", "engine", "G4", "the gate failed at the tip"),
    ("gate_timeout", "engine", "G4", "the gate ran past gate_timeout"),
    ("lane_changed_during_gate", "engine", "G4", "the lane changed while its gate ran"),
    (
        "gate_watch_failed",
        "engine",
        "G4",
        "the in-lane gate's watch on the lane's directories could not be set (inotify)",
    ),
    (
        "lane_index_flags",
        "engine",
        "G4",
        "assume-unchanged/skip-worktree files differ from the tip",
    ),
    ("submodule_differs", "engine", "G4", "a submodule is not at the commit the tip records"),
    (
        "lane_content_unverified",
        "engine",
        "G4",
        "before an in-lane gate, git could not compare the lane's files with the tip by content",
    ),
    (
        "submodule_unreadable",
        "engine",
        "G2",
        "a lane's submodule state cannot be read without running git inside it",
    ),
    (
        "untrusted_git_config",
        "engine",
        "G4",
        "a filter or attributes file set in the repository's own config could change what the gate tests",
    ),
    ("hub_dirty", "engine", "G6", "the hub has uncommitted changes to paths the land changes"),
    ("lock_busy", "engine", "G1", "another land holds the integration lock"),
    ("lock_lost", "engine", "G1", "the lock record changed under a running land"),
    ("main_update_failed", "engine", "G5", "git refused the compare-and-swap of main"),
    (
        "objects_corrupt",
        "engine",
        "G5",
        "a sandboxed lane's objects do not verify (re-hashed) or are incomplete in the shared store",
    ),
    (
        "objects_unreadable",
        "engine",
        "G5",
        "reading a sandboxed lane's own object store timed out (a FIFO planted there)",
    ),
    (
        "git_file_oversized",
        "engine",
        None,
        "a ref, HEAD or reflog a lane may write is larger than git writes and cannot be moved aside",
    ),
    (
        "git_file_not_plain",
        "engine",
        None,
        "the common HEAD or config is a FIFO, socket or device: every git would wait on it",
    ),
    (
        "git_dir_link_failed",
        "engine",
        None,
        "a file of a git dir the sandbox grants has a hard link outside it and could not be split",
    ),
    (
        "admin_unreadable",
        "engine",
        None,
        "a lane's admin dir holds a FIFO, socket or device where git reads a file",
    ),
    ("reconcile_ambiguous", "engine", None, "a dead land left main at neither recorded value"),
    ("no_landed_tip", "engine", None, "restore-main: nothing was ever landed"),
    (
        "landed_tip_unvouched",
        "engine",
        None,
        "restore-main: only state files name the land to go back to, no landed ref does",
    ),
    (
        "landed_commit_missing",
        "engine",
        None,
        "restore-main: the last landed commit is gone from the repository",
    ),
    (
        "main_moved",
        "engine",
        "G5",
        "land: main is behind the last landed tip (rewound outside any land)",
    ),
    (
        "main_ahead",
        "engine",
        "G10",
        "restore-main: main has commits on top of the landed tip that no land put there",
    ),
    (
        "main_diverged",
        "engine",
        "G10",
        "restore-main: main is neither an ancestor nor a descendant of the landed tip",
    ),
    ("unlanded_work", "engine", "G11", "releasing would lose commits or uncommitted files"),
    ("worktree_locked", "engine", "G11", "the lane worktree is locked by someone else"),
    (
        "worktree_remove_failed",
        "engine",
        "G11",
        "a lane worktree holds a submodule, or part of it could not be removed through fds",
    ),
    (
        "worktree_blocked",
        "engine",
        None,
        "git ran past its time reading a lane worktree (a FIFO at a file git opens there)",
    ),
    (
        "worktree_too_large",
        "engine",
        None,
        "git ran out of the memory a lane's read is given: its HEAD, index or worktree holds "
        "millions of paths (a tree bomb)",
    ),
    (
        "worktree_file_oversized",
        "engine",
        None,
        "a file checkpoint's (export's) `git add -A` would read is sparse far past its "
        "blocks or past 4 GiB",
    ),
    (
        "worktree_unreadable",
        "engine",
        "G11",
        "release could not look at every directory of the lane worktree for git dirs",
    ),
    ("lane_busy", "engine", "G11", "a git command is writing in the lane (its index.lock exists)"),
    ("lane_changed_during_release", "engine", "G11", "the lane branch moved while release ran"),
    (
        "branch_delete_failed",
        "engine",
        "G11",
        "git could not delete the lane branch (it did not move); the lane was kept",
    ),
    (
        "keep_failed",
        "engine",
        None,
        "a lane path `repair --keep` names could not be moved into kept/ (a name on its way "
        "became a link or no directory)",
    ),
    (
        "state_corrupt",
        "engine",
        None,
        "a state file is unreadable, of the wrong form, or a directory",
    ),
    (
        "state_write_failed",
        "engine",
        None,
        "the OS refused a write into git-lane's state dir (no space, read-only)",
    ),
    (
        "sandbox_unavailable",
        "engine",
        None,
        "exec --sandbox (or sandbox = required) has no sandbox",
    ),
    (
        "rebase_todo_untrusted",
        "engine",
        None,
        "the lane's stopped rebase holds what sync never writes (exec, merge, a strategy); not continued",
    ),
    (
        "rebase_state_untrusted",
        "engine",
        None,
        "the lane's stopped rebase names a ref, update-refs or autostash past the lane; nothing run",
    ),
    (
        "sandbox_failed",
        "sandbox",
        None,
        "exec --sandbox could not build or apply the Landlock ruleset; nothing was run",
    ),
    (
        "sandbox_denied",
        "sandbox",
        None,
        "a git-lane command in a sandboxed CMD needed a write its sandbox does not grant",
    ),
    ("real_git_unknown", "engine", None, "exec found no real git on PATH (only shims or wrappers)"),
    (
        "hook_mode_lost",
        "sandbox",
        None,
        "exec could not read or put back a hook's mode (or a directory's on the way): CMD stopped",
    ),
    (
        "land_via_supervisor_failed",
        "engine",
        None,
        "a land inside exec could not go through (or was refused by) exec's land socket",
    ),
    (
        "sync_would_conflict",
        "engine",
        None,
        "auto_sync left a lane: its rebase onto main would conflict, or overwrite ignored files",
    ),
    (
        "never_landed",
        "engine",
        None,
        "gc kept a lane that has no commits of its own and never landed",
    ),
    ("main_mutation_refused", "hooks", "G10", "something other than land tried to move main"),
    ("hook_facts_unknown", "hooks", None, "a hook could not establish a fact, so it refused"),
    (
        "main_not_plain",
        "hooks",
        None,
        "main's loose ref is a link git reads through (or, for exec --sandbox, a symbolic ref)",
    ),
    ("sync_required", "shims", "G8", "a stale lane under a mandatory policy tried to write"),
    ("path_outside_lane", "shims", None, "a write outside the lane worktree"),
    ("hooks_disabled", "shims", None, "an attempt to switch the hooks off"),
    ("shim_facts_unknown", "shims", None, "a shim could not establish a fact, so it refused"),
    ("stash_shared", "shims", None, "git stash would change refs/stash, shared by every worktree"),
    (
        "shell_alias",
        "shims",
        None,
        "a git alias runs a shell command, whose git calls would pass no shim",
    ),
    (
        "unsafe_config",
        "shims",
        None,
        "a config setting that makes git run a program past the shims, or use another repository",
    ),
    (
        "external_command",
        "shims",
        None,
        "git NAME runs an external git-NAME (or a git script), whose git calls would pass no shim",
    ),
    ("unknown_option", "shims", None, "a long option abbreviated or unknown to the command"),
    ("protected_path", "shims", None, "a write into a git dir, a .git file or git-lane state"),
    ("edit_no_match", "shims", None, "edit: the --old text does not occur in the file"),
    (
        "edit_ambiguous",
        "shims",
        None,
        "edit: the --old text occurs more than once, or not --count times",
    ),
    ("not_a_file", "shims", None, "write/edit: the path is a directory, special or missing file"),
    ("write_failed", "shims", None, "write/edit/export -o: the operating system refused the write"),
    (
        "adapter_facts_unknown",
        "adapter",
        None,
        "an agent adapter hook could not tell what a tool call would do, so it denied it",
    ),
    (
        "agent_file_conflict",
        "engine",
        None,
        "agent-setup would overwrite a tracked or foreign file, or cannot keep it out of git status",
    ),
    ("hooks_path_set", "install", None, "core.hooksPath is set, so git would not run our hooks"),
    ("hooks_path_relative", "install", None, "core.hooksPath is relative"),
    ("hook_conflict", "install", None, "chaining the existing hooks would overwrite a file"),
    (
        "export_unrepresentable",
        "engine",
        None,
        "export: the lane's work cannot be a patch series git am applies (merges, no base, a file git cannot stage)",
    ),
    (
        "checkpoint_failed",
        "engine",
        None,
        "checkpoint: git add or git commit failed (a hook or git refused); nothing was committed",
    ),
    ("disabled", "engine", None, "enabled = false in config"),
    ("not_ready", "engine", None, "queue: the lane is not marked ready"),
    (
        "lane_has_merges",
        "engine",
        None,
        "sync/queue/auto_sync: the lane has merge commits of its own; a rebase would drop them",
    ),
    (
        "ignored_in_the_way",
        "engine",
        None,
        "sync/queue/land: the lane's (or the hub's) ignored files are where main (the tip) "
        "tracks files; never overwritten",
    ),
    ("ready_stale", "engine", None, "queue: the lane moved since it was marked ready"),
    (
        "land_interrupted",
        "engine",
        "G1",
        "SIGINT/SIGTERM stopped a land; its gate was killed and the lock released",
    ),
    (
        "conflict_check_failed",
        "engine",
        None,
        "conflicts: git merge-tree could not merge a pair (or this git has no --write-tree)",
    ),
    (
        "lane_unmerged",
        "engine",
        None,
        "conflicts --include-dirty: the lane's index has unmerged paths (a lane's reason)",
    ),
)


def _comment_at(cmd: str) -> int:
    """Where the sh comment of `cmd` starts (a `#` outside quotes after a blank), or -1."""
    quote = ""
    i = 0
    while i < len(cmd):
        c = cmd[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1
        elif quote == '"':
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or cmd[i - 1] in " \t"):
            return i
        i += 1
    return -1


_HOOK_LINE = re.compile(r"git-lane: refused \[([a-z_]+)\]: (.*?)\. Next: (.*)")
# a hook's `next` taken as a command to print: a git-lane command of plain words, never
# what a path or a chained foreign hook could put on git's stderr
_HOOK_NEXT = re.compile(r"git lane [a-z][a-z-]*(?: [A-Za-z0-9._/-]+)*")


def hook_line(output: str) -> tuple[str, str, str | None] | None:
    """(code, what, next) of the refusal line a git-lane hook printed (gl_refuse, as
    Refusal.line writes it) on git's `output`: the first line that starts as one, when its
    code is in CODES. `next` is None when the hook named none, or none that is a plain
    `git lane ...` command. None when no hook of ours refused."""
    for ln in output.splitlines():
        if not ln.startswith("git-lane: refused ["):
            continue
        found = _HOOK_LINE.fullmatch(ln)
        if found is None or found.group(1) not in CODES:
            return None
        nxt = found.group(3)
        return found.group(1), found.group(2), nxt if _HOOK_NEXT.fullmatch(nxt) else None
    return None


def join_next(cmds: Sequence[str]) -> str:
    """The `next` commands as one line to paste: joined with ` && ` so a step that fails
    stops the rest (a discard never runs after a failed copy). A step's trailing `# note`
    would swallow what follows it, so the notes are gathered after the last command."""
    parts: list[str] = []
    notes: list[str] = []
    for cmd in cmds:
        at = _comment_at(cmd)
        if at < 0:
            parts.append(cmd.rstrip())
            continue
        parts.append(cmd[:at].rstrip())
        note = cmd[at:].lstrip("#").strip()
        if note:
            notes.append(note)
    out = " && ".join(p for p in parts if p)
    return out + (f"  # {'; '.join(notes)}" if notes else "")


# where a shell starts a new command: the git after one of these is a command of its own
_COMMAND_STARTS = ("&&", "||", "$(", ";", "|", "(", "`")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# the keys of a result (at any depth) and of a refusal whose values are commands to run
COMMAND_KEYS = ("next", "alternatives", "fix")


def _word_end(cmd: str, i: int) -> int:
    """Where the sh word starting at `i` ends (quotes and backslashes taken as sh does)."""
    quote = ""
    while i < len(cmd):
        c = cmd[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c in " \t;&|()`":
            return i
        i += 1
    return len(cmd)


def _skip_env(body: str, j: int, named: set[str], options: bool = False) -> int:
    """Past the NAME=value words from `j` (their names into `named`) and, after `env`
    (`options`), its options (`-u NAME`, `-i`, `-`): where the command word starts."""
    while j < len(body):
        end = _word_end(body, j)
        word = body[j:end]
        if _ASSIGNMENT.match(body, j):
            named.add(body[j : body.index("=", j)])
        elif options and word in ("-u", "--unset"):
            end = _word_end(body, _blank_end(body, end))
        elif not (options and word.startswith("-")):
            return j
        j = _blank_end(body, end)
    return j


def _blank_end(body: str, j: int) -> int:
    while j < len(body) and body[j] in " \t":
        j += 1
    return j


def pin_git(cmd: str, root: str) -> str:
    """`cmd` with every git it starts (its first word, and each after `&&`, `||`, `;`,
    `|`, `(`, `$(` or a backquote, quoted or not) given `-C ROOT` (`root` quoted for sh
    already), so that git neither finds its repository through the cwd nor reads the
    configuration there (pager.<cmd>, core.fsmonitor). A git already pinned is left as it
    is: `git -C DIR`, or one named by `GIT_DIR=` before it (git.owner_git_dir). A trailing
    `# note` is kept, unchanged."""
    at = _comment_at(cmd)
    body, note = (cmd, "") if at < 0 else (cmd[:at], cmd[at:])
    out: list[str] = []
    i, start, quote = 0, True, ""
    while i < len(body):
        c = body[i]
        if quote == "'":
            quote = "" if c == "'" else quote
            out.append(c)
            i += 1
            continue
        if start and c not in " \t":
            start = False
            named: set[str] = set()
            j = _skip_env(body, i, named)
            if body.startswith("env", j) and _word_end(body, j) == j + 3:  # env [-u N] ... git
                j += 3
                while j < len(body) and body[j] in " \t":
                    j += 1
                j = _skip_env(body, j, named, options=True)
            if body.startswith("git", j) and _word_end(body, j) == j + 3:
                k = j + 3
                rest = body[k:].lstrip(" \t")
                pinned = "GIT_DIR" in named or rest == "-C" or rest.startswith(("-C ", "-C\t"))
                out.append(body[i:k] + ("" if pinned else f" -C {root}"))
                i = k
                continue
        if c == "\\":
            out.append(body[i : i + 2])
            i += 2
            continue
        op = next((o for o in _COMMAND_STARTS if body.startswith(o, i)), None)
        if quote == '"':
            if c == '"':
                quote = ""
            elif op in ("$(", "`"):
                start = True
        elif c in "'\"":
            quote = c
        elif op is not None:
            start = True
        step = len(op) if op is not None and (quote == "" or op in ("$(", "`")) else 1
        out.append(body[i : i + step])
        i += step
    return "".join(out) + note


def pin_commands(obj: Any, root: str) -> Any:
    """`obj` (a result, a refusal's dict, any JSON-like value) with every command under a
    COMMAND_KEYS key, at any depth, pinned to `root` (pin_git); a copy, `obj` unchanged."""
    if isinstance(obj, dict):
        return {
            k: (_pin_value(v, root) if k in COMMAND_KEYS else pin_commands(v, root))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [pin_commands(v, root) for v in obj]
    return obj


def _pin_value(v: Any, root: str) -> Any:
    if isinstance(v, str):
        return pin_git(v, root)
    if isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
        return [pin_git(x, root) for x in v]
    return pin_commands(v, root)


class Refusal(Exception):
    """An expected 'no': stable `code`, a sentence `message`, the exact `next` commands
    (one recovery path, in order) and other ways out in `alternatives`."""

    def __init__(
        self,
        code: str,
        message: str,
        next: Sequence[str] = (),
        details: dict[str, Any] | None = None,
        alternatives: Sequence[str] = (),
    ) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message.rstrip(".")
        self.next = list(next)
        self.alternatives = list(alternatives)
        self.details = dict(details or {})

    def line(self) -> str:
        nxt = join_next(self.next) or "nothing to run"
        out = f"git-lane: refused [{self.code}]: {self.message}. Next: {nxt}"
        # one line per alternative: each is a whole way out on its own, never a sequence
        # to paste together with the others
        return out + "".join(f"\n  Or: {a}" for a in self.alternatives)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": False,
            "code": self.code,
            "message": self.message,
            "next": self.next,
            "alternatives": self.alternatives,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Refusal:
        """A refusal another git-lane process sent as to_dict() (exec's land socket).
        ValueError when `d` is not one or its code is not in CODES."""
        try:
            code, message = d["code"], d["message"]
            nxt, alts, details = list(d["next"]), list(d["alternatives"]), dict(d["details"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a refusal: {exc}") from None
        if code not in CODES or not isinstance(message, str):
            raise ValueError(f"not a registered refusal code: {code!r}")
        return cls(code, message, [str(n) for n in nxt], details, [str(a) for a in alts])


class Interrupted(Exception):
    """A command stopped by SIGINT or SIGTERM after it cleaned up: not a refusal (exit 1)
    but, as a shell reports a process killed by the signal, exit 128 + its number (130,
    143), with one line on stderr saying in what state it left things."""

    def __init__(
        self,
        code: str,
        message: str,
        signum: int,
        next: Sequence[str] = (),
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message.rstrip(".")
        self.signum = signum
        self.next = list(next)
        self.details = dict(details or {})

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def line(self) -> str:
        return f"git-lane: interrupted: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": False,
            "code": self.code,
            "message": self.message,
            "next": self.next,
            "alternatives": [],
            "details": self.details,
        }


class GitError(Exception):
    """git exited non-zero where the caller required success."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(str(self))

    def __str__(self) -> str:
        return (
            f"command: {' '.join(self.argv)}\n"
            f"return code: {self.returncode}\n"
            f"stdout: {self.stdout.rstrip() or '(none)'}\n"
            f"stderr: {self.stderr.rstrip() or '(none)'}"
        )
