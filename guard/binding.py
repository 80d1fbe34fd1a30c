"""What `git lane exec` (and `git lane shellenv`) hands a lane-bound process, by name.

The one place these environment names are spelled in Python; the shims (shims/git, edit,
write) spell them once in sh. Standard library only: the shims' slow path imports this.

    GITLANE_LANE       the lane key (makes the process a worker)
    GITLANE_ROLE       "worker"
    GITLANE_REAL_GIT   absolute path of the real git, resolved when exec started (never a shim)
    GITLANE_SHIMS_DIR  the directory of our shims, first on PATH
    GITLANE_LANE_PATH  realpath of the lane's worktree
    GITLANE_COMMON     realpath of the repository's git common dir (state: <it>/git-lane)
    GITLANE_PYTHON     the interpreter that has this guard package (sys.executable at exec)
    GITLANE_PYPATH     the directory holding the guard package (for `python -I`)
    GITLANE_HOME       HOME when exec started ('' when unset)
    GITLANE_XDG_CONFIG_HOME  XDG_CONFIG_HOME when exec started ('' when unset)
    GITLANE_PATH       the PATH exec gave the process (shims first): another PATH may find
                       another `vi` or `less` for git to start (shimpolicy._search_path)
    GITLANE_PORT       the lane's port base
    GITLANE_PROGRAM_ENV  JSON {name: value} of the variables naming a program git runs
                       (EDITOR, GIT_ASKPASS, ...: PROGRAM_VARS below) set when exec
                       started (the owner's own: the shim lets those values pass)

Set by exec only (not by shellenv, which cannot supervise), so not in NAMES:

    GITLANE_LAND_SOCKET  the supervisor's land socket (guard/landsock.py): a bound
                         process's `git lane land` asks it to land the lane
    GITLANE_SANDBOX      "landlock-abi-N" when exec confined the process (unset otherwise)
    GITLANE_OBJECTS      the lane's private object store, also GIT_OBJECT_DIRECTORY, when
                         confined or under --own-objects (guard/objects.py): the engine's
                         git calls inside keep it
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

LANE = "GITLANE_LANE"
ROLE = "GITLANE_ROLE"
REAL_GIT = "GITLANE_REAL_GIT"
SHIMS_DIR = "GITLANE_SHIMS_DIR"
LANE_PATH = "GITLANE_LANE_PATH"
COMMON = "GITLANE_COMMON"
PYTHON = "GITLANE_PYTHON"
PYPATH = "GITLANE_PYPATH"
HOME_AT_EXEC = "GITLANE_HOME"
XDG_AT_EXEC = "GITLANE_XDG_CONFIG_HOME"
PATH_AT_EXEC = "GITLANE_PATH"
PORT = "GITLANE_PORT"
LAND_SOCKET = "GITLANE_LAND_SOCKET"
SANDBOX = "GITLANE_SANDBOX"  # set only when exec confined the process, so not in NAMES
OBJECTS = "GITLANE_OBJECTS"  # likewise: the lane's private object store (guard/objects.py)
PROGRAM_ENV = "GITLANE_PROGRAM_ENV"

# GIT_TRACE* values git takes as "off", "stderr" or an open file descriptor; anything else
# is a file (or socket) git appends its trace to, argv included (shimpolicy._process_env
# refuses it, git.base_env drops it from the engine's calls)
TRACE_NOT_A_FILE = ("", "0", "1", "2", "true", "false", "3", "4", "5", "6", "7", "8", "9")

EDITOR_ENV = (
    "VIMINIT", "EXINIT", "MYVIMRC", "VIMRUNTIME", "VIM", "GVIMINIT", "MYGVIMRC",
    "NVIM_APPNAME", "NVIM_LOG_FILE", "NVIM", "NVIM_LISTEN_ADDRESS",
    "LESSOPEN", "LESSCLOSE", "LESS", "LESSKEY", "LESSKEYIN", "LESSKEY_SYSTEM",
    "LESSKEYIN_SYSTEM", "LESSKEY_CONTENT", "LESSEDIT", "LESSSECURE_ALLOW", "LESSSECURE", "MORE",
    "MANPAGER", "MANOPT", "MANROFFOPT", "BROWSER",
    "SPELL", "NANORC", "EMACSLOADPATH", "EMACSDATA", "EMACSPATH", "EMACSNATIVELOADPATH",
    "GIT_MAN_VIEWER",
    # what man (man-db) reads to find pages or run its formatter and pager, and what the
    # groff it starts reads to run its programs (troff, grotty, preconv: GROFF_BIN_PATH
    # first, GROFF_COMMAND_PREFIX before each name, a font dir's DESC `postpro`) or load
    # macros; less's program for tags and the history file it writes
    "MANPATH", "MANROFFSEQ", "MANLESS", "MAN_DISABLE_SECCOMP", "GROFF_BIN_PATH",
    "GROFF_COMMAND_PREFIX", "GROFF_TMAC_PATH", "GROFF_FONT_PATH", "GROFF_TYPESETTER",
    "LESSGLOBALTAGS", "LESSHISTFILE",
    # what other programs git starts read to load code: gpg's home (gpg.conf's
    # agent-program), the directory of difftool/mergetool's shell code, the Perl of
    # git's Perl commands (add -p with add.interactive.useBuiltin=false, send-email...)
    "GNUPGHOME", "MERGE_TOOLS_DIR", "PERL5OPT", "PERL5LIB", "PERLLIB",
)  # fmt: skip
# the variables naming a program git runs past the shim (shimpolicy.program_env judges them)
PROGRAM_VARS = (
    "GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS",
    "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR",
    # git-difftool--helper evals the first as a command, runs the second as --tool would
    "GIT_DIFFTOOL_EXTCMD", "GIT_DIFF_TOOL",
    "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "EDITOR", "VISUAL", "GIT_PAGER", "PAGER",
    # what the "safe" editors and pagers (vi, vim, nvim, nano, emacs, less, more, man)
    # read from the environment to run a command or load code (VIMINIT's `:call
    # system()`, LESSOPEN's preprocessor, LESS's `+!cmd`...): only the owner's values pass
    *EDITOR_ENV,
)  # fmt: skip

NAMES = (
    LANE, ROLE, REAL_GIT, SHIMS_DIR, LANE_PATH, COMMON, PYTHON, PYPATH, HOME_AT_EXEC,
    XDG_AT_EXEC, PORT, PROGRAM_ENV, PATH_AT_EXEC,
)  # fmt: skip


@dataclass(frozen=True)
class Binding:
    """A bound process's view of its lane, as exec recorded it."""

    lane: str
    lane_path: str
    common: str
    real_git: str
    shims_dir: str
    home: str
    xdg_config_home: str

    @property
    def state(self) -> str:
        return os.path.join(self.common, "git-lane")


def from_env(env: Mapping[str, str]) -> Binding | None:
    """The binding in `env`, or None for an unbound process. A bound process whose binding
    is incomplete gets a Binding with empty fields: callers must refuse on those (fail
    closed), never treat the process as unbound."""
    lane = env.get(LANE) or ""
    if not lane:
        return None
    return Binding(
        lane=lane,
        lane_path=env.get(LANE_PATH, ""),
        common=env.get(COMMON, ""),
        real_git=env.get(REAL_GIT, ""),
        shims_dir=env.get(SHIMS_DIR, ""),
        home=env.get(HOME_AT_EXEC, ""),
        xdg_config_home=env.get(XDG_AT_EXEC, ""),
    )


def program_env_record(base: Mapping[str, str]) -> str:
    """PROGRAM_ENV for a process exec starts over `base`: the program variables set there
    (the owner's); a bound caller (a nested exec) hands on its own record, not what it set
    since."""
    if base.get(LANE):
        return base.get(PROGRAM_ENV) or "{}"
    return json.dumps({k: base[k] for k in PROGRAM_VARS if base.get(k)}, sort_keys=True)
