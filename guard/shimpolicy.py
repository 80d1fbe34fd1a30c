"""The git shim's one decision: may this bound process run this git command? Pure, over
facts the caller gathers (guard/shim.py for the PATH shim, guard/commands/check.py for
`git lane check git`), so it is tested as a table (tests/test_shim_policy.py).

`decide_git(argv, env, facts)` returns None (run it) or the Refusal. The rules, in order:
  hooks_disabled         -c/--config-env/GIT_CONFIG_COUNT/GIT_CONFIG_PARAMETERS setting a
                         hook key (core.hooksPath, hook.*, include.*, includeIf.*), --exec-path
                         or GIT_EXEC_PATH pointing at another git than the real one, `git
                         config` writing such a key (or extensions.worktreeConfig) in any
                         scope; for commands that may run hooks or the engine: GIT_CONFIG_GLOBAL
                         / GIT_CONFIG_SYSTEM redirected, HOME / XDG_CONFIG_HOME not the ones
                         exec started with
  shell_alias            an alias that runs a shell command (`!...`): git runs it with its own
                         directory first on PATH, so the git calls in it would pass no shim
  path_outside_lane      -C, --git-dir, --work-tree, GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE,
                         GIT_COMMON_DIR, GIT_OBJECT_DIRECTORY (realpath) outside what the lane's
                         own git uses: its worktree, its git dir <common>/worktrees/<id>, the
                         common dir's objects
  stash_shared           stash push/save/pop/drop/clear/store/branch (refs/stash is shared)
  main_mutation_refused  a write of main or of any ref but the lane's branch (and refs/worktree/*,
                         which are the lane's own), and commit-like commands off the lane branch;
                         a fetch into anything but refs/remotes/* and those; settings that
                         make gc or fetch delete what others keep (gc.pruneExpire...: expiry_key)
  sync_required          a stale lane under a mandatory policy writing files
  shim_facts_unknown     a global option this parser does not know, an alias that does not parse,
                         a builtin this policy does not judge
  unsafe_config          -c/--config-env/GIT_CONFIG_* of a key that makes git run a program
                         (program_key, trailer.*.command), or of remote.*/url.*, or
                         rebase.updateRefs, or rebase.instructionFormat that can make a todo
                         line of a message (also set in the config a rebase reads), or
                         `git clone -c` of one; `git config` writing such a key; a PATH other
                         than exec's finding another vi/less/ssh..., or adding a relative
                         entry or one the lane can write (_search_path); for every command
                         GIT_TRACE* naming a file, GIT_ALLOW_PROTOCOL, NAME::URL, alternates
                         but exec --sandbox's, GIT_INDEX_FILE outside the lane
                         (_process_env), the safe editors' VIMINIT/LESSOPEN/... (program_env); for
                         read-only commands and `git lane`: HOME/XDG/GIT_CONFIG_* other than
                         exec's, or a repository inside the lane but the lane's own
                         (_config_sources: git reads that configuration first)
  external_command       not a builtin of the real git nor an alias: an external git-NAME or a
                         git script (submodule...), which git runs with git-core first on PATH
  unknown_option         a long option not spelled out as the command knows it (git takes any
                         unique prefix); the command spelled out is judged in its place
After alias expansion the settings an alias carries (-c, --exec-path, -C) are judged again.
path_outside_lane also covers options naming a file git writes (_written_paths), a .git
between the cwd and the lane root, and `git init` over an existing directory.
Read-only commands (READ_ONLY, and the listing forms of branch/tag/stash/worktree/...)
are decided before all of that but the explicit hook settings, the PATH and where git
reads its configuration: they write nothing a lane could misuse, wherever they point (one
told to write a file, `diff --output=F`, is a writer), in a repository outside the lane
too (its configuration is its owner's). A plain alias is judged as what it runs; an external git-NAME (git-lfs) as a
writer. shims/git decides the plain read-only forms and the lane's own add/rm/commit in
sh without Python; tests/test_shim_git.py holds every such sh pass to a pass here."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from guard import binding
from guard.errors import Refusal

# -- what git's command line is made of -------------------------------------------------
# Global options that take a value as the next word (or joined with `=` for the long ones).
_GLOBAL_WITH_VALUE = {
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
    "--list-cmds",
    "--attr-source",
}
_GLOBAL_FLAGS = {
    "-p",
    "--paginate",
    "-P",
    "--no-pager",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-lazy-fetch",
    "--no-advice",
}
# Global options that end git's work without a command (git --version, git --help).
_GLOBAL_ALONE = {"--version", "-v", "--help", "-h", "--html-path", "--man-path", "--info-path"}

# Commands that write nothing a lane could misuse (the sh fast path knows the same list:
# shims/git gs_read_only).
READ_ONLY = frozenset(
    [
        "status",
        "diff",
        "log",
        "show",
        "rev-parse",
        "ls-files",
        "ls-tree",
        "grep",
        "blame",
        "annotate",
        "cat-file",
        "for-each-ref",
        "merge-base",
        "describe",
        "shortlog",
        "rev-list",
        "name-rev",
        "show-ref",
        "show-branch",
        "diff-files",
        "diff-index",
        "diff-tree",
        "range-diff",
        "whatchanged",
        "cherry",
        "count-objects",
        "version",
        "help",
        "var",
        "check-ignore",
        "check-attr",
        "check-mailmap",
        "check-ref-format",
        "ls-remote",
        "verify-commit",
        "verify-tag",
        "verify-pack",
        "fsck",
        "get-tar-commit-id",
        "archive",
    ]
)
# Commands git runs itself (git ignores an alias with one of these names).
BUILTINS = READ_ONLY | frozenset(
    [
        "add",
        "am",
        "apply",
        "bisect",
        "branch",
        "bundle",
        "hook",
        "diagnose",
        "bugreport",
        "checkout",
        "checkout-index",
        "cherry-pick",
        "clean",
        "clone",
        "commit",
        "commit-graph",
        "commit-tree",
        "config",
        "credential",
        "difftool",
        "fast-export",
        "fast-import",
        "fetch",
        "fetch-pack",
        "filter-branch",
        "format-patch",
        "gc",
        "hash-object",
        "index-pack",
        "init",
        "interpret-trailers",
        "maintenance",
        "merge",
        "merge-file",
        "merge-tree",
        "mergetool",
        "mktag",
        "mktree",
        "multi-pack-index",
        "mv",
        "notes",
        "pack-objects",
        "pack-refs",
        "prune",
        "prune-packed",
        "pull",
        "push",
        "read-tree",
        "rebase",
        "reflog",
        "remote",
        "repack",
        "replace",
        "request-pull",
        "rerere",
        "reset",
        "restore",
        "revert",
        "rm",
        "send-email",
        "sparse-checkout",
        "stash",
        "stripspace",
        "submodule",
        "switch",
        "symbolic-ref",
        "tag",
        "unpack-objects",
        "update-index",
        "update-ref",
        "update-server-info",
        "worktree",
        "write-tree",
    ]
)
# What a stale lane (mandatory policy) may still run: what leads to fresh, and what
# writes no file of the lane.
SYNC_OK = frozenset(
    [
        "add",
        "rm",
        "commit",
        "lane",
        "fetch",
        "config",
        "remote",
        "gc",
        "pack-refs",
        "repack",
        "maintenance",
        "commit-graph",
        "multi-pack-index",
        "hash-object",
        "mktree",
        "mktag",
    ]
)
# Commands that move HEAD's branch: refused while HEAD is not the lane's branch.
COMMIT_LIKE = frozenset(
    ["commit", "merge", "rebase", "reset", "cherry-pick", "revert", "am", "pull"]
)

HOOK_KEYS = ("core.hookspath",)
HOOK_SECTIONS = ("hook.", "include.", "includeif.")
CONFIG_WRITE_KEYS = (*HOOK_KEYS, "extensions.worktreeconfig")
# variables naming a configuration file git reads (GIT_CONFIG: the one `git config` uses)
CONFIG_FILE_ENV = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG")
PATH_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


@dataclass(frozen=True)
class GitFacts:
    """What the policy needs to know about the lane and the process (all paths realpaths)."""

    lane: str  # the lane key
    lane_path: str  # its worktree
    lane_git_dir: str  # its own git dir, <common>/worktrees/<id>
    common: str  # the repository's git common dir
    cwd: str  # the process's working directory
    head: str | None  # the lane worktree's checked-out ref (refs/heads/...), None when detached
    main: str  # the protected branch's name
    must_sync: bool  # stale under a mandatory sync policy
    rebase_in_progress: bool = False
    worker_land: bool = False  # the owner lets workers land (worker_land = "allow")
    home: str = ""  # HOME when exec started
    xdg_config_home: str = ""  # XDG_CONFIG_HOME when exec started
    exec_path: str = ""  # the real git's --exec-path
    aliases: Mapping[str, str] = field(default_factory=dict)  # alias.NAME -> its text
    is_rev: Callable[[str], bool] = lambda _name: False  # does NAME name a commit?
    realpath: Callable[[str], str] = os.path.realpath
    # the long options git CMD [SUB] knows (its --git-completion-helper-all), None: unknown
    long_options: Callable[[str, str | None], frozenset[str] | None] = lambda _c, _s: None
    # is NAME a command built into the real git (git --list-cmds=builtins)?
    is_builtin: Callable[[str], bool] = lambda name: name in BUILTINS
    # the fetch refspecs configured for remotes (remote.NAME.fetch, every remote), None:
    # unknown
    fetch_refspecs: Callable[[], list[str] | None] = lambda: []
    exists: Callable[[str], bool] = os.path.lexists  # is anything at PATH (a .git)?
    # the gitdir a `.git` file names (realpath), None when PATH is no such file
    gitfile: Callable[[str], str | None] = lambda _path: None
    # is there a remote-tracking branch refs/remotes/*/NAME (checkout's guess)?
    remote_branch: Callable[[str], str | None] = lambda _name: None
    exec_env_path: str | None = None  # PATH exec gave the process (None: not judged)
    # the file NAME resolves to on PATH-like SEARCH (None: none there)
    which: Callable[[str, str], str | None] = lambda _name, _search: None
    # may this process write DIR, or make or replace it (a parent it can write)?
    writable: Callable[[str], bool] = lambda _path: False
    # is rebase.updateRefs on in the configuration git reads here?
    update_refs_config: Callable[[], bool] = lambda: False
    # the value of config KEY git reads here (None: unset)
    config_value: Callable[[str], str | None] = lambda _key: None
    # exec --sandbox confined this process (GITLANE_SANDBOX): the common dir is not
    # writable, so git gc (its gc.pid lock lives there) fails
    sandboxed: bool = False

    @property
    def branch(self) -> str:
        return f"lane/{self.lane}"

    @property
    def branch_ref(self) -> str:
        return f"refs/heads/lane/{self.lane}"


@dataclass(frozen=True)
class Parsed:
    """A git command line split at its subcommand."""

    globals: tuple[str, ...]  # the words before the subcommand, as given
    cmd: str | None  # None: no subcommand (git --version, or nothing at all)
    args: tuple[str, ...]
    chdirs: tuple[str, ...] = ()  # -C values, in order
    configs: tuple[str, ...] = ()  # -c values (key=value)
    config_env: tuple[str, ...] = ()  # --config-env values (key=ENVVAR)
    git_dir: str | None = None
    work_tree: str | None = None
    exec_path: str | None = None  # --exec-path=X (not the bare query)
    unknown: str | None = None  # a global option this parser does not know
    bare_at: int | None = None  # --bare setting GIT_DIR: how many -C moved the cwd before it


def parse(argv: Sequence[str]) -> Parsed:
    """Split `git [global options] command [args]` the way git's own handle_options does."""
    out: dict[str, list[str]] = {"-C": [], "-c": [], "--config-env": []}
    single: dict[str, str | None] = {"git_dir": None, "work_tree": None, "exec_path": None}
    unknown = None
    bare_at: int | None = None
    i = 0
    while i < len(argv):
        w = argv[i]
        if not w.startswith("-") or w == "-":
            break
        name, eq, val = w.partition("=")
        if w == "--bare" and bare_at is None and single["git_dir"] is None:
            bare_at = len(out["-C"])  # git.c: GIT_DIR = the cwd now, unless already set
        if w in _GLOBAL_FLAGS or w in _GLOBAL_ALONE:
            i += 1
            continue
        if w == "--exec-path":
            i += 1  # the bare form prints the path
            continue
        if name == "--exec-path" and eq:
            single["exec_path"] = val
            i += 1
            continue
        if w.startswith("-c") and len(w) > 2 and not w.startswith("--"):
            out["-c"].append(w[2:])  # -ckey=value
            i += 1
            continue
        if w.startswith("-C") and len(w) > 2 and not w.startswith("--"):
            out["-C"].append(w[2:])
            i += 1
            continue
        if name in _GLOBAL_WITH_VALUE:
            if eq and name.startswith("--"):
                value = val
                i += 1
            elif i + 1 < len(argv):
                value = argv[i + 1]
                i += 2
            else:
                unknown = w  # a value missing: git itself refuses this command line
                i += 1
                break
            if name in out:
                out[name].append(value)
            elif name == "--git-dir":
                single["git_dir"] = value
            elif name == "--work-tree":
                single["work_tree"] = value
            continue
        unknown = w
        i += 1
        break
    rest = tuple(argv[i:])
    return Parsed(
        globals=tuple(argv[: len(argv) - len(rest)]),
        cmd=rest[0] if rest else None,
        args=rest[1:],
        chdirs=tuple(out["-C"]),
        configs=tuple(out["-c"]),
        config_env=tuple(out["--config-env"]),
        git_dir=single["git_dir"],
        work_tree=single["work_tree"],
        exec_path=single["exec_path"],
        unknown=unknown,
        bare_at=bare_at,
    )


def alias_needed(argv: Sequence[str], known: Mapping[str, str]) -> str | None:
    """The alias name the caller must look up (alias.NAME) before decide_git can decide,
    or None when every alias on the way is in `known` (or none is involved)."""
    seen: set[str] = set()
    p = parse(argv)
    while p.cmd is not None and p.cmd not in BUILTINS and p.cmd != "lane":
        name = p.cmd.lower()
        if name in seen:
            return None
        seen.add(name)
        if name not in known:
            return p.cmd
        text = known[name]
        if text.startswith("!") or text == "":
            return None
        try:
            words = shlex.split(text)
        except ValueError:
            return None
        p = parse([*p.globals, *words, *p.args])
    return None


# -- the decision ---------------------------------------------------------------------
def decide_git(argv: Sequence[str], env: Mapping[str, str], facts: GitFacts) -> Refusal | None:
    """None: let git run `argv`; else the refusal (the rules in the module docstring).
    Each check's next leaves out what that check refused; when the command had more than
    one fault, that next would be refused in turn (`rebase --exec X -X index-output=F`),
    so a next that is one plain git command is judged again, and the next of what refuses
    it is printed instead, until one runs."""
    refusal = _decide(argv, env, facts)
    seen: set[str] = set()
    while refusal is not None and len(refusal.next) == 1 and len(seen) < 4:
        nxt = refusal.next[0]
        seen.add(nxt)
        try:
            words = shlex.split(nxt)
        except ValueError:
            break
        if (
            words[:1] != ["git"]
            or words[1:2] == ["lane"]
            or any(w in ("&&", "||", ";", "|") or w.startswith("#") for w in words)
        ):
            break
        again = _decide(words[1:], env, facts)
        if again is None or not again.next or again.next[0] in seen:
            break
        refusal.next = list(again.next)
    return refusal


def _decide(argv: Sequence[str], env: Mapping[str, str], facts: GitFacts) -> Refusal | None:
    p = parse(argv)
    if p.unknown is not None:
        return _unknown_option(p, facts)
    refusal = _explicit_hook_settings(p, env, facts) or _transient_config(p, env, facts)
    if refusal is not None:
        return refusal
    p, refusal = _expand_aliases(p, facts)
    if refusal is not None:
        return refusal
    # what an alias put before its command is judged as if it had been typed
    refusal = _explicit_hook_settings(p, env, facts) or _transient_config(p, env, facts)
    if refusal is not None:
        return refusal
    if p.cmd is None:
        return None  # `git --version`: nothing is read
    # git reads its configuration (which may name a program) before any command runs
    refusal = _process_env(p, env, facts) or _search_path(p, env, facts)
    if refusal is None and (p.cmd == "lane" or read_only(p.cmd, p.args)):
        refusal = _config_sources(p, env, facts)
    if refusal is not None:
        return refusal
    if p.cmd == "lane":
        return None  # `git lane ...`: the engine enforces its own rules
    refusal = (
        _program_env(p, env, facts)
        or _command_known(p, facts)
        or _program_options(p, facts)
        or _merge_strategy(p, facts)
        or _hook_run(p, facts)
        or _remote_add(p, facts)
        or _rerere(p, env, facts)
        or _written_outside(p, facts)
    )
    if refusal is not None:
        return refusal
    if p.cmd not in READ_ONLY:
        refusal = _long_options(p, env, facts)
        if refusal is not None:
            return refusal
    if read_only(p.cmd, p.args):
        return None
    return (
        _hook_redirection(p, env, facts)
        or _config_write(p, facts)
        or _sparse_checkout(p, facts)
        or _paths(p, env, facts)
        or _lane_repository(p, env, facts)
        or _stash(p, facts)
        or _refs(p, facts)
        or _stale(p, facts)
    )


def read_only(cmd: str, args: Sequence[str]) -> bool:
    """Does `git CMD ARGS` write nothing but git's own caches? (shims/git decides the
    plain forms of the same in sh.)"""
    if _output_file(cmd, args) is not None:
        return False  # diff/log/show --output=FILE, archive -o FILE: they write that file
    if cmd in READ_ONLY:
        return True
    first = args[0] if args else None
    if cmd == "branch":
        return _branch_listing(args)
    if cmd == "tag":
        return _tag_listing(args)
    if cmd == "stash":
        return first in ("list", "show")
    if cmd == "worktree":
        return first == "list"
    if cmd == "notes":
        return first in (None, "list", "show", "get-ref")
    if cmd == "reflog":
        return first in (None, "show", "exists") or (first is not None and _is_rev_word(first))
    if cmd == "remote":
        return all(a in ("-v", "--verbose") for a in args) or first in ("show", "get-url")
    if cmd == "replace":
        return all(a in ("-l", "--list") or a.startswith("--format") for a in args) or (
            len(args) >= 1 and args[0] in ("-l", "--list")
        )
    if cmd == "symbolic-ref":
        rest = [a for a in args if a not in ("-q", "--quiet", "--short", "--no-recurse")]
        return len(rest) <= 1 and not any(a in ("-d", "--delete") for a in args)
    if cmd == "config":
        return _config_mode(args)[0] == "read"
    if cmd == "bisect":
        return first in ("log", "visualize", "view", "terms")
    return False


def _output_file(cmd: str, args: Sequence[str]) -> str | None:
    """The file a reading command was told to write (`--output=F`, `--output F`, and
    `archive -o F`), if any."""
    word = _output_word(cmd, args)
    return word[2] if word is not None else None


def _output_word(cmd: str, args: Sequence[str]) -> tuple[int, int, str] | None:
    """(first word, words, file) of the option of `git CMD ARGS` naming a file to write."""
    for i, a in enumerate(args):
        if _ends_options(args, i, cmd or None):
            break
        name, eq, val = a.partition("=")
        if len(name) >= 3 and "--output".startswith(name):  # any prefix git might complete
            if eq:
                return i, 1, val
            if i + 1 < len(args):
                return i, 2, args[i + 1]
        # -o FILE, -oFILE, and in a group of short flags (-9o FILE, -vo FILE)
        group = _short_value(args, i, "o", "o") if cmd == "archive" else None
        if group is not None and (group[2] == 1 or i + 1 < len(args)):
            return i, group[2], group[1]
    return None


def _ends_options(args: Sequence[str], i: int, cmd: str | None = None) -> bool:
    """Is args[i] a `--` that ends the options? Not when it may be the value of the option
    word before it: parse-options takes the next word, `--` too, as an option's value and
    goes on (`grep -e -- -O PROG`, `range-diff -S -- --output=F`, `checkout-index --prefix
    -- --pref=DIR`), so a `--` after an option word ends nothing as far as the policy is
    concerned, for any command; only for the commands in _DASH_ENDS, whose every option
    taking the next word is listed, does a `--` after another option word end the options
    (`git rm --cached -- --exec=x` names a file). For a command that drops its own `--`
    and hands the words after it to another option parser (_DASH_HANDED_ON), no `--` ends
    them."""
    if args[i] != "--" or _hands_on_dashdash(cmd, args):
        return False
    prev = args[i - 1] if i > 0 else ""
    if not prev.startswith("-") or prev in ("-", "--"):
        return True  # after a name, `-` (stdin), or a `--` taken as a value: the end
    known = _DASH_ENDS.get(cmd or "")
    if known is None:
        return False
    longs, shorts = known
    if prev.startswith("--"):
        return prev not in longs
    # a group of short flags: the first letter taking a value takes the rest of the word
    for j, ch in enumerate(prev[1:], start=2):
        if ch in shorts:
            return j < len(prev)
    return True


# Commands (and subcommands) whose parse_options drops their `--` (no KEEP_DASHDASH) and
# hands the words after it to another option parser, where `--output=F`, `--upload-pack=P`
# are options again (git 2.39): pull to fetch, `stash list`/`show` to log/diff, `remote
# update` to `fetch --multiple`, cherry-pick/revert/fast-export and `bundle create FILE` to
# setup_revisions. Their `--` never ends the options as far as the policy is concerned.
_DASH_HANDED_ON: dict[str, tuple[str, ...] | None] = {
    "pull": None,
    "cherry-pick": None,
    "revert": None,
    "fast-export": None,
    "stash": ("list", "show"),
    "remote": ("update",),
    "bundle": ("create",),
}


def _hands_on_dashdash(cmd: str | None, args: Sequence[str]) -> bool:
    """Does `git CMD ARGS` hand the words after its own `--` to another option parser?"""
    if cmd not in _DASH_HANDED_ON:
        return False
    subs = _DASH_HANDED_ON[cmd or ""]
    if subs is None:
        return True
    # the subcommand: the first word that is no option (`remote -v update`)
    first = next((a for a in args if a == "--" or not a.startswith("-")), None)
    return first is not None and first in subs


def _options_end(args: Sequence[str], cmd: str | None = None) -> int:
    """The index of the `--` that ends the options of `git CMD ARGS` (len(args): none)."""
    return next((i for i in range(len(args)) if _ends_options(args, i, cmd)), len(args))


def _written_outside(p: Parsed, f: GitFacts) -> Refusal | None:
    """A file a reading command writes outside the lane, judged before its options are
    (stash list/show hand theirs to log/diff: `--output=F` is no option of stash's own):
    `--output=F` (log, diff, stash list/show...), `archive -o F`; and fsck --lost-found,
    which writes every dangling object into <common>/lost-found."""
    args = list(p.args)
    if p.cmd == "fsck":
        for i, a in enumerate(args):
            name = a.partition("=")[0]
            if len(name) >= 3 and "--lost-found".startswith(name):  # git takes --l
                where = os.path.join(f.common, "lost-found")
                return Refusal(
                    "path_outside_lane",
                    f"git fsck {a} writes every dangling object (a blob the lane made too) "
                    f"into {where}, outside lane {f.lane} ({f.lane_path}); run fsck without "
                    "it (it still names the dangling objects)",
                    next=[_render(p.globals, p.cmd, [*args[:i], *args[i + 1 :]])],
                    details={"lane": f.lane, "what": f"git fsck {a}", "path": where},
                )
    word = _output_word(p.cmd or "", args)
    if word is None:
        return None
    i, n, out = word
    real = _clean(out, f, _cwd_after_chdirs(p, f))
    if _inside(real, f.lane_path):
        return None  # judged with the rest of the command (_paths)
    rest = [*args[:i], *args[i + n :]]
    group = _short_value(args, i, "o", "o") if p.cmd == "archive" else None
    if group is not None and group[0] != "-":
        rest.insert(i, group[0])  # -9o FILE: keep -9
    return Refusal(
        "path_outside_lane",
        f"git {p.cmd} {args[i]} writes {real}, outside lane {f.lane} ({f.lane_path}); "
        "git may write only in the lane: write it there (or to stdout)",
        next=[_render(p.globals, p.cmd, rest)],
        details={"lane": f.lane, "what": f"git {p.cmd}'s output file", "path": real},
    )


def _is_rev_word(w: str) -> bool:
    return not w.startswith("-") and w not in ("expire", "delete", "write")


_BRANCH_WRITE_SHORT = set("dDmMcCfut")
_BRANCH_WRITE_LONG = (
    "--delete",
    "--move",
    "--copy",
    "--force",
    "--set-upstream-to",
    "--unset-upstream",
    "--track",
    "--no-track",
    "--edit-description",
    "--create-reflog",
    "--recurse-submodules",
    "--set-upstream",
)
_BRANCH_VALUE_OPTS = (
    "--sort",
    "--format",
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
    "--color",
    "--column",
    "--abbrev",
)


def _branch_listing(args: Sequence[str]) -> bool:
    """`git branch` with only listing options (names are patterns after --list/-l)."""
    listing = False
    positional = False
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-l", "--list", "--show-current"):
            listing = True
        elif a.startswith("--"):
            name = a.split("=", 1)[0]
            if name.startswith(_BRANCH_WRITE_LONG):
                return False
            if (
                name in _BRANCH_VALUE_OPTS
                and "=" not in a
                and name not in ("--color", "--column", "--abbrev")
            ):
                skip = True  # --contains X
        elif a.startswith("-") and len(a) > 1:
            if set(a[1:]) & _BRANCH_WRITE_SHORT:
                return False
            if "l" in a[1:]:
                listing = True
        else:
            positional = True
    return listing or not positional


_TAG_WRITE_SHORT = set("asufdmFe")


def _tag_listing(args: Sequence[str]) -> bool:
    listing = False
    positional = False
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-l", "--list", "-v", "--verify"):
            listing = True
        elif a.startswith("--"):
            name = a.split("=", 1)[0]
            if name in (
                "--annotate",
                "--sign",
                "--local-user",
                "--force",
                "--delete",
                "--message",
                "--file",
                "--edit",
                "--cleanup",
                "--create-reflog",
                "--trailer",
            ):
                return False
            filters = ("--contains", "--no-contains", "--merged", "--no-merged", "--points-at")
            if name in filters:
                listing = True  # git tag --contains X [PATTERN]: a listing
            if name in (*filters, "--sort", "--format") and "=" not in a:
                skip = True
        elif a.startswith("-") and len(a) > 1:
            if a[1] == "n":
                continue  # -n<num>
            if set(a[1:]) & _TAG_WRITE_SHORT:
                return False
            if "l" in a[1:] or "v" in a[1:]:
                listing = True
        else:
            positional = True
    return listing or not positional


# -- hooks_disabled ---------------------------------------------------------------------
def _hook_key(key: str) -> bool:
    k = key.strip().lower()
    return k in HOOK_KEYS or k.startswith(HOOK_SECTIONS)


def _config_keys_from_env(env: Mapping[str, str]) -> tuple[list[str], bool]:
    """Keys GIT_CONFIG_COUNT/KEY_n and GIT_CONFIG_PARAMETERS set; False when unreadable."""
    keys: list[str] = []
    ok = True
    count = env.get("GIT_CONFIG_COUNT")
    if count:
        if not count.isdigit():
            ok = False
        else:
            keys += [env.get(f"GIT_CONFIG_KEY_{n}", "") for n in range(int(count))]
    params = env.get("GIT_CONFIG_PARAMETERS")
    if params:
        try:
            words = shlex.split(params)
        except ValueError:
            return keys, False
        for w in words:
            keys.append(w.split("=", 1)[0])
    return keys, ok


def _config_pairs_from_env(env: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """(key, value) for each setting GIT_CONFIG_COUNT/KEY_n/VALUE_n and
    GIT_CONFIG_PARAMETERS make, in git's order; value None where none is given (a bare key
    in GIT_CONFIG_PARAMETERS is true) or the variable cannot be read (then every key
    _config_keys_from_env finds, each of unknown value)."""
    keys, ok = _config_keys_from_env(env)
    if not ok:
        return [(k, None) for k in keys]
    pairs: list[tuple[str, str | None]] = []
    count = env.get("GIT_CONFIG_COUNT")
    for n in range(int(count) if count else 0):
        pairs.append((env.get(f"GIT_CONFIG_KEY_{n}", ""), env.get(f"GIT_CONFIG_VALUE_{n}")))
    for w in shlex.split(env.get("GIT_CONFIG_PARAMETERS") or ""):
        key, eq, value = w.partition("=")
        pairs.append((key, value if eq else None))
    return pairs


def _explicit_hook_settings(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """Hook settings given on the command line or in the environment: refused for every
    command (they are an explicit attempt, whatever the command)."""
    for kv in p.configs:
        if _hook_key(kv.split("=", 1)[0]):
            drop = ("-c", kv)
            return _refused_without(p, env, f, drop) or _hooks_disabled(p, f, f"-c {kv}", drop)
    for kv in p.config_env:
        if _hook_key(kv.split("=", 1)[0]):
            drop = ("--config-env", kv)
            return _refused_without(p, env, f, drop) or _hooks_disabled(
                p, f, f"--config-env {kv}", drop
            )
    keys, ok = _config_keys_from_env(env)
    bad = [k for k in keys if _hook_key(k)]
    if bad or not ok:
        what = "GIT_CONFIG_COUNT/GIT_CONFIG_PARAMETERS " + (
            f"setting {', '.join(bad)}" if bad else "that cannot be read"
        )
        return _hooks_disabled(p, f, what, env_vars=("GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS"))
    real = _clean(f.exec_path, f)
    if p.exec_path is not None and (not real or _clean(p.exec_path, f) != real):
        return _hooks_disabled(p, f, f"--exec-path={p.exec_path}", drop=("--exec-path=",))
    gep = env.get("GIT_EXEC_PATH")
    if gep and (not real or _clean(gep, f) != real):
        return _hooks_disabled(p, f, f"GIT_EXEC_PATH={gep}", env_vars=("GIT_EXEC_PATH",))
    return None


def _refused_without(
    p: Parsed, env: Mapping[str, str], f: GitFacts, drop: tuple[str, ...]
) -> Refusal | None:
    """The refusal of the command without the setting `drop` names, when it is refused
    too (its `next` would be a command that is itself refused: give that one's)."""
    if p.cmd is None:
        return None
    return decide_git([*_globals_without(p, drop), p.cmd, *p.args], env, f)


def _hook_redirection(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """What would make this command's hooks (or the engine) read another configuration
    than the one exec started with."""
    for var in CONFIG_FILE_ENV:
        if var in env:
            return _hooks_disabled(p, f, f"{var}={env[var]}", env_vars=(var,))
    for var, was in (("HOME", f.home), ("XDG_CONFIG_HOME", f.xdg_config_home)):
        now = env.get(var, "")
        if now != was:
            return _hooks_disabled(
                p,
                f,
                f"{var}={now or '(unset)'} (exec started with {was or '(unset)'}), which "
                "makes git and git-lane read another user configuration",
                env_vars=(var,),
                restore=(var, was),
            )
    return None


def _hooks_disabled(
    p: Parsed,
    f: GitFacts,
    what: str,
    drop: tuple[str, ...] = (),
    env_vars: tuple[str, ...] = (),
    restore: tuple[str, str] | None = None,
) -> Refusal:
    cmd = _without(p, drop) if drop else None
    if restore is not None:
        var, was = restore
        prefix = f"{var}={_q(was)} " if was else f"env -u {var} "
        nxt = [prefix + _render(p.globals, p.cmd, p.args)]
    elif env_vars:
        nxt = [
            "env " + " ".join(f"-u {v}" for v in env_vars) + " " + _render(p.globals, p.cmd, p.args)
        ]
    elif cmd is not None:
        nxt = [cmd]
    else:
        nxt = []
    return Refusal(
        "hooks_disabled",
        f"{what} would switch git-lane's hooks off or around them in lane {f.lane}; "
        "run the command without it",
        next=nxt,
        details={
            "lane": f.lane,
            "setting": what,
            "argv": [*p.globals, *([p.cmd] if p.cmd else []), *p.args],
        },
    )


# git config's short options that take a value (-f FILE, -t TYPE; git 2.39): in a group
# (`-zf FILE`) the rest of the word is its value, or the next word
_CONFIG_SHORT_VALUES = "ft"


def _config_mode(args: Sequence[str]) -> tuple[str, list[str]]:
    """`git config ARGS`: ("read" | "write" | "edit", the key words it names)."""
    write_flags = {
        "--add",
        "--replace-all",
        "--unset",
        "--unset-all",
        "--rename-section",
        "--remove-section",
    }
    read_flags = {
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "-l",
        "--list",
        "--get-color",
        "--get-colorbool",
    }
    value_opts = {"--file", "-f", "--blob", "--type", "--default", "--comment", "--value"}
    words: list[str] = []
    mode = None
    skip = False
    sub = args[0] if args else None
    if sub in ("set", "unset", "rename-section", "remove-section"):
        mode = "write"
        args = args[1:]
    elif sub in ("get", "list"):
        mode = "read"
        args = args[1:]
    elif sub == "edit":
        return "edit", []
    ended = False  # git config stops at its first non-option word (or `--`): the rest
    for a in args:  # are the key and value, `-x; PROG` too (PARSE_OPT_STOP_AT_NON_OPTION)
        if skip:
            skip = False
            continue
        if ended or a == "--":
            if ended:
                words.append(a)
            ended = True
            continue
        name = a.split("=", 1)[0]
        if a in ("-e", "--edit"):
            return "edit", []
        if a in write_flags:
            mode = "write"
        elif a in read_flags:
            mode = mode or "read"
        elif name in value_opts and "=" not in a:
            skip = True
        elif a.startswith("-") and not a.startswith("--") and len(a) > 2:
            # a group of short flags (`-zf FILE`, `-ze`): each letter as git reads it
            for j, ch in enumerate(a[1:], start=1):
                if ch == "e":
                    return "edit", []
                if ch == "l":
                    mode = mode or "read"
                if ch in _CONFIG_SHORT_VALUES:
                    skip = j == len(a) - 1  # its value: the rest of the word, or the next
                    break
        elif a.startswith("-"):
            continue
        else:
            words.append(a)
            ended = True
    if mode is None:
        mode = "write" if len(words) >= 2 else "read"
    return mode, words


def _config_write(p: Parsed, f: GitFacts) -> Refusal | None:
    if p.cmd == "maintenance":
        sub = _first(p.args)
        if sub in ("register", "unregister", "start", "stop"):
            return Refusal(
                "path_outside_lane",
                f"git maintenance {sub} writes the user's global git config (maintenance.repo) "
                f"and the system scheduler, outside lane {f.lane} ({f.lane_path}); git may "
                "write only in the lane",
                next=[f"git lane status {f.lane}"],
                details={"lane": f.lane, "what": f"git maintenance {sub}", "path": "--global"},
            )
        return None
    if p.cmd != "config":
        return None
    mode, words = _config_mode(p.args)
    if mode == "edit":
        return Refusal(
            "hooks_disabled",
            "git config --edit lets an editor set core.hooksPath, hook.* or include.*, which "
            f"lane {f.lane} may not change; set one key at a time with git config KEY VALUE",
            next=["git config --show-origin --list"],
            details={"lane": f.lane, "argv": ["config", *p.args]},
        )
    if mode != "write":
        return None
    refusal = _config_write_value(p, words, f)
    if refusal is not None:
        return refusal
    for w in words[:2]:  # the key (or section, for --rename-section/--remove-section)
        k = w.lower()
        if (
            k in CONFIG_WRITE_KEYS
            or k.startswith(HOOK_SECTIONS)
            or (
                k.rstrip(".")
                in (
                    "core",
                    "hook",
                    "include",
                    "includeif",
                    "extensions",
                )
                and _section_op(p.args)
            )
        ):
            return Refusal(
                "hooks_disabled",
                f"git config writing {w} would switch git-lane's hooks off or around them "
                f"(in any scope); lane {f.lane} may not change it",
                next=[f"git config --show-origin --get-all {_q(w)}"],
                details={"lane": f.lane, "key": w, "argv": ["config", *p.args]},
            )
        if k.startswith("remote.") and _remote_name_unsafe(w[len("remote.") :]):
            return Refusal(
                "unsafe_config",
                f"git config writing {w} makes a remote named like an option word, which "
                "every later fetch --all, remote update or maintenance prefetch (the owner's "
                f"too) hands to a child `git fetch` as that option; lane {f.lane} may not",
                next=["git remote -v"],
                details={"lane": f.lane, "key": w, "argv": ["config", *p.args]},
            )
        section = k.rstrip(".").split(".")[0]
        if (
            program_key(k)
            or k in _REF_KEYS
            or (
                _section_op(p.args)
                and (
                    section in _PROGRAM_SECTIONS
                    or section in {a for a, _b in _PROGRAM_SUBKEYS}
                    or section in {x.split(".")[0] for x in _PROGRAM_KEYS}
                )
            )
        ):
            return Refusal(
                "unsafe_config",
                f"git config writing {w} would make git run a program (or use another "
                f"repository) the next time anyone runs git here, unbound and past every "
                f"shim (in any scope); lane {f.lane} may not set it",
                next=[f"git config --show-origin --get-all {_q(w)}"],
                details={"lane": f.lane, "key": w, "argv": ["config", *p.args]},
            )
    return _config_file_outside(p, f)


def _config_write_value(p: Parsed, words: Sequence[str], f: GitFacts) -> Refusal | None:
    """`git config` setting an expiry_key (main_mutation_refused, as gc --prune=now) or
    rebase.instructionFormat to a value that can make a todo command (unsafe_config); a
    section renamed to gc/rebase/fetch may carry either. Unsetting one passes."""
    unsets = any(a in ("--unset", "--unset-all", "unset") for a in p.args)
    if not words or unsets:
        return None
    key = words[0].lower()
    value = words[1] if len(words) >= 2 else None
    moved = ""  # the section a --rename-section / --remove-section names, when it matters
    if _section_op(p.args):
        moved = next(
            (
                x
                for x in (w.lower() for w in words[:2])
                if x.split(".")[0] in ("gc", "rebase", "fetch", "pull")
            ),
            "",
        )
        if not moved:
            return None
        key, value = moved, None
    nxt = [f"git config --show-origin --get-all {_q(words[0])}"]
    if moved:
        nxt = ["git config --show-origin --list"]
    argv = ["config", *p.args]
    if expiry_key(key, value) or moved.split(".")[0] in ("gc", "fetch"):
        return _main_refusal(
            f,
            f"git config writing {words[0]} would make every later git gc (also the gc "
            "--auto that commit, merge or fetch start, the owner's too) or fetch delete what "
            "other lanes and the owner keep, as git gc --prune=now would; lane "
            f"{f.lane} may not set it",
            nxt,
            key=words[0],
            argv=argv,
        )
    if strategy_config_unsafe(key, value) or moved.startswith("pull"):
        return Refusal(
            "unsafe_config",
            f"git config writing {words[0]} {value or ''} would make every later merge or "
            "pull (the owner's too) run git-merge-NAME for a strategy git does not ship (a "
            "file of the lane's for a NAME with `/`); only "
            + ", ".join(sorted(MERGE_STRATEGIES))
            + f" may be named there; lane {f.lane} may not set it",
            next=nxt,
            details={"lane": f.lane, "key": words[0], "argv": argv},
        )
    if (key == INSTRUCTION_FORMAT and instruction_format_unsafe(value)) or moved.startswith(
        "rebase"
    ):
        return Refusal(
            "unsafe_config",
            f"git config writing {words[0]} {value or ''} would let every later rebase (the "
            "owner's too) turn a line of a commit message into a todo command such as exec, "
            "which git runs past every shim; only one-line placeholders (%s %h %H %an %ae) "
            f"and plain text may go in rebase.instructionFormat; lane {f.lane} may not set it",
            next=nxt,
            details={"lane": f.lane, "key": words[0], "argv": argv},
        )
    return None


def _sparse_checkout(p: Parsed, f: GitFacts) -> Refusal | None:
    """`git sparse-checkout init/set/add/reapply/disable` keeps its state in the lane's
    `<admin>/config.worktree` and turns on extensions.worktreeConfig in the repository's
    shared config (git's init_worktree_config), the key `git config` may not write
    (CONFIG_WRITE_KEYS). With it on, every git call reads the lane's config.worktree,
    which a process of the lane can swap at any moment (a filter there ran in the owner's
    `git lane status`, red team 14A): the engine refuses every lane while it is on
    (git.check_no_worktree_config), so the lane's sparse-checkout is refused whether it is
    on or not, and the owner is never told to turn it on. `list` only reads."""
    if p.cmd != "sparse-checkout" or (p.args and p.args[0] == "list"):
        return None
    words = " ".join(_q(a) for a in p.args)
    return Refusal(
        "unsafe_config",
        f"git sparse-checkout {words} keeps its state in lane {f.lane}'s own "
        "config.worktree, which git reads only with extensions.worktreeConfig on in the "
        "repository's shared config; git-lane cannot let git read a lane's config.worktree "
        "(a process of the lane can change it under any git call, the owner's too), so a "
        "lane cannot be sparse: work in the whole checkout",
        next=[f"git lane status {f.lane}"],
        details={"lane": f.lane, "key": "extensions.worktreeConfig", "argv": [p.cmd, *p.args]},
    )


def _config_file_outside(p: Parsed, f: GitFacts) -> Refusal | None:
    """`git config` writing a file outside the lane: --global (~/.gitconfig), --system,
    --file/-f/--blob FILE outside the lane's worktree."""
    args = list(p.args)
    where: tuple[str, str, str | None] | None = None
    rest: list[str] = []
    for i, a in enumerate(args):
        if _ends_options(args, i):
            break
        if a in ("--global", "--system"):
            where = (a, a, None)
            rest = [*args[:i], *args[i + 1 :]]
            break
        name, eq, val = a.partition("=")
        group = _short_value(args, i, _CONFIG_SHORT_VALUES, "f")  # -f, -fFILE, -zf FILE
        if name == "--file" or group is not None:
            n = 1 if eq else 2
            raw = val if eq else (args[i + 1] if i + 1 < len(args) else "")
            head = "-"
            if group is not None:
                head, raw, n = group
            real = _clean(raw, f, _cwd_after_chdirs(p, f))
            if not _inside(real, f.lane_path):
                where = (a, f"the file {real}", raw)
                rest = [*args[:i], *([head] if head != "-" else []), *args[i + n :]]
                break
    if where is None:
        return None
    opt, what, named = where
    return Refusal(
        "path_outside_lane",
        f"git config {opt} would write {what}, outside lane {f.lane} ({f.lane_path}); "
        "git may write only in the lane (the lane's repository config: without it)",
        next=[_render(p.globals, "config", rest)],
        details={"lane": f.lane, "what": f"git config {opt}", "path": named or opt},
    )


def _cwd_after_chdirs(p: Parsed, f: GitFacts, count: int | None = None) -> str:
    cwd = f.cwd
    for d in p.chdirs[:count]:
        if d:
            cwd = _clean(d, f, cwd)
    return cwd


def _given_git_dir(p: Parsed, env: Mapping[str, str], f: GitFacts) -> tuple[str, str | None]:
    """(what, value) of the git dir git is told to use: --git-dir, GIT_DIR, or --bare,
    which sets GIT_DIR (when not set yet) to the cwd git is in when it parses --bare,
    before a later -C moves it (`cd b.git && git --bare -C .. status` reads b.git)."""
    if p.git_dir is not None:
        return "--git-dir", p.git_dir
    if env.get("GIT_DIR") or p.bare_at is None:
        return "GIT_DIR", env.get("GIT_DIR")
    return "--bare", _cwd_after_chdirs(p, f, p.bare_at)


def _section_op(args: Sequence[str]) -> bool:
    return any(
        a in ("--rename-section", "--remove-section", "rename-section", "remove-section")
        for a in args
    )


# -- where git reads its configuration and finds its programs ---------------------------
def _config_sources(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """A command decided as read-only (or `git lane`) still reads a configuration, which
    may name a program git runs (core.fsmonitor, diff.external, a pager): it passes only
    when that is the user configuration exec started with and, inside the lane, the lane's
    own repository. A repository outside the lane is another's, read as any git reads it
    (docs/trust-boundary.md); one inside the lane (nested, or made bare there) is the
    lane's own making."""
    for var, was in (("HOME", f.home), ("XDG_CONFIG_HOME", f.xdg_config_home)):
        now = env.get(var, "")
        if now != was:
            prefix = f"{var}={_q(was)} " if was else f"env -u {var} "
            return _config_refusal(
                p,
                f,
                f"{var}={now or '(unset)'} (exec started with {was or '(unset)'}) makes git "
                "read another user configuration",
                var,
                prefix + _render(p.globals, p.cmd, p.args),
            )
    for var in CONFIG_FILE_ENV:
        if var in env:
            return _config_refusal(
                p,
                f,
                f"{var}={env[var]} makes git read that file as its configuration",
                var,
                f"env -u {var} " + _render(p.globals, p.cmd, p.args),
            )
    return _lane_repository(p, env, f)


def _lane_repository(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """A git dir (--git-dir, GIT_DIR, GIT_COMMON_DIR, or a .git or bare repository between
    the cwd and the lane root) inside the lane's worktree: a repository of the lane's making, whose
    configuration git obeys (for every command: _paths lets such a git dir pass as "in
    the lane")."""
    cwd = _cwd_after_chdirs(p, f)
    lane_dotgit = os.path.join(f.lane_path, ".git")
    given = _given_git_dir(p, env, f)
    for what, raw in (given, ("GIT_COMMON_DIR", env.get("GIT_COMMON_DIR"))):
        if not raw:
            continue
        real = _clean(raw, f, cwd)
        if what != "GIT_COMMON_DIR" and _shared_git_dir(real, f):
            return _shared_index_refusal(p, f, f"{what} ({real})", real)
        if real == lane_dotgit or os.path.join(cwd, raw) == lane_dotgit:
            continue  # the lane's own .git file: git follows it to the lane's git dir
        if _inside(real, f.lane_path):
            return _nested_refusal(p, f, f"{what} ({real})", real)
    if not given[1]:
        nested = _nested_git(cwd, f)
        if nested is not None:
            target = f.gitfile(nested)
            if target is None or not _inside(target, f.common):
                return _nested_refusal(p, f, nested, nested)
            if _shared_git_dir(target, f):
                return _shared_index_refusal(p, f, f"{nested} (gitdir: {target})", target)
    return _archive_remote(p, cwd, f)


def _archive_remote(p: Parsed, cwd: str, f: GitFacts) -> Refusal | None:
    """`git archive --remote=REPO` starts git-upload-archive in REPO, which obeys REPO's
    configuration (`tar.NAME.command` with `tar.NAME.remote`): REPO a local path inside
    the lane, other than the lane itself, is a repository of the lane's making. (fetch,
    ls-remote and clone of such a path run git-upload-pack there, which in git 2.39 runs
    no program its repository's configuration names: uploadpack.packObjectsHook is read
    from protected configuration only; push runs the repository's hooks but is refused
    for a lane anyway.)"""
    if p.cmd != "archive":
        return None
    args = list(p.args)
    for i, a in enumerate(args):
        if _ends_options(args, i, p.cmd):
            break
        name, eq, val = a.partition("=")
        # a prefix (--rem): git 2.39 dies on it after its first pass; judged all the same
        if not (len(name) >= 3 and "--remote".startswith(name)):
            continue
        if not eq:
            if i + 1 >= len(args):
                continue
            val = args[i + 1]
        where = _local_repository(val, cwd, f)
        if where is None:
            continue
        rest = [w for j, w in enumerate(args) if j != i and not (j == i + 1 and not eq)]
        return Refusal(
            "unsafe_config",
            f"git archive {name} {val} starts git-upload-archive in {where}, a repository "
            f"inside lane {f.lane} other than the lane's own, whose configuration "
            f"(tar.NAME.command) the lane wrote and git would obey, running a program past "
            "the shim; archive the lane's own repository",
            next=[_render(p.globals, p.cmd, rest)],
            details={"lane": f.lane, "key": "--remote", "setting": val, "path": where},
        )
    return None


def _local_repository(url: str, cwd: str, f: GitFacts) -> str | None:
    """The directory inside the lane (not the lane's root: its .git names the lane's own
    repository) that URL, a remote's name or a local path, makes git serve from, else
    None. A name with no `/` is a remote's when remote.NAME.url is set (git uses its
    URL); URLs git sends to another host (scheme://, [user@]host:path) are not local."""
    if url and "/" not in url and ":" not in url:
        configured = f.config_value(f"remote.{url}.url")
        if configured:
            url = configured
    if url.startswith("file://"):
        url = url[len("file://") :]
    elif "://" in url:
        return None
    colon, slash = url.find(":"), url.find("/")
    if colon >= 0 and (slash < 0 or colon < slash):
        return None  # scp-like host:path (git's url_is_local_not_ssh)
    if not url:
        return None
    real = _clean(url, f, cwd)
    if _inside(real, f.lane_path) and real not in (f.lane_path, os.path.join(f.lane_path, ".git")):
        return real
    return None


def _shared_git_dir(real: str, f: GitFacts) -> bool:
    """The repository's common dir (the hub's git dir) or another worktree's git dir: git
    working there reads, refreshes and so writes that git dir's index, not the lane's."""
    if _inside(real, f.lane_git_dir):
        return False
    return real == f.common or _inside(real, os.path.join(f.common, "worktrees"))


def _shared_index_refusal(p: Parsed, f: GitFacts, what: str, path: str) -> Refusal:
    index = os.path.join(path, "index")
    return Refusal(
        "path_outside_lane",
        f"{what} makes git {p.cmd} use {index}, an index outside lane {f.lane} "
        f"({f.lane_path}): git refreshes (rewrites) the index it reads, git status too; run "
        "it in the lane's own repository (it sees the same branches)",
        next=[
            f"cd {_q(f.lane_path)} && env -u GIT_DIR -u GIT_WORK_TREE "
            + _render(_drop_paths(p.globals), p.cmd, p.args)
        ],
        details={"lane": f.lane, "what": "git dir", "path": path, "index": index},
    )


def _nested_refusal(p: Parsed, f: GitFacts, what: str, path: str) -> Refusal:
    return Refusal(
        "unsafe_config",
        f"{what} makes git {p.cmd} read a repository inside lane {f.lane} other than the "
        f"lane's own, whose configuration (core.fsmonitor, diff.external, a pager...) the "
        "lane wrote and git would obey, running a program past the shim; run it in the "
        "lane's own repository",
        next=[f"cd {_q(f.lane_path)} && " + _render(_drop_paths(p.globals), p.cmd, p.args)],
        details={"lane": f.lane, "key": "repository", "setting": what, "path": path},
    )


def _config_refusal(p: Parsed, f: GitFacts, what: str, var: str, nxt: str) -> Refusal:
    return Refusal(
        "unsafe_config",
        f"{what}, which may name a program git runs past lane {f.lane}'s shim "
        "(core.fsmonitor, a pager, an editor); run the command without it",
        next=[nxt],
        details={"lane": f.lane, "key": var, "setting": what},
    )


# Programs git starts by a bare name looked up on PATH (with its own directory first): the
# default and the "safe" editors and pagers, ssh, the signature programs, man for `git
# help`. Another PATH than exec's may put the lane's own file of that name first.
# (_SAFE_PROGRAMS' names, and more)
PATH_PROGRAMS = (
    "cat", "less", "more", "true", "false", "vi", "vim", "nvim", "nano", "emacs",
    "ssh", "gpg", "gpgsm", "ssh-keygen", "man", "info", "sh",
    "editor", "pager", "sensible-editor", "sensible-pager", "git-lane",
)  # fmt: skip


def _search_path(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """PATH other than exec's: each program git may start by a bare name must be the file
    exec's PATH finds (a PATH with the lane's `.venv/bin` first passes; one whose `vi` or
    `less` is another file does not)."""
    now = env.get("PATH", "")
    was = f.exec_env_path
    if was is None or now == was:
        return None  # None: not asked (the shim refuses a binding without it)
    refusal = _path_entries(p, now, was, f)
    if refusal is not None:
        return refusal
    for name in PATH_PROGRAMS:
        if f.which(name, now) != f.which(name, was):
            return Refusal(
                "unsafe_config",
                f"PATH finds {name} at {f.which(name, now)} (with the PATH exec started "
                f"with: {f.which(name, was)}); git starts {name} by that name with its own "
                f"directory first on PATH, past lane {f.lane}'s shim; run the command with "
                "exec's PATH",
                next=[f"env PATH={_q(was)} " + _render(p.globals, p.cmd, p.args)],
                details={"lane": f.lane, "key": "PATH", "setting": f"PATH={now}", "program": name},
            )
    return None


# -- the process's environment: what git writes to or runs whatever the command -----------
# GIT_TRACE* values other than binding.TRACE_NOT_A_FILE name a file (or socket) git
# appends its trace to, argv included, from inside a lane to anywhere the user can write
# (the state config.toml: a line `enabled = "false"`).
# set by git itself for the programs it starts (no destination)
_TRACE_INFO = ("GIT_TRACE2_PARENT_SID", "GIT_TRACE2_PARENT_NAME")
# variables letting git run protocols (ext::CMD runs CMD) its defaults would not
PROTOCOL_ENV = ("GIT_ALLOW_PROTOCOL", "GIT_PROTOCOL_FROM_USER")
# variables naming notes refs (colon-separated, globs): GIT_NOTES_REWRITE_REF's are written
# by commit --amend and rebase, any ref git is given there (notes.rewriteRef is held to
# refs/notes/ by git, not the variable); only refs under refs/notes/ pass
NOTES_ENV = ("GIT_NOTES_REWRITE_REF", "GIT_NOTES_REF", "GIT_NOTES_DISPLAY_REF")


def notes_refs_ok(value: str) -> bool:
    """Every ref (or glob) of a colon-separated notes ref list is under refs/notes/."""
    return all(
        r.startswith("refs/notes/") and ".." not in r and "\\" not in r
        for r in value.split(":")
        if r
    )


# commands whose words may be a URL git hands a transport (NAME::ADDRESS: git-remote-NAME)
_URL_COMMANDS = frozenset(["ls-remote", "fetch", "pull", "push", "clone", "remote", "archive"])


def _env_refusal(p: Parsed, f: GitFacts, name: str, value: str, why: str) -> Refusal:
    return Refusal(
        "unsafe_config",
        f"{name}={value}: {why}, past lane {f.lane}'s shim; run the command without it",
        next=[f"env -u {name} {_render(p.globals, p.cmd, p.args)}"],
        details={"lane": f.lane, "key": name, "setting": f"{name}={value}"},
    )


def remote_helper(word: str) -> str | None:
    """NAME when WORD (or the value of --opt=WORD) is a URL NAME::ADDRESS, which git hands
    to the program git-remote-NAME (ext:: runs ADDRESS as a command)."""
    w = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
    name, sep, _rest = w.partition("::")
    if sep and name and name[0].isalpha() and all(c.isalnum() or c in "+.-" for c in name):
        return name
    return None


def _process_env(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """Variables that make any git command (read-only ones too) write outside the lane or
    run a program: GIT_TRACE* naming a file, GIT_ALLOW_PROTOCOL / GIT_PROTOCOL_FROM_USER,
    an object store or alternates other than exec's (git repack -a -d -l deletes the packs
    an alternate also has), an index outside the lane (git status rewrites the index it
    reads); and a NAME::URL argument (git starts git-remote-NAME)."""
    for name in sorted(env):
        if (
            name.startswith("GIT_TRACE")
            and name not in _TRACE_INFO
            and env[name].strip().lower() not in binding.TRACE_NOT_A_FILE
        ):
            return _env_refusal(p, f, name, env[name], "git appends its trace to that file")
    if env.get("GIT_TEST_FSMONITOR"):
        return _env_refusal(
            p,
            f,
            "GIT_TEST_FSMONITOR",
            env["GIT_TEST_FSMONITOR"],
            "git runs that program as its file-system monitor when core.fsmonitor is unset",
        )
    for name in PROTOCOL_ENV:
        if env.get(name):
            return _env_refusal(
                p, f, name, env[name], "git may use transports it would not (ext:: runs a command)"
            )
    for name in NOTES_ENV:
        if not notes_refs_ok(env.get(name, "")):
            return _env_refusal(
                p,
                f,
                name,
                env[name],
                "it names a ref outside refs/notes/, which git writes notes into "
                "(commit --amend, rebase: GIT_NOTES_REWRITE_REF) or reads as notes",
            )
    own_store = os.path.join(f.lane_git_dir, "objects")
    shared = os.path.join(f.common, "objects")
    store = env.get("GIT_OBJECT_DIRECTORY")
    alts = env.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")
    if store is not None and _clean(store, f, _cwd_after_chdirs(p, f)) not in (own_store, shared):
        real = _clean(store, f, _cwd_after_chdirs(p, f))
        return Refusal(
            "path_outside_lane",
            f"GIT_OBJECT_DIRECTORY ({real}) is neither the repository's object store nor "
            f"lane {f.lane}'s own (exec --sandbox's); git {p.cmd} would read and write it",
            next=[f"env -u GIT_OBJECT_DIRECTORY {_render(p.globals, p.cmd, p.args)}"],
            details={"lane": f.lane, "what": "GIT_OBJECT_DIRECTORY", "path": real},
        )
    if alts and not (store == own_store and alts == shared):  # exec --sandbox's pair
        return _env_refusal(
            p,
            f,
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            alts,
            "git counts objects there as borrowed (git repack -a -d -l deletes the "
            "repository's packs)",
        )
    index = env.get("GIT_INDEX_FILE")
    if index:
        real = _clean(index, f, _cwd_after_chdirs(p, f))
        if not any(_inside(real, r) for r in (f.lane_path, f.lane_git_dir)):
            return Refusal(
                "path_outside_lane",
                f"GIT_INDEX_FILE ({real}) is outside lane {f.lane} ({f.lane_path}); git "
                f"{p.cmd} rewrites the index it reads (git status too), and may write only "
                "in the lane",
                next=[f"env -u GIT_INDEX_FILE {_render(p.globals, p.cmd, p.args)}"],
                details={"lane": f.lane, "what": "GIT_INDEX_FILE", "path": real},
            )
    if p.cmd in _URL_COMMANDS:
        for w in p.args:
            helper = remote_helper(w)
            if helper is not None:
                return Refusal(
                    "unsafe_config",
                    f"{w}: git hands a {helper}:: URL to the program git-remote-{helper} "
                    f"(ext:: runs the rest as a command) with git's directory first on "
                    f"PATH, past lane {f.lane}'s shim; use a URL git reads itself",
                    next=[f"git lane status {f.lane}"],
                    details={"lane": f.lane, "key": "url", "setting": w},
                )
    return None


def _path_entries(p: Parsed, now: str, was: str, f: GitFacts) -> Refusal | None:
    """git starts programs by many names off any list (git-remote-NAME for NAME::URL, the
    difftool it guesses, kfmclient for `git help`, `editor`, `git-lane` itself), each from
    where git runs it (the worktree's top, for a relative entry). So a PATH other than
    exec's may only reorder or drop exec's entries, and add absolute directories neither
    in the lane nor writable by this process (nor their parents): a virtualenv's bin in
    the lane is the lane's to fill, and is refused."""
    # exec's entries exactly as written: `L/../x` names x only as text (normpath), where
    # the kernel follows the link L first; any other entry must be written as the
    # directory it is: absolute, no `.`, `..`, `//`, no link on the way (whoever can
    # write the link's directory can point it elsewhere after the check)
    exec_dirs = {e for e in was.split(":") if e.startswith("/")}
    for entry in now.split(":"):
        why = ""
        if not entry.startswith("/"):
            why = "is relative: git resolves it where it runs a program (the worktree's top)"
        elif entry in exec_dirs:
            continue
        else:
            plain = entry.rstrip("/") or "/"
            parts = plain.split("/")[1:]
            real = f.realpath(entry)
            if plain != "/" and any(c in ("", ".", "..") for c in parts):
                why = "is not written plainly (`.`, `..` or `//`), so it names another directory than it reads"
            elif real != plain:
                why = (
                    "goes through a symbolic link, which can be pointed elsewhere after this check"
                )
            elif _inside(real, f.lane_path) or _inside(real, f.lane_git_dir):
                why = f"is in lane {f.lane}, whose files the lane writes"
            elif f.writable(real):
                why = "is a directory this process can write (or make, or replace)"
            else:
                continue
        return Refusal(
            "unsafe_config",
            f"PATH entry {entry or '(empty: the cwd)'} {why}, and not on the PATH exec "
            "started with; git starts programs by name from PATH (an editor, a pager, "
            f"git-remote-NAME, a difftool) with its own directory first, past lane {f.lane}'s "
            "shim; run the command with exec's PATH",
            next=[f"env PATH={_q(was)} " + _render(p.globals, p.cmd, p.args)],
            details={"lane": f.lane, "key": "PATH", "setting": f"PATH={now}", "entry": entry},
        )
    return None


# -- aliases ----------------------------------------------------------------------------
def _expand_aliases(p: Parsed, f: GitFacts) -> tuple[Parsed, Refusal | None]:
    seen: set[str] = set()
    while p.cmd is not None and p.cmd not in BUILTINS and p.cmd != "lane":
        if f.is_builtin(p.cmd):
            return p, None  # git runs its own command, whatever an alias says
        name = p.cmd.lower()
        text = f.aliases.get(name)
        if text is None or name in seen:
            return p, None  # an external git-NAME command (git-lfs, ...): _command_known
        seen.add(name)
        if text.startswith("!"):
            shell = text[1:]
            run = f"sh -c {_q(shell)}"
            if p.args:  # as git runs it: the arguments follow the text as "$@"
                with_args = shell + ' "$@"'
                run = f"sh -c {_q(with_args)} {_q(shell)} " + " ".join(_q(a) for a in p.args)
            return p, Refusal(
                "shell_alias",
                f"git {p.cmd} is an alias for a shell command ({shell}); git runs it with its "
                "own git first on PATH, where lane "
                f"{f.lane}'s shim does not see the git commands in it; run the command "
                "itself instead",
                next=[run],
                details={"lane": f.lane, "alias": p.cmd, "text": text},
            )
        try:
            words = shlex.split(text)
        except ValueError:
            return p, _facts_unknown(f, f"what alias {p.cmd} runs ({text!r} does not parse)")
        p = parse([*p.globals, *words, *p.args])
        if p.unknown is not None:
            return p, _unknown_option(p, f)
    return p, None


def _unknown_option(p: Parsed, f: GitFacts) -> Refusal:
    return _facts_unknown(
        f,
        f"what git's global option {p.unknown} does (this git-lane does not know it)",
        argv=list(p.globals),
    )


def _facts_unknown(f: GitFacts, what: str, argv: list[str] | None = None) -> Refusal:
    return Refusal(
        "shim_facts_unknown",
        f"the git shim of lane {f.lane} cannot tell {what}, so it refuses rather than guess",
        next=["git lane doctor"],
        details={"lane": f.lane, "fact": what, **({"argv": argv} if argv else {})},
    )


# -- unsafe_config: settings that make git run a program or move the repository ---------
_PROGRAM_KEYS = frozenset(
    [
        # not programs but files git writes wherever they name (format-patch's output,
        # the cookies a fetch saves): judged the same, as -o is for format-patch
        "format.outputdirectory",
        "http.cookiefile",
        "core.fsmonitor",
        "core.sshcommand",
        "core.pager",
        "core.editor",
        "core.askpass",
        "core.gitproxy",
        "core.worktree",
        "core.bare",
        "core.repositoryformatversion",
        "core.alternaterefscommand",
        "core.attributesfile",
        "sequence.editor",
        "diff.external",
        "credential.helper",
        "gpg.program",
        "uploadpack.packobjectshook",
        "init.templatedir",
        "web.browser",
        "ssh.variant",
        "interactive.difffilter",
        "receive.procreceiverefs",
        # git 2.39's config list audited for what names a program or picks one to run
        "gpg.ssh.defaultkeycommand",  # run to find the signing key (gpg.format=ssh)
        "diff.tool",  # difftool / mergetool run the tool these name
        "diff.guitool",
        "merge.tool",
        "merge.guitool",
        "help.format",  # web: git help runs git web--browse, a script, and a browser
        "help.browser",
        "man.viewer",
        "imap.tunnel",  # git imap-send runs it with the shell
    ]
)
# remotes.GROUP: each member becomes a word of a child `git fetch` (`--upload-pack=PROG`)
_PROGRAM_SECTIONS = (
    "alias",
    "sendemail",
    "instaweb",
    "pager",
    "extensions",
    "protocol",
    "trace2",
    "remotes",
)
_PROGRAM_SUBKEYS = frozenset(
    [
        ("diff", "textconv"),
        ("diff", "command"),
        ("difftool", "cmd"),
        ("difftool", "path"),
        ("mergetool", "cmd"),
        ("mergetool", "path"),
        ("merge", "driver"),
        ("filter", "clean"),
        ("filter", "smudge"),
        ("filter", "process"),
        ("gpg", "program"),
        ("browser", "cmd"),
        ("browser", "path"),
        ("man", "cmd"),
        ("man", "path"),
        ("credential", "helper"),
        ("url", "insteadof"),
        ("url", "pushinsteadof"),
        ("remote", "receivepack"),
        ("remote", "uploadpack"),
        ("remote", "vcs"),
        ("submodule", "update"),
        ("trailer", "command"),  # git interpret-trailers / commit --trailer run them
        ("trailer", "cmd"),
        ("tar", "command"),  # git archive --format=X pipes the tar through it (the shell)
        ("guitool", "cmd"),
        ("branch", "mergeoptions"),  # git merge reads -s/-X there (-s a/x: a lane's file)
    ]
)
# keys that make git write refs other than the lane's branch (rebase --update-refs)
_REF_KEYS = frozenset(["rebase.updaterefs"])
# -c core.pager=cat, -c core.editor=true: what people type (no git in them)
_SAFE_PROGRAMS = (
    "",
    "cat",
    "less",
    "more",
    "true",
    "false",
    ":",
    "vi",
    "vim",
    "nvim",
    "nano",
    "emacs",
)
_EDITORS = ("core.pager", "core.editor", "sequence.editor")


def program_key(key: str) -> bool:
    """Does config key KEY make git run a program (or change where the repository is, or
    name a file git writes)?"""
    k = key.strip().lower()
    parts = k.split(".")
    if parts[0] in _PROGRAM_SECTIONS or k in _PROGRAM_KEYS:
        return True
    return len(parts) >= 3 and (parts[0], parts[-1]) in _PROGRAM_SUBKEYS


# rebase.instructionFormat formats each line of the todo list of every rebase (interactive
# or not) and pull --rebase: a placeholder that can give a newline (%B, %b, %n, %x0a, %w(),
# %N, %(trailers)...), or a newline in the text, makes a line of a commit message a todo
# command (`exec PROG`, run with git's directory first on PATH). Only one-line
# placeholders and plain text pass.
INSTRUCTION_FORMAT = "rebase.instructionformat"
_ONE_LINE_FORMAT = re.compile(r"(?:[^%\x00-\x1f\x7f]|%[sHh%]|%a[neNE])*")


def instruction_format_unsafe(value: str | None) -> bool:
    """Can rebase.instructionFormat=VALUE put a line of a commit's text on a todo line of
    its own? (None: a value the shim cannot see.)"""
    return value is None or _ONE_LINE_FORMAT.fullmatch(value) is None


# Settings that make gc (git gc, and the gc --auto that commit, merge, fetch... start) or
# fetch delete what other lanes and the owner keep, as `gc --prune=now` or `fetch
# --prune-tags` would: objects being written, reflogs, lanes' worktree records, tags.
_EXPIRY_KEYS = frozenset(
    [
        "gc.pruneexpire",
        "gc.worktreepruneexpire",
        "gc.reflogexpire",
        "gc.reflogexpireunreachable",
        "fetch.prunetags",
    ]
)


def expiry_key(key: str, value: str | None) -> bool:
    """Does setting KEY to VALUE (None: unseen) make git delete what others keep?"""
    k = key.strip().lower()
    parts = k.split(".")
    if k == "core.logallrefupdates":  # off: no reflog, the way back for every ref
        return value is None or value.strip().lower() in ("false", "no", "off", "0", "")
    reflog = ("reflogexpire", "reflogexpireunreachable")
    return k in _EXPIRY_KEYS or (parts[0] == "gc" and len(parts) >= 3 and parts[-1] in reflog)


def _transient_expiry(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """-c / --config-env / GIT_CONFIG_* of an expiry_key: judged as the flags are."""
    found: list[tuple[str, str, tuple[str, ...]]] = []
    for kv in p.configs:
        key, eq, val = kv.partition("=")
        if expiry_key(key, val if eq else None):
            found.append((f"-c {kv}", key, ("-c", kv)))
    for kv in p.config_env:
        if expiry_key(kv.partition("=")[0], None):
            found.append((f"--config-env {kv}", kv.partition("=")[0], ("--config-env", kv)))
    if found:
        what, key, drop = found[0]
        nxt = _refused_without(p, env, f, drop)
        if nxt is not None:
            return nxt
        return _expiry_refusal(p, f, what, key, _without(p, drop))
    by_env = _env_setting(env, expiry_key)
    if by_env is not None:
        return _expiry_refusal(p, f, *by_env, _without_config_env(p))
    return None


_CONFIG_ENV = ("GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS")


def _env_setting(
    env: Mapping[str, str], judge: Callable[[str, str | None], bool]
) -> tuple[str, str] | None:
    """(what, the first key) when GIT_CONFIG_COUNT / GIT_CONFIG_PARAMETERS set keys that
    `judge` refuses whatever their value."""
    keys, _ok = _config_keys_from_env(env)
    bad = [k for k in keys if judge(k, None)]
    if not bad:
        return None
    return f"{'/'.join(_CONFIG_ENV)} setting {', '.join(bad)}", bad[0]


def _without_config_env(p: Parsed) -> str:
    return (
        "env " + " ".join(f"-u {v}" for v in _CONFIG_ENV) + " " + _render(p.globals, p.cmd, p.args)
    )


def _expiry_refusal(p: Parsed, f: GitFacts, what: str, key: str, nxt: str) -> Refusal:
    return _main_refusal(
        f,
        f"{what} makes git gc (also the gc --auto that commit, merge or fetch start) or "
        "fetch delete what other lanes and the owner keep (objects being written, reflogs, "
        f"lanes' worktree records, tags), as git gc --prune=now would; lane {f.lane} may "
        "not; run the command without it",
        [nxt],
        key=key,
        setting=what,
        argv=[*p.globals, *([p.cmd] if p.cmd else []), *p.args],
    )


def _transient_unsafe(key: str, value: str | None) -> bool:
    k = key.strip().lower()
    if k == INSTRUCTION_FORMAT:
        return instruction_format_unsafe(value)
    if k.startswith("alias."):
        return False  # the shim judges what an alias runs (shell ones: shell_alias)
    if (k in _EDITORS or k.startswith("pager.")) and value is not None:
        return value.strip() not in _SAFE_PROGRAMS
    if k in _REF_KEYS:
        return value is None or value.strip().lower() not in ("false", "no", "off", "0")
    if k in STRATEGY_KEYS:
        return strategy_config_unsafe(k, value)
    return program_key(k) or k.startswith(("remote.", "url."))


def _transient_config(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """-c / --config-env / GIT_CONFIG_COUNT / GIT_CONFIG_PARAMETERS settings of a program
    key (git runs that program with its own directory first on PATH, past the shim) or of
    a remote / URL rewrite (a fetch refspec the shim would not see)."""
    refusal = _transient_expiry(p, env, f)
    if refusal is not None:
        return refusal
    for kv in p.configs:
        key, eq, val = kv.partition("=")
        if _transient_unsafe(key, val if eq else None):
            return _unsafe_config(p, f, f"-c {kv}", key, drop=("-c", kv))
    for kv in p.config_env:
        key = kv.partition("=")[0]
        if _transient_unsafe(key, None) or key.strip().lower().startswith("alias."):
            return _unsafe_config(p, f, f"--config-env {kv}", key, drop=("--config-env", kv))
    by_env = _env_setting(env, _transient_unsafe)
    if by_env is not None:
        return _unsafe_config(p, f, *by_env)
    return None


def _unsafe_config(
    p: Parsed, f: GitFacts, what: str, key: str, drop: tuple[str, ...] = ()
) -> Refusal:
    """`drop`: the words whose removal is the next; none: the GIT_CONFIG_* variables."""
    nxt = [_without(p, drop) if drop else _without_config_env(p)]
    return Refusal(
        "unsafe_config",
        f"{what}: {key} makes git run a program (or read refs or a repository) that lane "
        f"{f.lane}'s shim does not see, with git's own directory first on PATH; run the "
        "command without it",
        next=nxt,
        details={"lane": f.lane, "key": key, "setting": what},
    )


# Variables naming a program git runs (with its own directory first on PATH, where a
# `git` in the program is the real one; guard/binding.py PROGRAM_VARS): any value is
# refused, but for the editors and pagers a bare name of _SAFE_PROGRAMS, and the value
# `git lane exec` started with.
_EDITOR_ENV = ("GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "EDITOR", "VISUAL", "GIT_PAGER", "PAGER")


def program_env(env: Mapping[str, str]) -> str | None:
    """The first variable of `env` that makes git run a program past the shim, or None.
    A value `git lane exec` started with (GITLANE_PROGRAM_ENV: the owner's) passes."""
    try:
        owners = json.loads(env.get(binding.PROGRAM_ENV) or "{}")
    except ValueError:
        owners = {}
    if not isinstance(owners, dict):
        owners = {}
    for name in binding.PROGRAM_VARS:
        val = env.get(name, "")
        if owners.get(name) == val:
            continue
        if name == "LESSSECURE":  # set, it only restricts less; unset, the owner's is lost
            if val or not owners.get(name):
                continue
            return name
        if val.strip() not in (_SAFE_PROGRAMS if name in _EDITOR_ENV else ("",)):
            return name
    return None


def _program_env(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    name = program_env(env)
    if name is None:
        return None
    if name not in env:  # LESSSECURE unset where the owner's restricts less
        return Refusal(
            "unsafe_config",
            f"{name} is unset (exec started with it set, restricting what less runs); git "
            f"starts less with its own directory first on PATH, past lane {f.lane}'s shim; "
            "run the command with it",
            next=[f"env {name}=1 {_render(p.globals, p.cmd, p.args)}"],
            details={"lane": f.lane, "key": name, "setting": f"{name} unset"},
        )
    return Refusal(
        "unsafe_config",
        f"{name}={env[name]}: git runs that program with its own directory first on PATH, "
        f"where a git in it passes lane {f.lane}'s shim; run the command without it",
        next=[f"env -u {name} {_render(p.globals, p.cmd, p.args)}"],
        details={"lane": f.lane, "key": name, "setting": f"{name}={env[name]}"},
    )


# Options that name a program git runs for a transport (with its exec path first on PATH).
_PROGRAM_OPTIONS = ("--upload-pack", "--receive-pack", "--exec")
# The commands that take them: git completes any unique prefix (`ls-remote --u=PROG`,
# `push --e=PROG`), so every prefix of their names from `--X` on is judged for these
# (other commands: from 5 characters on, for a command that hands them to another).
_PROGRAM_OPTION_COMMANDS: dict[str, tuple[str, ...]] = {
    "ls-remote": ("--upload-pack", "--exec"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "clone": ("--upload-pack",),
    "fetch-pack": ("--upload-pack", "--exec"),
    "push": ("--receive-pack", "--exec"),
    "send-pack": ("--receive-pack", "--exec"),
    "archive": ("--exec",),
}
# Commands whose options taking the next word as their value are all listed here (git
# 2.39's `git CMD -h`: long names, short letters; an abbreviation of a long one is refused
# as unknown_option before it matters): a `--` after any other option word ends their
# options (_ends_options). Any command not here: a `--` after an option word may be its
# value, and the options go on. None of these has an option writing a file or running a
# program.
_PATHSPEC_FILE = "--pathspec-from-file"
_DASH_ENDS: dict[str, tuple[frozenset[str], str]] = {
    "rm": (frozenset({_PATHSPEC_FILE}), ""),
    "add": (frozenset({_PATHSPEC_FILE, "--chmod"}), ""),
    "mv": (frozenset(), ""),
    "reset": (frozenset({_PATHSPEC_FILE}), ""),
    "restore": (frozenset({_PATHSPEC_FILE, "--source", "--conflict"}), "s"),
    "checkout": (frozenset({_PATHSPEC_FILE, "--conflict", "--orphan"}), "bB"),
    "commit": (
        frozenset(
            {_PATHSPEC_FILE, "--file", "--author", "--date", "--message", "--reedit-message"}
            | {"--reuse-message", "--squash", "--fixup", "--trailer", "--template", "--cleanup"}
        ),
        "FmcCt",
    ),
}
# Per command, options that name a program (or, --template, hooks) git runs past the shim:
# the long names (any prefix from `--X` on git would complete) and the short letters.
_RUNS_PROGRAM: dict[str, tuple[tuple[str, ...], str]] = {
    "grep": (("--open-files-in-pager",), "O"),
    "difftool": (("--extcmd", "--tool", "--tool-help"), "xt"),
    "rebase": (("--exec",), "x"),
    "clone": (("--template",), ""),
    "init": (("--template",), ""),
}


def _drop_word(args: Sequence[str], word: str) -> list[str]:
    """`args` without `word` and, when it takes one there, the value after it."""
    i = list(args).index(word)
    takes = "=" not in word and (
        word[-1] in "xt" if not word.startswith("--") else not word.startswith("--tool-")
    )
    return [*args[:i], *args[i + 1 + int(takes) :]]


def _runs_program(cmd: str, args: Sequence[str]) -> str | None:
    """The word of `git CMD ARGS` that makes git run a program past the shim (grep -O,
    difftool -x/--tool, rebase -x, clone/init --template), or None."""
    longs, shorts = _RUNS_PROGRAM.get(cmd, ((), ""))
    for i, a in enumerate(args):
        if _ends_options(args, i):
            break
        name = a.partition("=")[0]
        if a.startswith("--") and len(name) >= 3 and any(o.startswith(name) for o in longs):
            return a
        if a.startswith("-") and not a.startswith("--") and set(a[1:]) & set(shorts):
            return a
    return None


def _program_options(p: Parsed, f: GitFacts) -> Refusal | None:
    """fetch/clone/ls-remote --upload-pack=PROG, push --receive-pack, archive --exec (and
    git's prefixes of them; clone -u PROG): git runs PROG past the shim."""
    args = list(p.args)
    if p.cmd == "clone":
        refusal = _clone_config(p, f)
        if refusal is not None:
            return refusal
    word = _runs_program(p.cmd or "", args)
    if word is not None:
        return Refusal(
            "unsafe_config",
            f"git {p.cmd} {word} makes git run a program (or template hooks) with its own "
            f"directory first on PATH, past lane {f.lane}'s shim; run the command without it",
            next=[_render(p.globals, p.cmd, _drop_word(args, word))],
            details={"lane": f.lane, "key": word.partition("=")[0], "argv": [p.cmd or "", *args]},
        )
    own = _PROGRAM_OPTION_COMMANDS.get(p.cmd or "", ())
    for i, a in enumerate(args):
        # for the commands that take these options, a `--` after an option word may be
        # its value (parse-options reads on); past any `--` they are no options of any
        # other command (git dies on them, or they name a file: `rm -- --exec=x`)
        ends = a == "--" and not _hands_on_dashdash(p.cmd, args)
        if _ends_options(args, i, p.cmd) if own else ends:
            break
        name = a.partition("=")[0]
        hit = (len(name) >= 5 and any(o.startswith(name) for o in _PROGRAM_OPTIONS)) or (
            len(name) >= 3 and any(o.startswith(name) for o in own)
        )
        # clone -u PROG, -uPROG, -qu PROG (the rest of a group of short flags, or the next word)
        short = _short_value(args, i, _CLONE_VALUE_SHORT, "u") if p.cmd == "clone" else None
        if p.cmd == "rebase" or not (hit or short):
            continue  # rebase --exec: _runs_program above
        rest = [w for j, w in enumerate(args) if j != i and not (j == i + 1 and "=" not in a)]
        if short is not None:
            head, _v, n = short
            rest = [*args[:i], *([head] if head != "-" else []), *args[i + n :]]
        return Refusal(
            "unsafe_config",
            f"git {p.cmd} {a} names a program git runs (with its own directory first on "
            f"PATH, past lane {f.lane}'s shim); run the command without it",
            next=[_render(p.globals, p.cmd, rest)],
            details={"lane": f.lane, "key": name, "argv": [p.cmd or "", *args]},
        )
    return None


# -- merge strategies: git runs `git-merge-NAME` for any strategy but ort/recursive ------
# A strategy other than the built-in names is the program git-merge-NAME, found on PATH
# (git's own directory first) or, for a NAME with a `/`, a path from the worktree's top:
# a file of the lane's. Only the names git ships pass (guard/commands/sync.py's list).
MERGE_STRATEGIES = frozenset({"ort", "recursive", "resolve", "octopus", "ours", "subtree"})
# -X values ort/recursive take (merge-recursive.c parse_merge_opt); resolve and octopus
# pass each as `--VALUE` to `git read-tree`, unquoted (`index-output=F` writes F; a space
# splits it into two words, a `*` globs): only these, with a plain value after `=`.
_STRATEGY_OPTION = re.compile(
    r"(?:ours|theirs|subtree|patience|histogram|ignore-space-change|ignore-all-space"
    r"|ignore-space-at-eol|ignore-cr-at-eol|renormalize|no-renormalize|no-renames"
    r"|find-renames|(?:subtree|diff-algorithm|find-renames|rename-threshold)=[\w.,%+:@/-]*)",
    re.ASCII,
)
# per command: its short letters taking a value (the rest of the word or the next word;
# an optional one takes the rest only, but ends the group too), and those of -s and -X
_STRATEGY_SHORTS: dict[str, tuple[str, str]] = {
    "merge": ("sXmFS", "sX"),
    "rebase": ("sXxCSr", "sX"),
    "pull": ("sXoSrj", "sX"),
    "cherry-pick": ("XmS", "X"),  # -s is --signoff there
    "revert": ("XmS", "X"),
}
# the config keys naming strategies (pull.twohead: a merge of one head, pull.octopus: more)
STRATEGY_KEYS = ("pull.twohead", "pull.octopus")


def strategy_unsafe(value: str) -> bool:
    """Is `value` (of -s/--strategy) other than exactly a strategy git ships?"""
    return value not in MERGE_STRATEGIES


def strategy_option_unsafe(value: str) -> bool:
    """Is `value` (of -X/--strategy-option) other than one ort/recursive knows, written
    plainly (resolve/octopus hand it to read-tree as an option: index-output=F)?"""
    return _STRATEGY_OPTION.fullmatch(value) is None


def strategy_config_unsafe(key: str, value: str | None) -> bool:
    """pull.twohead / pull.octopus naming anything but strategies git ships (a list, as
    git splits it: blanks); unknown (None) is unsafe."""
    if key.strip().lower() not in STRATEGY_KEYS:
        return False
    return value is None or not value.split() or any(strategy_unsafe(v) for v in value.split())


def _strategy_words(cmd: str, args: Sequence[str]) -> list[tuple[str, str, list[str]]]:
    """(option as written, its value, the args without it) for every -s/--strategy and
    -X/--strategy-option of `git CMD ARGS`: `-s X`, `-sX`, `-qsX`, `--strategy X`,
    `--strategy=X` (a prefix of them is unknown_option, spelled out and judged again)."""
    values, mine = _STRATEGY_SHORTS[cmd]  # cherry-pick/revert: --strategy, no -s
    longs = ("--strategy", "--strategy-option")
    out: list[tuple[str, str, list[str]]] = []
    args = list(args)
    for i, a in enumerate(args):
        if _ends_options(args, i, cmd):
            break
        name, eq, val = a.partition("=")
        if name in longs:
            if eq:
                out.append((name, val, [*args[:i], *args[i + 1 :]]))
            else:
                v = args[i + 1] if i + 1 < len(args) else ""
                out.append((name, v, [*args[:i], *args[i + 2 :]]))
            continue
        for ch in mine:
            group = _short_value(args, i, values, ch)
            if group is not None:
                head, v, n = group
                rest = [*args[:i], *([head] if head != "-" else []), *args[i + n :]]
                out.append((f"-{ch}", v, rest))
    return out


def _merge_strategy(p: Parsed, f: GitFacts) -> Refusal | None:
    """A strategy that is no built-in name runs git-merge-NAME (a file of the lane's for
    a NAME with `/`), and a -X value resolve/octopus hand to read-tree as an option
    (index-output=F writes F): both with git's own directory first on PATH."""
    cmd = p.cmd or ""
    if cmd not in _STRATEGY_SHORTS:
        return None
    for opt, value, rest in _strategy_words(cmd, p.args):
        strategy = opt in ("-s", "--strategy")
        if not (strategy_unsafe(value) if strategy else strategy_option_unsafe(value)):
            continue
        why = (
            f"runs the program git-merge-{value} (a file of the lane's when the name holds "
            "a `/`); only the strategies git ships may run in a lane: "
            + ", ".join(sorted(MERGE_STRATEGIES))
            if strategy
            else "is no option the ort/recursive strategies know, and the resolve and octopus "
            "strategies hand it to git read-tree as an option (index-output=FILE writes FILE)"
        )
        return Refusal(
            "unsafe_config",
            f"git {cmd} {opt} {value} {why}, with git's own directory first on PATH, past "
            f"lane {f.lane}'s shim; run the command without it",
            next=[_render(p.globals, cmd, rest)],
            details={"lane": f.lane, "key": opt, "argv": [cmd, *p.args]},
        )
    return None


# a hook's name: what githooks(5) names are made of (no `/`, no `.`: `../x` is any file)
_HOOK_NAME = re.compile(r"[a-z0-9][a-z0-9-]*", re.ASCII)


def _hook_run(p: Parsed, f: GitFacts) -> Refusal | None:
    """`git hook run NAME` runs `<hooks dir>/NAME` (hook.c find_hook: no check of NAME),
    with git's own directory first on PATH: a NAME with `/` or `..` is any file, a program
    of the lane's. Only a plain hook name passes; the next runs that file itself (through
    the shim)."""
    args = list(p.args)
    if p.cmd != "hook" or not args or args[0] != "run":
        return None
    rest = args[1:]
    i = 0
    while i < len(rest) and rest[i].startswith("-") and rest[i] != "--":
        i += 1  # --ignore-missing (any other: unknown_option)
    if i < len(rest) and rest[i] == "--":
        i += 1
    if i >= len(rest) or _HOOK_NAME.fullmatch(rest[i]):
        return None
    name = rest[i]
    hooks = f.config_value("core.hookspath") or os.path.join(f.common, "hooks")
    target = os.path.normpath(os.path.join(f.lane_path, os.path.expanduser(hooks), name))
    hook_args = rest[i + 1 :]
    if hook_args[:1] == ["--"]:
        hook_args = hook_args[1:]
    return Refusal(
        "unsafe_config",
        f"git hook run {name}: a name that is no plain hook name ([a-z0-9-]) runs any file "
        f"({target}) with git's own directory first on PATH, past lane {f.lane}'s shim; "
        "run the program itself instead",
        next=[" ".join(_q(w) for w in [target, *hook_args])],
        details={"lane": f.lane, "key": "hook run", "argv": [p.cmd, *args]},
    )


def _remote_name_unsafe(name: str) -> bool:
    """A remote named like an option word (`--upload-pack=PROG`): every `git fetch --all`,
    `remote update` and maintenance prefetch (the owner's too) hands the name to a child
    `git fetch` as an argv word, where it is that option."""
    return name.startswith("-")


def _safe_remote_name(name: str) -> str:
    rest = name.lstrip("-")
    return rest if rest[:1].isalnum() else "remote" + name


def _remote_add(p: Parsed, f: GitFacts) -> Refusal | None:
    """`git remote add [-f] [--] NAME URL` / `remote rename OLD NEW` with a NAME starting
    with `-`: refused (the shared config keeps it for everyone's later fetches)."""
    args = list(p.args)
    if p.cmd != "remote":
        return None
    at = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
    if at is None or args[at] not in ("add", "rename"):
        return None
    pos: list[int] = []
    ended = False
    i = at + 1
    while i < len(args):
        a = args[i]
        if ended or not a.startswith("-") or a == "-":
            pos.append(i)
        elif a == "--":
            ended = True
        elif a in ("-t", "--track", "-m", "--master"):
            i += 1
        elif not a.startswith("--") and any(c in "tm" for c in a[1:]):
            first = next(j for j, c in enumerate(a[1:], start=1) if c in "tm")
            i += int(first == len(a) - 1)  # the value: the rest of the word, or the next
        i += 1
    names = pos[:1] if args[at] == "add" else pos[1:2]
    bad = [j for j in names if _remote_name_unsafe(args[j])]
    if not bad:
        return None
    j = bad[0]
    fixed = [*args[:j], _safe_remote_name(args[j]), *args[j + 1 :]]
    return Refusal(
        "unsafe_config",
        f"git remote {args[at]}: a remote named {args[j]} (starting with `-`) becomes an option "
        "of the child `git fetch` that every later fetch --all, remote update or maintenance "
        f"prefetch (the owner's too) starts per remote; lane {f.lane} may not name one so",
        next=[_render(p.globals, p.cmd, fixed)],
        details={"lane": f.lane, "key": "remote name", "argv": [p.cmd, *args]},
    )


# rerere.enabled unset, git takes an existing <common>/rr-cache as rerere on, for the whole
# repository: a lane that makes it records resolutions the owner's later merges obey
_RERERE_KEYS = ("rerere.enabled", "rerere.autoupdate")


def _rerere_on(key: str, value: str | None) -> bool:
    """Does setting KEY to VALUE (None: unknown) switch rerere on (or its auto-update)?"""
    if key.strip().lower() not in _RERERE_KEYS:
        return False
    return value is None or value.strip().lower() not in ("false", "no", "off", "0")


def _enabled(f: GitFacts) -> str:
    """rerere.enabled as the lane's git reads it ("false" when unset: git then goes by the
    cache, which does not exist here)."""
    value = f.config_value("rerere.enabled")
    return "false" if value is None else value


def _rerere(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """While <common>/rr-cache does not exist: a setting switching rerere on (-c,
    --config-env, GIT_CONFIG_*, git config) and `git rerere` (which makes it then) are
    refused, since git would create it, shared by every worktree, outside the lane."""
    cache = os.path.join(f.common, "rr-cache")
    if f.exists(cache):
        return None  # rerere is on for the repository already (the owner's)
    what, nxt = None, ""
    for kv in p.configs:
        key, eq, val = kv.partition("=")
        if _rerere_on(key, val if eq else None):
            what, nxt = f"-c {kv}", _without(p, ("-c", kv))
    for kv in p.config_env:
        if _rerere_on(kv.partition("=")[0], None):
            what, nxt = f"--config-env {kv}", _without(p, ("--config-env", kv))
    # by value: exec sets rerere.enabled=false for a sandboxed CMD (guard/commands/exec.py)
    on = [k for k, v in _config_pairs_from_env(env) if _rerere_on(k, v)]
    if what is None and on:
        what = f"{'/'.join(_CONFIG_ENV)} setting {', '.join(on)}"
        nxt = _without_config_env(p)
    if what is None and p.cmd == "config" and _config_mode(p.args)[0] == "write":
        words = _config_mode(p.args)[1]
        unsets = any(a in ("--unset", "--unset-all") for a in p.args)
        if words and not unsets and _rerere_on(words[0], words[1] if len(words) > 1 else None):
            what = f"git config {words[0]}"
            nxt = f"git config --show-origin --get-all {_q(words[0])}"
    if what is None and p.cmd == "rerere" and _rerere_on("rerere.enabled", _enabled(f)):
        # git rerere makes the cache only when rerere.enabled says true (unset and no
        # cache: it does nothing, `status` and `diff` included)
        what, nxt = "git rerere", "git status"
    if what is None:
        return None
    return Refusal(
        "path_outside_lane",
        f"{what}: git would make {cache}, shared by every worktree, outside lane {f.lane} "
        f"({f.lane_path}), and with it rerere on for the whole repository (the owner's "
        "later merges would take the resolutions recorded there); git may write only in the "
        "lane",
        next=[nxt],
        details={"lane": f.lane, "what": what, "path": cache},
    )


# clone's options that take the next word as their value (short ones: the rest of the word)
_CLONE_VALUE_SHORT = "obucj"


def _clone_config_words(args: Sequence[str]) -> list[tuple[int, int, str]]:
    """(first word, words, KEY=VALUE) of each -c/--config of `git clone ARGS`: set in the new
    repository before its checkout, so hooks, filters and programs it names run in it."""
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if _ends_options(args, i):
            break
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            if name in _INIT_CLONE_VALUES and not eq:
                if name == "--config" and i + 1 < len(args):
                    out.append((i, 2, args[i + 1]))
                i += 2
                continue
            if name == "--config":
                out.append((i, 1, val))
        elif a.startswith("-") and a != "-":
            for j, ch in enumerate(a[1:], start=1):
                if ch in _CLONE_VALUE_SHORT:
                    rest = a[j + 1 :]
                    if ch == "c":
                        out.append(
                            (
                                i,
                                1 if rest else 2,
                                rest or (args[i + 1] if i + 1 < len(args) else ""),
                            )
                        )
                    if not rest:
                        i += 1
                    break
        i += 1
    return out


def _clone_config(p: Parsed, f: GitFacts) -> Refusal | None:
    """`git clone -c KEY=VALUE`, judged as `git -c KEY=VALUE` is: a hook key is
    hooks_disabled, a program key (or remote/URL) unsafe_config."""
    args = list(p.args)
    for start, n, kv in _clone_config_words(args):
        key, eq, val = kv.partition("=")
        hook = _hook_key(key)
        if not hook and not _transient_unsafe(key, val if eq else None):
            continue
        word = args[start]
        rest = [*args[:start], *args[start + n :]]
        if word.startswith("-") and not word.startswith("--") and len(word) > 2 and n == 2:
            rest.insert(start, word[:-1])  # -qc KEY=VALUE: keep -q
        elif word.startswith("-") and not word.startswith("--") and n == 1:
            head = word[: word.index("c", 1)]
            if head != "-":
                rest.insert(start, head)
        what = f"git clone {word}{' ' + args[start + 1] if n == 2 else ''}"
        nxt = [_render(p.globals, "clone", rest)]
        if hook:
            return Refusal(
                "hooks_disabled",
                f"{what} would set {key} in the new repository, switching its hooks to the "
                f"lane's own programs, which git runs past lane {f.lane}'s shim; run the "
                "command without it",
                next=nxt,
                details={"lane": f.lane, "setting": what, "argv": ["clone", *args]},
            )
        return Refusal(
            "unsafe_config",
            f"{what}: {key} makes git run a program (or read refs or a repository) that lane "
            f"{f.lane}'s shim does not see, with git's own directory first on PATH, in the "
            "new repository's checkout; run the command without it",
            next=nxt,
            details={"lane": f.lane, "key": key, "setting": what},
        )
    return None


# -- external commands and git commands this policy does not judge ---------------------
# Commands git ships as scripts run with git's own directory first on PATH, so the git
# commands in them pass no shim; git --list-cmds=builtins does not name them. Of BUILTINS,
# the ones some git ships as scripts (the rest need no question to git):
MAYBE_SCRIPTS = frozenset(
    ["submodule", "filter-branch", "mergetool", "request-pull", "send-email", "bisect", "difftool"]
)
# Builtins that write nothing a lane could misuse but are not in READ_ONLY/BUILTINS.
_UNJUDGED_OK = frozenset(["patch-id", "column", "show-index", "fmt-merge-msg", "stage"])


# git's scripts act by path in the lane's worktree and in its admin dir (GIT_DIR), both
# the lane's to write while a process of it may still run: git-instaweb runs an httpd
# it finds in `$GIT_DIR/gitweb` and `kill $(cat "$GIT_DIR/pid")`, git-mergetool moves
# and writes files by their names in the worktree (a directory the lane made a link),
# git-filter-branch hands the words after `--` to rev-list (`--output=FILE`) and
# rewrites whatever refs they name, `bisect log` shows `$GIT_DIR/BISECT_LOG` (red teams
# 13R-14A). No list of option words makes the owner's run of such a script safe, so no
# owner's command is printed for any of them. What to do instead, per script: why, in
# words, and the commands the lane may run instead (its alternatives, each one it runs).
_SCRIPT_INSTEAD: dict[str, tuple[str, list[str]]] = {
    "mergetool": (
        "resolve each conflicted file (git diff --name-only --diff-filter=U lists them) by "
        "editing it, then `git add` it",
        ["git diff --name-only --diff-filter=U"],
    ),
    "difftool": ("read the changes with git diff", ["git diff"]),
    "bisect": (
        "bisecting checks out commit after commit, which a lane may not (it works on its "
        "own branch only): bisect in a clone of your own, outside git-lane, and read the "
        "history here with git log --oneline",
        ["git log --oneline"],
    ),
    "submodule": (
        "git ls-files --stage lists the submodules' commits (mode 160000)",
        ["git ls-files --stage"],
    ),
}


def _command_known(p: Parsed, f: GitFacts) -> Refusal | None:
    cmd = p.cmd or ""
    builtin = f.is_builtin(cmd)
    if builtin and (cmd in BUILTINS or cmd in _UNJUDGED_OK):
        return None
    if builtin:
        return Refusal(
            "shim_facts_unknown",
            f"the git shim of lane {f.lane} cannot tell what git {cmd} writes (a git command "
            "this git-lane does not judge), so it refuses rather than guess",
            next=[f"git help {_q(cmd)}"],
            details={"lane": f.lane, "fact": f"what git {cmd} writes", "argv": [cmd, *p.args]},
        )
    direct = " ".join(_q(w) for w in [f"git-{cmd}", *p.args])
    if f.exec_path and f.exists(os.path.join(f.exec_path, f"git-{cmd}")):
        # one of git's own scripts: it runs only from git's directory, which it puts first
        # on PATH (past the shim), so nothing in the lane runs it safely; and the owner's
        # run of it acts by path in the lane's worktree and admin dir, which a process of
        # the lane may still change under it (_SCRIPT_INSTEAD): no owner's command either
        why, instead = _SCRIPT_INSTEAD.get(cmd, ("", []))
        return Refusal(
            "external_command",
            f"git {cmd} is one of git's scripts ({f.exec_path}/git-{cmd}), not built into "
            f"git: it runs with git's own directory first on PATH, where lane {f.lane}'s "
            "shim does not see the git commands in it, so it cannot run in the lane; and it "
            "acts by path in the lane's worktree and admin dir, which a process of the lane "
            "may change while it runs, so no owner's command is printed for it either"
            + (f"; instead, {why}" if why else ""),
            next=[f"git lane status {f.lane}"],
            alternatives=list(instead),
            details={"lane": f.lane, "command": cmd, "argv": [cmd, *p.args]},
        )
    return Refusal(
        "external_command",
        f"git {cmd} is not built into git but the program git-{cmd} (or a typo); git runs "
        f"it with its own directory first on PATH, where lane {f.lane}'s shim does not see "
        "the git commands in it; run the program itself instead",
        next=[direct],
        alternatives=["git --exec-path"],
        details={"lane": f.lane, "command": cmd, "argv": [cmd, *p.args]},
    )


# -- unknown_option: long options git would complete from a prefix --------------------
_SUBCOMMANDS: dict[str, tuple[str, ...]] = {
    "reflog": ("show", "expire", "delete", "exists"),
    "stash": ("push", "save", "pop", "apply", "drop", "clear", "list", "show", "branch"),
    "worktree": ("add", "list", "lock", "move", "prune", "remove", "repair", "unlock"),
    "bundle": ("create", "verify", "list-heads", "unbundle"),
    "notes": ("list", "add", "copy", "append", "edit", "show", "merge", "remove", "prune"),
    "remote": ("add", "rename", "remove", "rm", "set-head", "set-branches", "get-url"),
    "maintenance": ("run", "start", "stop", "register", "unregister"),
    "sparse-checkout": ("list", "init", "set", "add", "reapply", "disable"),
    "commit-graph": ("verify", "write"),
    "multi-pack-index": ("write", "verify", "expire", "repack"),
    "hook": ("run",),
}


# Options whose value is the next word (a message `--fix: x` is no option), per command.
_MESSAGE = ("-m", "--message", "-F", "--file", "--cleanup")
_STRATEGY = ("-s", "--strategy", "-X", "--strategy-option")
_TAKES_VALUE: dict[str, tuple[str, ...]] = {
    "commit": (
        *_MESSAGE, "-C", "--reuse-message", "-c", "--reedit-message", "--author", "--date",
        "--fixup", "--squash", "--trailer", "-t", "--template", "--pathspec-from-file",
    ),
    "tag": (*_MESSAGE, "-u", "--local-user"),
    "merge": (*_MESSAGE, *_STRATEGY),
    "notes": (*_MESSAGE, "-C", "--reuse-message", "-c", "--reedit-message"),
    "stash": ("-m", "--message", "--pathspec-from-file"),
    "revert": ("-m", "--mainline", "--cleanup", "--strategy", "-X", "--strategy-option"),
    "cherry-pick": ("-m", "--mainline", "--cleanup", "--strategy", "-X", "--strategy-option"),
}  # fmt: skip


def long_option_words(args: Sequence[str], cmd: str = "") -> list[str]:
    """The `--name[=value]` words before the `--` that ends the options (_ends_options;
    not the value of an option of `cmd` that takes the next word: `commit -m "--fix: x"`)."""
    out = []
    takes = _TAKES_VALUE.get(cmd, ())
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if _ends_options(args, i, cmd or None):
            break
        if a in takes:
            skip = True
        elif a.startswith("--") and a != "--":
            out.append(a)
    return out


def _long_options(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    """git takes any unique prefix of a long option (`--al` for `--all`): a long option
    that is not one of the command's own names, spelled out, is refused; the `next` is
    the command with it spelled out when git would complete it to one name."""
    cmd = p.cmd or ""
    args = list(p.args)
    longs = long_option_words(args, cmd)
    if not longs:
        return None
    sub = None
    if cmd in _SUBCOMMANDS:
        if args and args[0] in _SUBCOMMANDS[cmd]:
            sub = args[0]
        elif cmd == "stash":
            sub = "push"
    known = f.long_options(cmd, sub)
    for a in longs:
        name, eq, val = a.partition("=")
        if known is not None and name in known:
            continue
        cands = sorted(k for k in (known or ()) if k.startswith(name))
        i = args.index(a)
        # past a `--` read as a possible value it may name a file: ./NAME is that file
        as_file = [_render(p.globals, cmd, [*args[:i], "./" + a, *args[i + 1 :]])]
        past = "--" in args[:i]
        if past and _hands_on_dashdash(cmd, args):
            # past a `--` git drops, another parser (fetch's, log's) reads it: neither this
            # command's name for it nor a file named so is what git would take
            cands, past = [], False
        if len(cands) == 1:
            full = [*args[:i], cands[0] + eq + val, *args[i + 1 :]]
            argv = [*p.globals, cmd, *full]
            inner = decide_git(argv, env, f)
            if inner is not None:
                return inner  # what git would do with it spelled out is refused
            nxt = [_render(p.globals, cmd, full)]
        else:
            nxt = as_file if past else [f"git help {_q(cmd)}"]
        what = f"git {cmd}{' ' + sub if sub else ''}"
        return Refusal(
            "unknown_option",
            f"{name} is not an option of {what} as written"
            + (f" (git would take it as {cands[0]})" if len(cands) == 1 else "")
            + f"; lane {f.lane}'s shim judges options spelled out in full"
            + (f" (a file of that name after `--`: ./{a})" if past else ""),
            next=nxt,
            alternatives=as_file if past and len(cands) == 1 else [],
            details={"lane": f.lane, "option": a, "argv": [cmd, *args], "candidates": cands},
        )
    return None


# -- options and arguments that name a file git writes --------------------------------
_PATH_OPTIONS: dict[str, tuple[str, ...]] = {
    "checkout-index": ("--prefix",),
    "format-patch": ("-o", "--output-directory"),
    "config": ("-f", "--file"),
    "archive": ("-o", "--output"),
    "bugreport": ("-o", "--output-directory"),
    "diagnose": ("-o", "--output-directory"),
    "fast-export": ("--export-marks",),
    "init": ("--separate-git-dir",),
    "clone": ("--separate-git-dir",),
    "index-pack": ("-o",),
    "commit-graph": ("--object-dir",),
    "multi-pack-index": ("--object-dir",),
    # the index read-tree writes (`--index-output FILE` too, and a/../../x: judged by realpath)
    "read-tree": ("--index-output",),
}
# Options whose value git only reads, or that is no path at all (a value outside the lane
# is fine for them); any other --opt=/path outside the lane is refused.
_READ_PATH_OPTIONS = frozenset(
    [
        "--message",
        "--author",
        "--date",
        "--trailer",
        "--format",
        "--pretty",
        "--fixup",
        "--squash",
        "--reuse-message",
        "--reedit-message",
        "--onto",
        "--strategy-option",
        "--since",
        "--until",
        "--expire",
        "--expire-unreachable",
        "--file",
        "--pathspec-from-file",
        "--template",
        "--reference",
        "--reference-if-able",
        "--import-marks",
        "--import-marks-if-exists",
        "--exclude-from",
        "--mailmap-file",
        "--git-dir",
        "--exec-path",
        "--upload-pack",
        "--receive-pack",
        "--exec",
    ]
)


# Per command, the short options that take a value (git 2.39's parse-options): in a group
# of short flags the first of them takes the rest of the word, or the next word
# (`format-patch -qko DIR`, `-kvo`: -v's value is "o"). A command not named here: only the
# letters _option_values looks for take one.
_SHORT_VALUES: dict[str, str] = {
    "format-patch": "ov",
    "archive": "o",
    "bugreport": "os",
    "diagnose": "os",
    "config": _CONFIG_SHORT_VALUES,
    "clone": _CLONE_VALUE_SHORT,
}


def _short_value(
    args: Sequence[str], i: int, values: str, want: str
) -> tuple[str, str, int] | None:
    """When args[i] is a group of short flags (`-o`, `-oV`, `-qko`) whose first letter of
    `values` (the command's value-taking letters) is `want`: (the letters before it, its
    value: the rest of the word or the next word, the words it spans); else None."""
    a = args[i]
    if not a.startswith("-") or a.startswith("--") or len(a) < 2:
        return None
    for j, ch in enumerate(a[1:], start=1):
        if ch in values or ch == want:
            if ch != want:
                return None
            if j < len(a) - 1:
                return a[:j], a[j + 1 :], 1
            return a[:j], args[i + 1] if i + 1 < len(args) else "", 2
    return None


def _option_values(
    args: Sequence[str], names: Sequence[str], cmd: str = ""
) -> list[tuple[str, str]]:
    """(option, value) for each of `names` in args: --opt=V, --opt V, -oV, -o V, and a
    short one in a group of short flags (-qko V: _short_value, `cmd`'s letters)."""
    out: list[tuple[str, str]] = []
    shorts = "".join(n[1:] for n in names if len(n) == 2 and n[0] == "-" and n[1] != "-")
    values = _SHORT_VALUES.get(cmd, "") + shorts
    i = 0
    while i < len(args):
        a = args[i]
        if _ends_options(args, i, cmd):
            break
        hit = next(
            ((f"-{c}", g) for c in shorts if (g := _short_value(args, i, values, c)) is not None),
            None,
        )
        if hit is not None:
            n, (_head, v, words) = hit
            if words == 2 and i + 1 >= len(args):
                break  # no value: git refuses
            out.append((n, v))
            i += words
            continue
        for n in names:
            if a == n and i + 1 < len(args):
                out.append((n, args[i + 1]))
                i += 1
                break
            if n.startswith("--") and a.startswith(n + "="):
                out.append((n, a[len(n) + 1 :]))
                break
            if not n.startswith("--") and a.startswith(n) and len(a) > len(n):
                out.append((n, a[len(n) :]))
                break
        i += 1
    return out


def _written_paths(p: Parsed) -> list[tuple[str, str]]:
    """(what, path) for every file or directory `git CMD ARGS` is told to write."""
    cmd, args = p.cmd or "", list(p.args)
    out = [(f"git {cmd} {n}", v) for n, v in _option_values(args, _PATH_OPTIONS.get(cmd, ()), cmd)]
    if cmd != "config":
        out += [(f"git {cmd} --output", v) for _n, v in _option_values(args, ("--output",), cmd)]
    if cmd == "bundle" and args and args[0] == "create":
        pos = _positional(args[1:], ("--version",))
        if pos:
            out.append(("git bundle create's file", pos[0]))
    if cmd == "merge-file" and not _merge_file_stdout(args):
        pos = _positional(args, _MERGE_FILE_VALUES)  # CURRENT BASE OTHER: git writes CURRENT
        if pos:
            out.append((_MERGE_FILE_CURRENT, pos[0]))
    if cmd == "pack-objects":
        pos = _positional(args, ("--window", "--depth", "--threads", "--filter"))
        if pos:
            out.append(("git pack-objects's base name", pos[0]))
    for a in long_option_words(args, cmd):
        name, eq, val = a.partition("=")
        if eq and name not in _READ_PATH_OPTIONS and val.startswith(("/", "~", "..")):
            out.append((f"git {cmd} {name}", val))
    if cmd in ("apply", "am") and "--unsafe-paths" in args:
        out.append((f"git {cmd} --unsafe-paths", "/"))
    return out


# merge-file's options taking the next word (git 2.39 `git merge-file -h`), and what
# _paths calls the file it writes its result into (unless -p/--stdout)
_MERGE_FILE_VALUES = ("-L", "--marker-size")
_MERGE_FILE_CURRENT = "git merge-file's current file"


def _merge_file_stdout(args: Sequence[str]) -> bool:
    """Does `git merge-file ARGS` write its result to stdout (-p, --stdout, -qp), not into
    its first file? (-L takes the rest of its word, or the next word.)"""
    skip = False
    out = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--":
            break
        if a in _MERGE_FILE_VALUES:
            skip = True
        elif a.startswith("--"):
            name = a.partition("=")[0]
            # the last of --stdout / --no-stdout decides (git takes any unique prefix)
            if len(name) >= 3 and "--stdout".startswith(name):
                out = True
            elif len(name) >= 6 and "--no-stdout".startswith(name):
                out = False
        elif a.startswith("-") and a != "-":
            letters = a[1:].partition("L")[0]
            if "p" in letters:
                out = True
            skip = a.endswith("L") and "L" not in letters
    return out


def _without_no_stdout(args: Sequence[str]) -> list[str]:
    """merge-file's `args` without a `--no-stdout` (git takes any unique prefix) before
    the `--`: the last of -p / --no-stdout decides."""
    out: list[str] = []
    ended = False
    for a in args:
        ended = ended or a == "--"
        name = a.partition("=")[0]
        if not ended and len(name) >= 6 and "--no-stdout".startswith(name):
            continue
        out.append(a)
    return out


def _nested_git(cwd: str, f: GitFacts) -> str | None:
    """A `.git`, or a directory that is a git dir itself (a bare repository), between the
    effective cwd and the lane's root (not the root's own .git): git would use that
    repository, not the lane's."""
    d = cwd
    while _inside(d, f.lane_path) and d != f.lane_path:
        if f.exists(os.path.join(d, ".git")):
            return os.path.join(d, ".git")
        if _git_directory(d, f):
            return d
        d = os.path.dirname(d)
    return None


def _git_directory(d: str, f: GitFacts) -> bool:
    """Might git's discovery take D itself as a git dir (setup.c is_git_directory: a valid
    HEAD, refs/ in the common dir a `commondir` file may name, objects/ or
    GIT_OBJECT_DIRECTORY; safe.bareRepository is `all` by default)? Judged as shims/git
    gs_own judges it, by names alone: a HEAD, and refs or commondir."""
    return f.exists(os.path.join(d, "HEAD")) and (
        f.exists(os.path.join(d, "refs")) or f.exists(os.path.join(d, "commondir"))
    )


# -- path_outside_lane --------------------------------------------------------------------
def _clean(path: str, f: GitFacts, base: str | None = None) -> str:
    if not path:
        return ""
    return f.realpath(os.path.join(base or f.cwd, os.path.expanduser(path)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _paths(p: Parsed, env: Mapping[str, str], f: GitFacts) -> Refusal | None:
    cwd = f.cwd
    for d in p.chdirs:
        if d:
            cwd = _clean(d, f, cwd)
    lane_roots = (f.lane_path, f.lane_git_dir)
    checks: list[tuple[str, str, tuple[str, ...]]] = []
    gd_what, gd = _given_git_dir(p, env, f)
    wt = p.work_tree if p.work_tree is not None else env.get("GIT_WORK_TREE")
    if gd:
        checks.append((gd_what, gd, lane_roots))
    else:
        checks.append(("-C" if p.chdirs else "the working directory", cwd, lane_roots))
    if wt:
        checks.append(
            ("--work-tree" if p.work_tree is not None else "GIT_WORK_TREE", wt, (f.lane_path,))
        )
    if env.get("GIT_INDEX_FILE"):
        checks.append(("GIT_INDEX_FILE", env["GIT_INDEX_FILE"], lane_roots))
    if env.get("GIT_COMMON_DIR"):
        checks.append(("GIT_COMMON_DIR", env["GIT_COMMON_DIR"], (f.common,)))
    if env.get("GIT_OBJECT_DIRECTORY"):
        checks.append(
            (
                "GIT_OBJECT_DIRECTORY",
                env["GIT_OBJECT_DIRECTORY"],
                # the shared store, or the lane's private one (exec --sandbox: guard/objects.py)
                (os.path.join(f.common, "objects"), os.path.join(f.lane_git_dir, "objects")),
            )
        )
    if not gd:
        nested = _nested_git(cwd, f)
        if nested is not None:
            return Refusal(
                "path_outside_lane",
                f"{nested} makes git {p.cmd} work on another repository than lane "
                f"{f.lane}'s ({f.lane_path}); git may write only the lane's",
                next=[f"cd {_q(f.lane_path)} && " + _render(_drop_paths(p.globals), p.cmd, p.args)],
                details={"lane": f.lane, "what": ".git", "path": nested, "lane_path": f.lane_path},
            )
    if p.cmd in ("init", "clone"):
        target = _init_clone_dir(p.cmd, p.args)
        if p.cmd == "init" and (gd or target is None or f.exists(_clean(target, f, cwd))):
            where = _clean(gd or target or ".", f, cwd)
            return Refusal(
                "path_outside_lane",
                f"git init would initialise {where} again, a repository lane {f.lane} does "
                f"not own (in a lane, git init makes only a new directory inside it)",
                next=[f"git lane status {f.lane}"],
                details={"lane": f.lane, "what": "git init", "path": where},
            )
        if target is not None:
            checks.append((f"git {p.cmd}'s directory", target, (f.lane_path,)))
    out = _output_file(p.cmd or "", p.args)
    if out is not None:
        checks.append((f"git {p.cmd}'s output file", out, (f.lane_path,)))
    checks += [(what, raw, (f.lane_path,)) for what, raw in _written_paths(p)]
    dot_git = os.path.join(f.lane_path, ".git")  # the lane's link to its git dir
    for what, raw, roots in checks:
        real = raw if what in ("-C", "the working directory") else _clean(raw, f, cwd)
        if what == "GIT_COMMON_DIR":
            ok = real == f.common
        else:
            ok = any(_inside(real, r) for r in roots if r)
        own_git = what not in _WHERE_GIT_WORKS and _inside(real, dot_git)
        if not ok or own_git:
            args = list(p.args)
            if what == _MERGE_FILE_CURRENT:  # the merge to stdout: no file is written
                return Refusal(
                    "path_outside_lane",
                    f"{what} ({real}) is outside lane {f.lane} ({f.lane_path}); git "
                    "merge-file writes its result into it: print it instead (-p)",
                    # -p, and no --no-stdout (any prefix) that would take it back
                    next=[_render(p.globals, p.cmd, ["-p", *_without_no_stdout(args)])],
                    details={"lane": f.lane, "what": what, "path": real, "lane_path": f.lane_path},
                )
            if what not in _WHERE_GIT_WORKS:  # a path among the words: cd does not move it
                args = _into_lane(args, raw, _option_of(p, what), f, p.cmd or "") or []
            again = _render(_drop_paths(p.globals), p.cmd, args) if args else ""
            where = (
                f"is lane {f.lane}'s own .git (the link to its git dir)"
                if own_git
                else f"is outside lane {f.lane} ({f.lane_path})"
            )
            return Refusal(
                "path_outside_lane",
                f"{what} ({real}) {where}; git {p.cmd} may write only in the lane",
                next=[f"cd {_q(f.lane_path)} && {again}" if again else f"git lane status {f.lane}"],
                details={"lane": f.lane, "what": what, "path": real, "lane_path": f.lane_path},
            )
    return None


# what _paths judges of where git works (not a word of the command's own arguments)
_WHERE_GIT_WORKS = frozenset(
    {
        "-C",
        "the working directory",
        "--git-dir",
        "GIT_DIR",
        "--bare",
        "--work-tree",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
    }
)


def _option_of(p: Parsed, what: str) -> str | None:
    """The option whose value _paths judged as `what` (`-o`, `--index-output`, `--output`,
    as given), None for a name among the command's arguments (bundle create's file)."""
    head = f"git {p.cmd} "
    if what == f"git {p.cmd}'s output file":
        word = _output_word(p.cmd or "", p.args)
        if word is not None:
            a = p.args[word[0]]
            return a.partition("=")[0] if a.startswith("--") else "-o"
    if what.startswith(head + "-"):
        return what[len(head) :]
    return None


def _into_lane(
    args: Sequence[str], raw: str, opt: str | None, f: GitFacts, cmd: str = ""
) -> list[str] | None:
    """`args` with the word the parser took `raw` from (`--opt=RAW`, `--opt RAW`, `-oRAW`,
    `-qko RAW`; the name itself when `opt` is None) naming a fresh name in the lane's top
    instead: RAW's last component when nothing is there and it is no git name, else `out`,
    `out-1`... (a name in the lane may be a link to where RAW is; None: no such word)."""
    lane = f.lane_path
    base = os.path.basename(raw.rstrip("/"))
    names = [base] if _plain_name(base) else []
    names += ["out", *(f"out-{n}" for n in range(1, 100))]
    name = next((n for n in names if not f.exists(os.path.join(lane, n))), None)
    if name is None:
        return None
    to = os.path.join(lane, name) + ("/" if raw.endswith("/") else "")
    out = list(args)
    for i, w in enumerate(out):
        if opt is None:
            if w == raw:
                out[i] = to
                return out
        elif opt.startswith("--"):
            if w == f"{opt}={raw}":
                out[i] = f"{opt}={to}"
                return out
            if w == opt and i + 1 < len(out) and out[i + 1] == raw:
                out[i + 1] = to
                return out
        else:
            letter = opt[1:]
            g = _short_value(out, i, _SHORT_VALUES.get(cmd, "") + letter, letter)
            if g is not None and g[1] == raw:
                if g[2] == 1:
                    out[i] = g[0] + letter + to
                else:
                    out[i + 1] = to
                return out
    return None


def _plain_name(name: str) -> bool:
    """A name _into_lane may give git to write in the lane's top: printable ASCII, no `:`,
    and no git name (`.git` in any case, NTFS's `.git.` / `git~1`: guard.git.unsafe_entry_name)."""
    if not name or name in (".", "..") or not name.isascii() or not name.isprintable():
        return False
    low = name.lower()
    return ":" not in low and low.rstrip(". ") not in (".git", "git~1")


_INIT_CLONE_VALUES = (
    "--template",
    "--separate-git-dir",
    "-b",
    "--initial-branch",
    "--object-format",
    "-o",
    "--origin",
    "--branch",
    "-u",
    "--upload-pack",
    "--reference",
    "--reference-if-able",
    "-c",
    "--config",
    "--depth",
    "--shallow-since",
    "--shallow-exclude",
    "-j",
    "--jobs",
    "--server-option",
    "--filter",
    "--bundle-uri",
)


def _init_clone_dir(cmd: str, args: Sequence[str]) -> str | None:
    pos = _positional(args, _INIT_CLONE_VALUES)
    if cmd == "init":
        return pos[0] if pos else "."
    if len(pos) >= 2:
        return pos[1]
    if pos:
        base = pos[0].rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return base.removesuffix(".git") or "."
    return None


def _drop_words(
    words: Sequence[str], valued: Collection[str], drop: Callable[[str], bool]
) -> list[str]:
    """`words` without each in `valued` and the word after it (its value), and without
    each word `drop` names (an option with its value joined, or one that takes none)."""
    out: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in valued:
            skip = True
        elif not drop(w):
            out.append(w)
    return out


def _drop_paths(globals_: Sequence[str]) -> list[str]:
    """The global options without those that name a directory (`--bare` names the cwd
    as the git dir)."""
    return _drop_words(
        globals_,
        ("-C", "--git-dir", "--work-tree"),
        lambda w: (
            w.startswith(("--git-dir=", "--work-tree="))
            or (w.startswith("-C") and len(w) > 2)
            or w == "--bare"
        ),
    )


# -- stash_shared -----------------------------------------------------------------------
def _stash(p: Parsed, f: GitFacts) -> Refusal | None:
    if p.cmd != "stash":
        return None
    sub = p.args[0] if p.args and not p.args[0].startswith("-") else "push"
    if sub in ("apply", "create", "list", "show"):
        return None
    details = {"lane": f.lane, "stash": sub}
    if sub in ("push", "save"):
        return Refusal(
            "stash_shared",
            f"git stash {sub} writes refs/stash, which every worktree of the repository "
            f"shares (another lane's pop could take lane {f.lane}'s change); keep the work "
            "in a commit on the lane instead",
            next=["git add -A", "git commit -m WIP"],
            alternatives=["git commit --amend  # fold it into the last commit later"],
            details=details,
        )
    rest = [a for a in p.args[1:] if not a.startswith("-")]
    entry = rest[0] if rest else "stash@{0}"
    nxt = [f"git stash apply {_q(entry)}"] if sub in ("pop", "branch") else ["git stash list"]
    if sub in ("pop", "branch") and not f.is_rev(entry):
        nxt = ["git add -A", "git commit -m WIP"]  # no such entry: nothing to apply
    return Refusal(
        "stash_shared",
        f"git stash {sub} changes refs/stash, which every worktree shares (its entries may be "
        f"other lanes' work); lane {f.lane} may apply an entry, not remove it",
        next=nxt,
        details=details,
    )


# -- main_mutation_refused ----------------------------------------------------------------
def _own_ref(name: str, f: GitFacts) -> bool:
    return name in (f.branch_ref, f.branch) or name.startswith("refs/worktree/")


def _land_next(f: GitFacts) -> list[str]:
    return [f"git lane land {f.lane}"] if f.worker_land else [f"git lane status {f.lane}"]


def _main_refusal(
    f: GitFacts, what: str, nxt: list[str], alternatives: Sequence[str] = (), **details: object
) -> Refusal:
    return Refusal(
        "main_mutation_refused",
        what,
        next=nxt,
        alternatives=alternatives,
        details={"lane": f.lane, **details},
    )


def _positional(args: Sequence[str], with_value: Sequence[str] = ()) -> list[str]:
    """The non-option words, and every word after the `--` that ends the options (options
    in `with_value` eat the next word, a `--` too): parse-options reads the names after
    `--` as the same names (`symbolic-ref -- REF TARGET`, `fetch -- REMOTE SPEC`, `bundle
    create -- FILE`), only a word starting with `-` can no longer be an option there."""
    out: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "--":
            return [*out, *args[i + 1 :]]
        if a in with_value or _group_takes_next(a, with_value):
            skip = True
            continue
        if a.startswith("-") and a != "-":
            continue
        out.append(a)
    return out


def _group_takes_next(word: str, with_value: Sequence[str]) -> bool:
    """A group of short flags whose first value-taking letter (of `with_value`'s short
    options) ends it takes the next word: `update-ref -dm MSG REF` is -d -m MSG."""
    letters = "".join(o[1] for o in with_value if len(o) == 2 and o[0] == "-" and o[1] != "-")
    if not letters or not word.startswith("-") or word.startswith("--") or len(word) < 3:
        return False
    at = next((j for j, ch in enumerate(word[1:], start=1) if ch in letters), None)
    return at == len(word) - 1


def _gc_next(f: GitFacts) -> str:
    """What packs the lane's objects without pruning: git gc, but in the sandbox, where
    gc's lock (gc.pid in the common dir) cannot be taken, `git repack -d` (the lane's own
    store: exec's GIT_OBJECT_DIRECTORY)."""
    return "git repack -d" if f.sandboxed else "git gc"


def _refs(p: Parsed, f: GitFacts) -> Refusal | None:
    cmd, args = p.cmd or "", p.args
    head_ok = f.head == f.branch_ref
    if cmd in ("switch", "checkout"):
        return _switch(cmd, args, f)
    if cmd == "push":
        return _main_refusal(
            f,
            f"git push writes refs (here or in a remote) that lane {f.lane} may not; "
            "a lane's work reaches main only through git lane land",
            _land_next(f),
            argv=["push", *args],
        )
    if cmd == "branch":
        return _branch_write(args, f)
    if cmd == "tag":
        return _main_refusal(
            f,
            f"git tag writes refs/tags, which every worktree shares; lane {f.lane} writes "
            "only its own branch (and refs/worktree/*)",
            _private_ref_next("tags/", _tag_name(args), f),
            argv=["tag", *args],
        )
    if cmd == "update-ref":
        return _update_ref(args, f, head_ok)
    if cmd == "symbolic-ref":
        pos = _positional(args, ("-m",))
        if any(a in ("-d", "--delete") for a in args) or (
            len(pos) >= 2 and (pos[0] != "HEAD" or pos[1] != f.branch_ref)
        ):
            return _main_refusal(
                f,
                f"git symbolic-ref {' '.join(args)} would point a ref elsewhere than lane/{f.lane}",
                [f"git switch {f.branch}"] if not head_ok else [f"git lane status {f.lane}"],
                argv=["symbolic-ref", *args],
            )
        return None
    if cmd == "reflog":
        return _reflog(args, f)
    if cmd == "fetch" or cmd == "pull":
        r = _fetch(cmd, args, f)
        if r is not None or cmd == "fetch":
            return r
    if cmd == "fast-import":
        return _main_refusal(
            f,
            f"git fast-import writes whatever refs its stream names; lane {f.lane} writes "
            f"only {f.branch}",
            [f"git lane status {f.lane}"],
            argv=[cmd, *args],
        )
    if cmd in ("replace", "notes", "filter-branch"):
        return _main_refusal(
            f,
            f"git {cmd} rewrites what commits mean for every worktree (refs/replace, "
            f"refs/notes, or branches); lane {f.lane} may not",
            [f"git lane status {f.lane}"],
            argv=[cmd, *args],
        )
    if cmd == "worktree":
        return _main_refusal(
            f,
            f"git worktree {_first(args) or ''} changes the repository's worktrees; lanes are "
            "made and removed by git lane create / git lane release, by the owner",
            [f"git lane status {f.lane}"],
            argv=["worktree", *args],
        )
    if cmd == "gc" and any(
        a.startswith("--prune") and a not in ("--prune", "--no-prune") for a in args
    ):
        return _main_refusal(
            f,
            "git gc --prune=now could delete objects other lanes are writing this moment",
            [_gc_next(f)],
            argv=["gc", *args],
        )
    if cmd == "prune" and not any(a in ("-n", "--dry-run") for a in args):
        return _main_refusal(
            f,
            "git prune could delete objects other lanes are writing this moment",
            [_gc_next(f)],
            argv=["prune", *args],
        )
    if cmd in ("rebase", "pull"):
        refusal = _instruction_format_config(p, f)
        if refusal is not None:
            return refusal
    if cmd in COMMIT_LIKE:
        return _commit_like(cmd, args, f, head_ok)
    return None


def _instruction_format_config(p: Parsed, f: GitFacts) -> Refusal | None:
    """A rebase (interactive or not; pull --rebase) starting while the configuration git
    reads has a rebase.instructionFormat that can make a todo command of a message line;
    a -c of a one-line format (judged by _transient_config) is what git uses instead."""
    if any(a in _REBASE_GOING for a in p.args) or any(
        kv.partition("=")[0].strip().lower() == INSTRUCTION_FORMAT for kv in p.configs
    ):
        return None
    value = f.config_value("rebase.instructionFormat")
    if value is None or not instruction_format_unsafe(value):
        return None
    return Refusal(
        "unsafe_config",
        f"rebase.instructionFormat is {value!r} in the configuration git reads here: git "
        f"{p.cmd} would write each commit's text into the todo list, where a message line "
        "such as `exec PROG` is a command git runs past every shim; run it with a one-line "
        "format",
        next=[_render(["-c", "rebase.instructionFormat=%s", *p.globals], p.cmd, p.args)],
        details={"lane": f.lane, "key": "rebase.instructionFormat", "setting": value},
    )


# tag's options that take the next word (git 2.39; --contains/--merged... only list)
_TAG_NEXT_VALUE = (*_TAKES_VALUE["tag"], "--sort", "--format", "--points-at")


def _tag_name(args: Sequence[str]) -> str | None:
    """The tag `git tag ARGS` writes (not the value of -m MSG, -F FILE, -u KEY, -fm MSG)."""
    pos = _positional(args, _TAG_NEXT_VALUE)
    return pos[0] if pos else None


def _first(args: Sequence[str]) -> str | None:
    pos = _positional(args)
    return pos[0] if pos else None


def _switch(cmd: str, args: Sequence[str], f: GitFacts) -> Refusal | None:
    creates = ("-b", "-B", "-c", "-C", "--orphan", "--create", "--force-create")
    value_opts = (*creates, "--conflict", "--pathspec-from-file")
    if cmd == "checkout" and "--" in args:
        before = _positional(args[: list(args).index("--")], value_opts)
        if not any(a in creates or a == "--detach" for a in args):
            return None  # checkout [TREE-ISH] -- PATHS: restores files
        del before
    target: str | None = None
    why = None
    letters = "bB" if cmd == "checkout" else "cC"  # the short options that create a branch
    for i, a in enumerate(args):
        # in a group of short flags (-qb NEW, -fBNEW) too: the rest of the word, or the next
        group = next(
            (g for c in letters if (g := _short_value(args, i, letters, c)) is not None), None
        )
        if group is not None and a != "--" and not a.startswith("--"):
            target, why = group[1] or "a branch with no name", "create and check out"
            break
        if a in creates or a.startswith(("--orphan=", "--create=", "--force-create=")):
            new = args[i + 1] if "=" not in a and i + 1 < len(args) else a.partition("=")[2]
            target, why = new or "a branch with no name", "create and check out"
            break
        if a in ("--detach", "-d") and (cmd == "switch" or a == "--detach"):
            target, why = "a detached HEAD", "detach to"
            break
    if target is None:
        pos = _positional(args, value_opts)
        if not pos:
            return None  # `git checkout` alone, `-p`: nothing moves
        want = pos[0]
        if want in (f.branch, f.branch_ref) or (want == "HEAD" and f.head == f.branch_ref):
            return None  # stays on the lane branch
        if cmd == "checkout" and len(pos) > 1:
            return None  # checkout TREE-ISH PATHS: restores files from it
        if cmd == "checkout" and want != "-" and not f.is_rev(want):
            guess = None if "--no-guess" in args else f.remote_branch(want)
            if guess is None:
                return None  # checkout FILE: restores a file
            return _main_refusal(
                f,
                f"git checkout {want} would create branch {want} from {guess} (git's guess: "
                f"there is no branch {want}, a remote-tracking one is) and switch lane "
                f"{f.lane} off {f.branch}; lane {f.lane} works on {f.branch} only",
                [f"git log {_q(guess)}"],
                alternatives=[f"git checkout -- {_q(want)}"],
                argv=[cmd, *args],
                target=want,
            )
        target, why = want, "switch to"
    main_ish = target in (f.main, f"refs/heads/{f.main}")
    nxt = [f"git switch {f.branch}"] if f.head != f.branch_ref else _land_next(f)
    return _main_refusal(
        f,
        f"git {cmd} would {why} {target}; lane {f.lane} works on {f.branch} only"
        + (" (main moves only by git lane land)" if main_ish else ""),
        nxt,
        alternatives=[f"git log {_q(target)}"] if why == "switch to" and target != "-" else [],
        argv=[cmd, *args],
        target=target,
    )


def _branch_write(args: Sequence[str], f: GitFacts) -> Refusal | None:
    """`git branch` forms that write a ref: create NAME [START], -f, -d/-D NAMES,
    -m/-M/-c/-C [OLD] NEW. Upstream and description settings write config only."""
    pos = _branch_positional(args)
    long_names = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    short = set("".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--")))
    renames = bool(short & set("mMcC") or long_names & {"--move", "--copy"})
    deletes = bool(short & set("dD") or "--delete" in long_names)
    config_only = long_names & {"--set-upstream-to", "--unset-upstream", "--edit-description"}
    if (config_only or "u" in short) and not (renames or deletes):
        return None
    if deletes:
        written = pos
        verb = "delete"
    elif renames:
        written = pos if len(pos) >= 2 else [f.branch, *pos]  # the old name, and the new
        verb = "rename or copy"
    else:
        written = pos[:1]  # NAME [START-POINT]
        verb = "create or move"
    own = (f.branch, f.branch_ref)
    if not written or (verb == "create or move" and written[0] in own):
        return None  # branch -f lane/KEY REV: like reset, on its own branch
    target = next((x for x in written if x not in own), written[0])
    return _main_refusal(
        f,
        f"git branch would {verb} {target}: branches are shared by every worktree and "
        f"lane {f.lane} writes only {f.branch} (a private ref may go under refs/worktree/)",
        _private_ref_next("", target if verb == "create or move" else None, f),
        argv=["branch", *args],
        target=target,
    )


# git branch's options that take the next word (git 2.39; -t/--track[=direct|inherit] takes
# none, -u takes the rest of its word or the next)
_BRANCH_NEXT_VALUE = (
    "--set-upstream-to",
    "--sort",
    "--format",
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
)


def _branch_positional(args: Sequence[str]) -> list[str]:
    """The names `git branch ARGS` is given (after `--` too), parsed as git does."""
    out: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
        elif a == "--":
            return [*out, *args[i + 1 :]]
        elif a.startswith("--"):
            skip = a in _BRANCH_NEXT_VALUE
        elif a.startswith("-") and a != "-":
            u = a.find("u", 1)  # -u UPSTREAM, -fu UPSTREAM (-uX: X is its value)
            skip = u == len(a) - 1
        else:
            out.append(a)
    return out


def _private_ref_next(prefix: str, name: str | None, f: GitFacts) -> list[str]:
    """A ref only this worktree sees (refs/worktree/...), in place of a shared one."""
    plain = (
        name is not None
        and all(c.isalnum() or c in "-_./" for c in name)
        and ".." not in name
        and not name.startswith(("refs/", "/", "-"))
    )
    if plain:
        return [f"git update-ref refs/worktree/{prefix}{name} HEAD"]
    return [f"git lane status {f.lane}"]


def _update_ref(args: Sequence[str], f: GitFacts, head_ok: bool) -> Refusal | None:
    if "--stdin" in args:
        return _main_refusal(
            f,
            "git update-ref --stdin: the shim cannot see which refs it would write; lane "
            f"{f.lane} writes only {f.branch_ref} and refs/worktree/*, one update-ref each",
            [f"git lane status {f.lane}"],
            argv=["update-ref", *args],
        )
    pos = _positional(args, ("-m",))
    ref = pos[0] if pos else ""
    no_deref = "--no-deref" in args
    if _own_ref(ref, f) or (ref == "HEAD" and head_ok and not no_deref and "-d" not in args):
        return None
    return _main_refusal(
        f,
        f"git update-ref would write {ref or '(no ref)'}; lane {f.lane} writes only "
        f"{f.branch_ref} and refs/worktree/*"
        + (
            " (main moves only by git lane land)" if ref in (f.main, f"refs/heads/{f.main}") else ""
        ),
        _land_next(f) if ref in (f.main, f"refs/heads/{f.main}") else [f"git lane status {f.lane}"],
        argv=["update-ref", *args],
        target=ref,
    )


def _reflog(args: Sequence[str], f: GitFacts) -> Refusal | None:
    sub = args[0] if args else ""
    if sub not in ("expire", "delete"):
        return None
    rest = args[1:]
    refs = _positional(rest, ("--expire", "--expire-unreachable"))
    others = [r for r in refs if r.split("@{", 1)[0] not in ("HEAD", f.branch, f.branch_ref)]
    if "--updateref" in rest or "--all" in rest or others or not refs:
        return _main_refusal(
            f,
            " ".join(["git reflog", sub, *rest, "would rewrite "])
            + ("refs through --updateref" if "--updateref" in rest else "other refs' reflogs")
            + f"; lane {f.lane} may change only {f.branch}'s",
            [f"git lane status {f.lane}"],
            argv=["reflog", *args],
        )
    return None


def _fetch(cmd: str, args: Sequence[str], f: GitFacts) -> Refusal | None:
    shallow = [
        a
        for a in args
        if a.split("=", 1)[0]
        in (
            "--depth",
            "--deepen",
            "--unshallow",
            "--shallow-since",
            "--shallow-exclude",
            "--update-shallow",
        )
    ]
    if shallow:
        return _main_refusal(
            f,
            f"git {cmd} {shallow[0]} changes the repository's shallow boundary, shared by "
            "every worktree (and main's history with it)",
            [_render((), cmd, _without_shallow(args))],
            argv=[cmd, *args],
        )
    pos = _positional(
        args,
        (
            "-o",
            "--server-option",
            "--upload-pack",
            "-j",
            "--jobs",
            "--refmap",
            "--negotiation-tip",
            "--filter",
            "--recurse-submodules-default",
            "--submodule-prefix",
            "--depth",
        ),
    )
    specs = list(pos[1:])
    for i, w in enumerate(pos[1:-1], start=1):
        if w == "tag":  # `git fetch REMOTE tag NAME`: refs/tags/NAME:refs/tags/NAME
            specs.append(f"refs/tags/{pos[i + 1]}:refs/tags/{pos[i + 1]}")
    for spec in specs:
        if _writes_branch(spec, f):
            dst = spec.lstrip("+").partition(":")[2]
            src = spec.partition(":")[0].lstrip("+")
            return _main_refusal(
                f,
                f"git {cmd} {spec} would write {dst}, shared by every worktree; lane {f.lane} "
                f"writes only {f.branch} and refs/worktree/* (fetch into refs/remotes/ instead)",
                [_fetch_next(pos[0], src, f)],
                argv=[cmd, *args],
            )
    maps = [v for _n, v in _option_values(args, ("--refmap",), cmd)]
    if len(pos) < 2 and not maps:
        configured = f.fetch_refspecs()  # git uses the remote's configured refspecs
        if configured is None:
            return _facts_unknown(f, "which refspecs the configured remotes fetch")
        maps = configured
    for spec in maps:
        if _writes_branch(spec, f):
            return _main_refusal(
                f,
                f"git {cmd} would fetch with the refspec {spec}, which writes refs outside "
                f"refs/remotes/; lane {f.lane} writes only {f.branch} (fetch into "
                "refs/remotes/ instead)",
                [f"git lane status {f.lane}"],
                argv=[cmd, *args],
                refspec=spec,
            )
    opts = args[: _options_end(args, cmd)]
    shorts = "".join(a[1:] for a in opts if a.startswith("-") and not a.startswith("--"))
    prune_tags = "--prune-tags" in opts or "P" in shorts
    if prune_tags or (("--tags" in opts or "t" in shorts) and ("--force" in opts or "f" in shorts)):
        word = "--prune-tags" if prune_tags else "--tags --force"
        keep = ("--prune-tags", "-P") if prune_tags else ("--force", "-f")
        return _main_refusal(
            f,
            f"git {cmd} {word} would {'delete' if prune_tags else 'overwrite'} tags, which "
            f"every worktree shares; lane {f.lane} writes only {f.branch}",
            [_render((), cmd, [a for a in args if a not in keep])]
            if not any(len(a) > 2 and a[0] == "-" != a[1] and set(a[1:]) & set("Pf") for a in opts)
            else [f"git lane status {f.lane}"],
            argv=[cmd, *args],
        )
    if "--update-head-ok" in args:
        return _main_refusal(
            f,
            f"git {cmd} --update-head-ok may write the checked-out branch",
            [f"git lane status {f.lane}"],
            argv=[cmd, *args],
        )
    return None


# fetch's (and pull's) shallow options; those taking a value take the next word too
_SHALLOW_VALUES = ("--depth", "--deepen", "--shallow-since", "--shallow-exclude")


def _without_shallow(args: Sequence[str]) -> list[str]:
    """`args` without fetch's shallow options and their values (`--depth 1`, `--depth=1`)."""
    return _drop_words(
        args,
        _SHALLOW_VALUES,
        lambda a: a.split("=", 1)[0] in (*_SHALLOW_VALUES, "--unshallow", "--update-shallow"),
    )


def _fetch_next(remote: str, src: str, f: GitFacts) -> str:
    """The fetch of SRC without the refused destination: into FETCH_HEAD, or (a pattern,
    which needs one) into the lane's own refs/worktree/fetched/."""
    if not src:
        return f"git lane status {f.lane}"
    if "*" in src:
        return f"git fetch {_q(remote)} {_q(f'+{src}:refs/worktree/fetched/*')}"
    return f"git fetch {_q(remote)} {_q(src)}"


# where a fetch may write: remote-tracking refs, and the lane's own refs/worktree/*
_FETCH_DESTINATIONS = ("refs/remotes/", "refs/worktree/")


def _writes_branch(spec: str, f: GitFacts) -> bool:
    """Does fetch refspec SPEC write a ref the lane may not: anything but its own branch,
    refs/worktree/* and refs/remotes/* (a branch, a tag, notes, refs/git-lane/*...)?"""
    if ":" not in spec:
        return False
    dst = spec.lstrip("+").partition(":")[2]
    if not dst or dst in (f.branch, f.branch_ref):
        return False
    return not dst.partition("*")[0].startswith(_FETCH_DESTINATIONS)


_REBASE_GOING = ("--continue", "--abort", "--skip", "--quit", "--edit-todo", "--show-current-patch")


def _commit_like(cmd: str, args: Sequence[str], f: GitFacts, head_ok: bool) -> Refusal | None:
    in_rebase = f.rebase_in_progress and f.head is None
    opts = args[: _options_end(args, cmd)]
    if cmd == "rebase" and (
        "--update-refs" in opts
        or (
            "--no-update-refs" not in opts
            and not any(a in _REBASE_GOING for a in opts)
            and f.update_refs_config()
        )
    ):
        why = "--update-refs" if "--update-refs" in opts else "(rebase.updateRefs is on)"
        return _main_refusal(
            f,
            f"git rebase {why} would also rewrite every other branch in the rebased "
            f"range that is checked out nowhere; lane {f.lane} rewrites only {f.branch}",
            [_render((), cmd, ["--no-update-refs", *(a for a in args if a != "--update-refs")])],
            argv=[cmd, *args],
        )
    if cmd == "rebase":
        if any(
            a
            in ("--continue", "--abort", "--skip", "--quit", "--edit-todo", "--show-current-patch")
            for a in args
        ):
            return None
        pos = _positional(args, _REBASE_VALUED)
        if len(pos) >= 2 and pos[1] not in (f.branch, f.branch_ref):
            return _main_refusal(
                f,
                f"git rebase {pos[0]} {pos[1]} would check out and rewrite {pos[1]}; lane "
                f"{f.lane} rebases only {f.branch}",
                [f"git rebase {_q(pos[0])}"] if head_ok else [f"git switch {f.branch}"],
                argv=[cmd, *args],
            )
    if cmd == "reset" and not _reset_moves_head(args):
        return None  # reset [-q] [TREE-ISH] -- PATHS only changes the index
    if head_ok or (in_rebase and cmd in ("commit", "reset")):
        return None
    return _main_refusal(
        f,
        f"git {cmd} would write {f.head.removeprefix('refs/heads/') if f.head else 'a detached HEAD'}, "
        f"which is checked out in lane {f.lane} instead of {f.branch}",
        [f"git switch {f.branch}"],
        argv=[cmd, *args],
        head=f.head,
    )


# rebase's options whose value is the next word (git 2.39's builtin/rebase.c); -S/--gpg-sign
# and -r/--rebase-merges take theirs only joined (an optional value), never the next word
_REBASE_VALUED = (
    "--onto",
    "-s",
    "--strategy",
    "-X",
    "--strategy-option",
    "-x",
    "--exec",
    "-C",
    "--whitespace",
    "--empty",
)


def _reset_moves_head(args: Sequence[str]) -> bool:
    """Does `git reset ARGS` move HEAD? Not with paths after its `--` (nor -p): those
    change the index only; `git reset --hard REV --` names no path and moves HEAD."""
    end = _options_end(args, "reset")
    return not (end < len(args) - 1 or any(a in ("-p", "--patch") for a in args[:end]))


# -- sync_required ------------------------------------------------------------------------
def _stale(p: Parsed, f: GitFacts) -> Refusal | None:
    if not f.must_sync or p.cmd in SYNC_OK:
        return None
    if p.cmd == "rebase":
        if any(a in ("--continue", "--abort", "--skip", "--quit") for a in p.args):
            return None
        onto = None
        args = list(p.args)
        for i, a in enumerate(args):
            if a == "--onto" and i + 1 < len(args):
                onto = args[i + 1]
            elif a.startswith("--onto="):
                onto = a.partition("=")[2]
        pos = _positional(args, _REBASE_VALUED)
        if (onto or (pos[0] if pos else None)) in (f.main, f"refs/heads/{f.main}"):
            return None
    return Refusal(
        "sync_required",
        f"lane {f.lane} is behind main and the sync policy requires a sync before it writes "
        f"files again; git {p.cmd} would",
        next=[f"git lane sync {f.lane}"],
        details={"lane": f.lane, "argv": [p.cmd or "", *p.args]},
    )


# -- rendering ------------------------------------------------------------------------------
def _q(word: str) -> str:
    return shlex.quote(word)


def _render(globals_: Sequence[str], cmd: str | None, args: Sequence[str]) -> str:
    words = ["git", *globals_, *([cmd] if cmd else []), *args]
    return " ".join(_q(w) if i else w for i, w in enumerate(words))


def _without(p: Parsed, drop: tuple[str, ...]) -> str:
    """The command line without the global option `drop` names (("-c", "k=v"), ...)."""
    return _render(_globals_without(p, drop), p.cmd, p.args)


def _globals_without(p: Parsed, drop: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    g = list(p.globals)
    i = 0
    while i < len(g):
        w = g[i]
        if len(drop) == 2 and w == drop[0] and i + 1 < len(g) and g[i + 1] == drop[1]:
            i += 2
            continue
        if len(drop) == 2 and (w == drop[0] + drop[1] or w == f"{drop[0]}={drop[1]}"):
            i += 1
            continue
        if len(drop) == 1 and w.startswith(drop[0]):
            i += 1
            continue
        out.append(w)
        i += 1
    return out
