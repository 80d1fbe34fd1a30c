"""The Claude Code adapter at run time: the PreToolUse hook `git lane agent-setup --for
claude` registers in a lane's `.claude/settings.local.json`, and its SessionStart context.

Claude Code's own Edit/Write tools write from its own process, not through PATH, so the
`write`/`edit` shims never see them; this hook asks the same policy as the shims, through
`git lane check write PATH` and `git lane check git -- ARGV`, before the tool runs.

Protocol (Claude Code hooks reference): one JSON object on stdin with `session_id`,
`transcript_path`, `cwd`, `hook_event_name`, `tool_name` and `tool_input`
(`file_path` for Write/Edit/MultiEdit, `notebook_path` for NotebookEdit, `command` for
Bash). Exit 0 lets the call go on; exit 2 blocks it and hands stderr to the model. Any
other exit is a *non-blocking* error there (the tool would run), so this module answers
0 or 2 only and denies whatever it cannot read (fail closed); the command line
agent-setup writes turns even a crash of this interpreter into exit 2.

Standard library only: it runs before every file edit and shell command of the agent."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from guard.errors import Refusal, join_next

ALLOW = 0
DENY = 2  # Claude Code: exit 2 blocks the tool call, stderr goes to the model

# the tools whose writes come from Claude Code's own process, and the key of their path
FILE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
MARK = "git-lane-agent-hook"  # in every command agent-setup writes: how it finds its own

# `python -I` ignores PYTHONPATH and the cwd: the package is found at the path we pass
BOOT_CLI = (
    "import sys; sys.path.insert(0, sys.argv[1]); from guard.cli import main; main(sys.argv[2:])"
)


@dataclass(frozen=True)
class Verdict:
    """Allow, or deny with the refusal's code and its `git-lane: refused [...]` line."""

    allow: bool
    code: str = ""
    line: str = ""
    next: tuple[str, ...] = ()


def deny(r: Refusal) -> Verdict:
    return Verdict(False, r.code, r.line(), tuple(r.next))


@dataclass(frozen=True)
class CheckResult:
    """What `git lane check ...` answered: its exit status and its JSON (None if none)."""

    rc: int
    result: dict[str, Any] | None
    stderr: str = ""


# check(kind, args, cwd, env_overlay) -> CheckResult; kind is "write" or "git"
Check = Callable[[str, Sequence[str], str, Mapping[str, str]], CheckResult]


def unknown(reason: str, key: str, **details: Any) -> Refusal:
    return Refusal(
        "adapter_facts_unknown",
        f"the git-lane hook of lane {key} denied this tool call: {reason}",
        next=[f"git lane agent-setup {shlex.quote(key)} --for claude"],
        alternatives=["git lane status"],
        details={"reason": reason, "lane": key, **details},
    )


# -- the check, in one place (the lead may swap in the decision functions) --------------
def cli_check(python: str, pypath: str) -> Check:
    """`git lane check KIND --json ...` run by the interpreter that has this package."""

    def check(kind: str, args: Sequence[str], cwd: str, overlay: Mapping[str, str]) -> CheckResult:
        argv = [python, "-I", "-c", BOOT_CLI, pypath, "check", kind, "--json"]
        argv += ["--", *args] if kind == "git" else list(args)
        env = dict(os.environ)
        env.update(overlay)
        try:
            res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            return CheckResult(-1, None, str(e))
        try:
            parsed = json.loads(res.stdout)
        except ValueError:
            parsed = None
        return CheckResult(res.returncode, parsed if isinstance(parsed, dict) else None, res.stderr)

    return check


def inproc_check(python: str, pypath: str) -> Check:
    """The same `git lane check` answered in this process: guard.commands.check's `write`
    and `git_`, the very functions the CLI runs, without starting a second interpreter
    (a Claude Code hook runs before every tool call: ~30 ms instead of ~300 ms). A module
    this interpreter cannot import (the hook runs with -S, and the unbound path may reach
    for a dependency) falls back to the CLI subprocess; any other failure is a deny."""
    fallback = cli_check(python, pypath)

    def check(kind: str, args: Sequence[str], cwd: str, overlay: Mapping[str, str]) -> CheckResult:
        from guard.commands import check as cmd

        saved = {k: os.environ.get(k) for k in overlay}
        here = os.getcwd()
        try:
            os.environ.update(overlay)
            os.chdir(cwd)
            if kind == "write":
                res: Mapping[str, Any] = cmd.write(None, args[0], cwd)
            else:
                from guard.repo import Repo

                res = cmd.git_(Repo.discover(cwd), list(args), cwd)
            return CheckResult(0, dict(res))
        except Refusal as r:
            return CheckResult(1, r.to_dict(), r.line())
        except ImportError:
            return fallback(kind, args, cwd, overlay)
        finally:
            os.chdir(here)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    return check


def _from_check(res: CheckResult, key: str, what: str) -> Verdict:
    if res.rc == 0 and res.result is not None and res.result.get("ok") is True:
        return Verdict(True)
    r = res.result
    if res.rc == 1 and r is not None and r.get("ok") is False and isinstance(r.get("code"), str):
        # the check's own refusal line (stderr), its `Or:` line with it; JSON for the rest
        lines = res.stderr.splitlines()
        start = [n for n, ln in enumerate(lines) if ln.startswith("git-lane: refused [")]
        nxt = tuple(str(n) for n in r.get("next") or [])
        if start:
            line = "\n".join(lines[start[0] : start[0] + 2]).rstrip()
            if not line.splitlines()[-1].startswith("  Or: "):
                line = lines[start[0]]
        else:
            line = f"git-lane: refused [{r['code']}]: {r.get('message') or what}. Next: {join_next(nxt)}"
        return Verdict(False, r["code"], line, nxt)
    tail = (res.stderr.strip().splitlines() or [""])[-1][:300]
    return deny(
        unknown(f"`git lane check` gave no decision for {what} (exit {res.rc})", key, stderr=tail)
    )


# -- the decision -----------------------------------------------------------------------
def decide(event: Any, key: str, lane_path: str, check: Check) -> Verdict:
    """Allow or deny one PreToolUse event for the lane `key` at `lane_path`."""
    if not isinstance(event, dict):
        return deny(unknown("its input is not a JSON object", key))
    tool = event.get("tool_name")
    ti = event.get("tool_input")
    if not isinstance(tool, str) or not isinstance(ti, dict):
        return deny(unknown("its input has no tool_name or tool_input", key))
    cwd = event.get("cwd")
    base = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else lane_path
    if tool == "Bash":
        command = ti.get("command")
        if not isinstance(command, str):
            return deny(unknown("a Bash call without a command string", key))
        return _decide_bash(command, base, key, lane_path, check)
    field_name = FILE_TOOLS.get(tool)
    if field_name is None:  # a tool the matcher let through that we do not know
        named = [k for k in ("file_path", "notebook_path", "path") if k in ti]
        if not named:
            return Verdict(True)
        field_name = named[0]
    target = ti.get(field_name)
    if not isinstance(target, str) or not target:
        return deny(unknown(f"a {tool} call without {field_name}", key))
    path = os.path.join(base, target)  # `..` and symlinks are the check's to resolve
    mine = _adapter_file(path, lane_path)
    if mine is not None:
        return deny(
            Refusal(
                "protected_path",
                f"{mine} in lane {key} holds this hook (or could turn it off): the agent may "
                "not edit it; the owner reruns agent-setup to change it",
                next=[f"git lane agent-setup {shlex.quote(key)} --for claude"],
                details={"lane": key, "path": path, "tool": tool},
            )
        )
    return _from_check(check("write", [path], lane_path, {}), key, f"{tool} {path}")


# the Claude Code settings files of the lane: agent-setup's own (the hook's command) and
# the project's (its "disableAllHooks" would turn the hook off for the next session)
ADAPTER_FILES = (".claude/settings.local.json", ".claude/settings.json")


def _adapter_file(path: str, lane_path: str) -> str | None:
    """The lane's Claude settings file `path` is (symlinks and `..` resolved), or None."""
    real = os.path.realpath(path)
    for rel in ADAPTER_FILES:
        if real == os.path.realpath(os.path.join(lane_path, rel)):
            return rel
    return None


def _decide_bash(command: str, cwd: str, key: str, lane_path: str, check: Check) -> Verdict:
    why = disguised(command)
    if why is not None:
        return deny(
            unknown(
                f"the command may change how git runs or run it unseen ({why}); "
                "run the git command on its own, plainly",
                key,
                command=command[:500],
            )
        )
    if "git" not in normalized(command):
        return Verdict(True)  # nothing here can reach git by name, quoted or escaped
    calls = git_calls(command, cwd)
    if isinstance(calls, str):
        return deny(
            unknown(
                f"the command runs git in a form the hook cannot read ({calls}); "
                "run the git command on its own",
                key,
                command=command[:500],
            )
        )
    for call in calls:
        if call.argv[:1] == ["lane"]:
            continue  # git lane itself: the engine decides (roles, owners) on its own
        argv = list(call.argv)
        if os.path.realpath(call.cwd) != os.path.realpath(lane_path):
            argv = ["-C", call.cwd, *argv]  # where it really runs: the policy judges -C
        verdict = _from_check(
            check("git", argv, lane_path, call.env), key, "git " + shlex.join(call.argv)
        )
        if not verdict.allow:
            return verdict
    return Verdict(True)


# -- reading a shell command ------------------------------------------------------------
@dataclass(frozen=True)
class GitCall:
    argv: list[str]  # after `git`
    cwd: str
    env: dict[str, str] = field(default_factory=dict)


_SEPARATORS = set(";&|()\n")
_REDIRECT = set("<>")
_WRAPPERS = {"command", "exec", "nohup", "time", "builtin", "then", "do", "else", "{", "!"}
# commands that only read or print their arguments: a word "git" there is data
_DATA_COMMANDS = {
    "echo", "printf", "grep", "egrep", "fgrep", "rg", "ag", "ls", "cat", "head", "tail",
    "wc", "which", "type", "man", "file", "stat", "realpath", "readlink", "basename",
    "dirname", "test", "[", "true", "false", "diff", "sort", "uniq", "cut", "tr",
}  # fmt: skip
# an option whose value is a commit or tag message: a `$(...)` there only makes text
_MESSAGE_OPTIONS = ("-m", "--message", "-F", "--file", "-am")
_HEREDOC = re.compile(r"(?<!<)<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
PLACEHOLDER = "git-lane-substituted-message"


def normalized(command: str) -> str:
    """The command with line continuations, backslashes and quotes dropped: `gi\\t`,
    `gi""t` and `gi\\<newline>t` all read `git` here, as the shell runs them."""
    return re.sub(r"[\\'\"]", "", command.replace("\\\n", ""))


# the variables that decide which git runs, with what config, hooks and where: set,
# exported, declared or unset by an agent's command, they are never allowed
_GUARDED_VARS = (
    r"(?:GIT_\w*|GITLANE_\w*|PATH|CDPATH|BASH_ENV|ENV|GIT_EXEC_PATH|HOME|XDG_CONFIG_HOME"
    r"|EDITOR|VISUAL|PAGER)"
)
_BREAK = r"(?:^|[;&|(){}\n]|\bthen\b|\bdo\b|\belse\b)"
_DISGUISES: tuple[tuple[str, str], ...] = (
    (rf"{_BREAK}\s*(?:\w+=\S*\s+)*alias\b", "`alias`"),
    (
        rf"\b(?:export|declare|typeset|readonly|local|unset|set|read|getopts|mapfile|readarray"
        rf"|select|let|for|printf\s+-v)\b[^;&|\n]*\b{_GUARDED_VARS}\b",
        "setting or unsetting a GIT_*, GITLANE_*, PATH or CDPATH variable",
    ),
    (
        rf"{_BREAK}\s*(?:\w+=\S*\s+)*{_GUARDED_VARS}=\S*(?:\s+\w+=\S*)*\s*(?=$|[;&|)}}\n])",
        "assigning a GIT_*, GITLANE_*, PATH or CDPATH variable for the commands after it",
    ),
    (r"\benv\b[^;&|\n]*\s(?:-u|--unset|-i|--ignore-environment)\b", "`env` dropping variables"),
    (rf"{_BREAK}\s*(?:\w+=\S*\s+)*\$", "a variable as a command"),
    (r"\beval\b[^;&|\n]*\$", "`eval` of a variable"),
)
_INTERPRETERS = re.compile(
    r"^(?:sh|bash|zsh|dash|ksh|mksh|fish|python[0-9.]*|perl[0-9.]*|ruby|node|nodejs|deno|bun|php|lua|tclsh|awk|gawk|eval|source|\.|xargs|osascript)$"
)


def disguised(command: str) -> str | None:
    """What in `command` could make git run unseen or differently, whatever else it
    says (fail closed: the hook cannot follow these), or None."""
    text = _drop_heredoc_bodies(command, keep_code=True)
    if text is None:
        return "a here-document without its end line"
    flat = normalized(text)
    for pattern, what in _DISGUISES:
        if re.search(pattern, flat):
            return what
    why = _command_words(flat)
    if why is not None:
        return why
    cdpath = os.environ.get("CDPATH") or "CDPATH" in flat
    if cdpath and re.search(rf"{_BREAK}\s*(?:\w+=\S*\s+)*(?:cd|pushd)\b", flat):
        return "`cd` with CDPATH set"
    return None


_GLOB = re.compile(r"[*?\[]|\{[^}]*,")


def _command_words(flat: str) -> str | None:
    """A command word that is a glob or brace pattern (`/usr/bin/g?t`, `g{i,}t`: the
    shell makes git of it), code given to an interpreter with one, or a GIT_*/GITLANE_*/
    PATH-like variable assigned in front of a command that is not git (`GITLANE_INTERNAL=1
    sh y.sh`: the git in y.sh would see it)."""
    try:
        words = _words(flat)
    except ValueError as e:
        return f"unbalanced quoting ({e})"
    for seg in _segments(words):
        guarded = ours = False
        while seg and (_is_assignment(seg[0]) or seg[0] in _WRAPPERS or seg[0] == "env"):
            name = seg[0].partition("=")[0] if _is_assignment(seg[0]) else ""
            guarded |= bool(name) and re.fullmatch(_GUARDED_VARS, name) is not None
            ours |= name.startswith("GITLANE_")
            seg = seg[1:]
        if not seg:
            continue
        head = seg[0]
        if _GLOB.search(head):
            return f"`{head}`, a pattern, as a command"
        if _INTERPRETERS.match(os.path.basename(head)) and any(_GLOB.search(w) for w in seg[1:]):
            return f"`{os.path.basename(head)}` with a pattern in its code"
        if ours or (guarded and os.path.basename(head) != "git"):
            return "a GIT_*, GITLANE_*, PATH-like variable assigned for a command"
    return None


def git_calls(command: str, cwd: str) -> list[GitCall] | str:
    """The git invocations in a shell command, each with its cwd (after `cd`) and the
    variables assigned in front of it; or a string saying why it cannot be read, when git
    may run where the plain reading below does not reach (a substitution that is not a
    commit message, `eval`, `sh -c "git ..."`, `xargs git`, a variable as the command).
    Here-document bodies are text, and so is `-m "$(cat <<'EOF' ... EOF)"`, Claude
    Code's own way to write a commit message."""
    command = command.replace("\\\n", "")  # a line continuation joins, as in sh
    text = _drop_heredoc_bodies(command)
    if text is None:
        return "a here-document without its end line"
    if _drop_heredoc_bodies(command, keep_code=True) != text:
        return "a here-document fed to an interpreter (its body is code, not text)"
    text = _message_substitutions(text)
    if text is None:
        return "`$(...)` outside a commit message"
    for opaque in ("$(", "`", "<(", ">("):
        if opaque in text:
            return f"`{opaque}` in a command that names git"
    try:
        words = _words(text)
    except ValueError as e:
        return f"unbalanced quoting ({e})"
    calls: list[GitCall] = []
    for seg in _segments(words):
        env: dict[str, str] = {}
        while seg and _is_assignment(seg[0]):
            name, _, value = seg[0].partition("=")
            env[name] = value
            seg = seg[1:]
        while seg and seg[0] in _WRAPPERS:
            seg = seg[1:]
        if seg and seg[0] == "env":
            seg = seg[1:]
            while seg and _is_assignment(seg[0]):
                name, _, value = seg[0].partition("=")
                env[name] = value
                seg = seg[1:]
            if seg and seg[0].startswith("-"):
                return "`env` with options"
        if not seg:
            continue
        head = seg[0]
        if head in ("cd", "pushd"):
            if "CDPATH" in env or os.environ.get("CDPATH"):
                return "`cd` with CDPATH set"
            if len(seg) > 2 or (len(seg) == 2 and (seg[1] == "-" or "$" in seg[1])):
                return f"`{shlex.join(seg)}` (a cd it cannot follow)"
            target = seg[1] if len(seg) == 2 else os.environ.get("HOME", "/")
            cwd = os.path.normpath(os.path.join(cwd, os.path.expanduser(target)))
            continue
        if "$" in head:
            return f"`{head}` as a command"
        if os.path.basename(head) == "git":
            if any("$" in w for w in seg[1:]):
                return f"a variable in `{shlex.join(seg)[:80]}`"
            calls.append(GitCall(seg[1:], cwd, env))
            continue
        if os.path.basename(head) == "git-lane":
            continue  # our own CLI: the engine decides
        if _INTERPRETERS.match(os.path.basename(head)) and any(
            "git" in normalized(w) for w in seg[1:]
        ):
            return f"`{os.path.basename(head)}` with code that mentions git"
        runs_args = head not in _DATA_COMMANDS or (
            head == "find" and {"-exec", "-execdir", "-ok", "-okdir"} & set(seg)
        )
        if runs_args and any(_names_git(w) for w in seg[1:]):
            return f"git run by `{head}`"
    return calls


def _names_git(word: str) -> bool:
    """A word that runs git when a wrapper executes it: `git`, `/usr/bin/git`, or shell
    text with git as a command in it (`sh -c "git push"`)."""
    if os.path.basename(word) == "git":
        return True
    return re.search(r"(^|[;&|(\s])git(\s|$)", word) is not None


def _drop_heredoc_bodies(text: str, keep_code: bool = False) -> str | None:
    """`text` without its here-document bodies (text for `cat`, a commit message); with
    `keep_code`, a body fed to an interpreter (`sh <<EOF`, `python3 - <<EOF`) stays: it
    is code."""
    lines = text.split("\n")
    out: list[str] = []
    pending: list[tuple[bool, str, bool]] = []
    for line in lines:
        if pending:
            strip_tabs, delim, code = pending[0]
            if (line.lstrip("\t") if strip_tabs else line) == delim:
                pending.pop(0)
                if code:
                    out.append(line)
            elif code:
                out.append(line)
            continue
        out.append(line)
        code = keep_code and _feeds_interpreter(line)
        pending = [(m.group(1) == "-", m.group(3), code) for m in _HEREDOC.finditer(line)]
    return None if pending else "\n".join(out)


def _feeds_interpreter(line: str) -> bool:
    """Does a command on this line (with a `<<`) run an interpreter?"""
    for word in re.split(r"[\s;&|(){}]+", normalized(line)):
        if _INTERPRETERS.match(os.path.basename(word)):
            return True
    return False


def _message_substitutions(text: str) -> str | None:
    """Each `$(...)` that is the value of a message option and names no git, replaced by
    a placeholder word; None when any other `$(...)` is left."""
    out = []
    i = 0
    while True:
        j = text.find("$(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        depth, k = 0, j + 1
        while k < len(text):
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        if k >= len(text):
            return None
        inner = text[j + 2 : k]
        before = text[:j].rstrip().rstrip("\"'").rstrip().rstrip("=")
        if _names_git(inner) or "git " in inner or not before.endswith(_MESSAGE_OPTIONS):
            return None
        out.append(text[i:j] + PLACEHOLDER)
        i = k + 1


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and name.isidentifier()


def _words(command: str) -> list[str]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = "#"
    return list(lex)


def _segments(words: list[str]) -> list[list[str]]:
    """Simple commands: split at ; & | ( ) and newlines; a redirection, its target and
    the fd digit in front of it (`2>/dev/null`, `2>&1`) dropped."""
    out: list[list[str]] = [[]]
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w and set(w) <= _SEPARATORS | _REDIRECT:
            if set(w) & _REDIRECT:
                skip = True
                if out[-1] and out[-1][-1].isdigit():
                    out[-1].pop()
                continue
            out.append([])
            continue
        out[-1].append(w)
    return [s for s in out if s]


# -- the entry point --------------------------------------------------------------------
INSTRUCTIONS = """\
You work in git-lane lane {key}: a git worktree on branch lane/{key} at {path}.
- Edit, commit and run git only inside this worktree, on branch lane/{key}. Never check
  out, commit to, reset, rebase or push main; never `git worktree`, `git stash`, `-c
  core.hooksPath`, `--no-verify` to get around a refusal.
- Commit your work in small commits (`git add -A && git commit -m "..."`).
- When main has moved (you are told `sync_required` or `stale_lane`): `git lane sync`,
  resolve the files it lists, `git lane continue`.
- When done: `git lane land` (or `git lane land --sync`); if land is for the owner only
  (`role_forbidden`), say the lane is ready and stop.
- A refusal `git-lane: refused [CODE]: ... Next: CMD` names the command that recovers: run
  it as written. Never work around a refusal.
"""


def instructions(key: str, path: str) -> str:
    return INSTRUCTIONS.format(key=key, path=path)


def main(argv: Sequence[str]) -> int:
    """`claude-hook KEY LANE_PATH PYTHON PYPATH` (PreToolUse; stdin: the event) or
    `claude-context KEY LANE_PATH` (SessionStart: the lane's instructions on stdout)."""
    try:
        if len(argv) >= 3 and argv[0] == "claude-context":
            sys.stdout.write(instructions(argv[1], argv[2]))
            return ALLOW
        if len(argv) != 5 or argv[0] != "claude-hook":
            sys.stderr.write(unknown(f"bad hook arguments {list(argv)!r}", "?").line() + "\n")
            return DENY
        key, lane_path, python, pypath = argv[1:]
        raw = sys.stdin.read()
        try:
            event = json.loads(raw)
        except ValueError:
            verdict = deny(unknown("its input is not JSON", key))
        else:
            verdict = decide(event, key, lane_path, inproc_check(python, pypath))
        if verdict.allow:
            return ALLOW
        sys.stderr.write(verdict.line + "\n")
        return DENY
    except Exception as e:  # a bug here must still block, never let the tool run
        sys.stderr.write(
            f"git-lane: refused [adapter_facts_unknown]: the git-lane hook failed ({type(e).__name__}: {e}). "
            "Next: git lane doctor\n"
        )
        return DENY
