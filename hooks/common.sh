# shellcheck shell=sh disable=SC2034,SC2317,SC2329 # helpers: not every hook uses each one
# hooks/common.sh: the sh every git-lane hook shares, written once. Never run, and never
# sourced by an installed hook: `git lane install` (hookinstall.script_bytes, through
# hookcheck.render_hook) writes each hook with the text from the "common block" line
# below in place of its line
#   . "${0%/*}/common.sh" # git-lane: install puts hooks/common.sh here
# so a hook run costs no extra file. (Run from a source checkout, that line sources this
# file instead; a hook copied without it stops at the line, it does not run half-made.)
# Each decision here that Python makes too is written once per language and held equal by
# tests/test_shared_decisions.py: gl_main_name (guard.policy.choose_main), gl_cfg_file
# (guard.config.hook_view), gl_owner (guard.lock.read_owner), gl_epoch_read (guard.store
# Epoch) and gl_refuse (guard.errors.Refusal.line).
# ---- git-lane common block (hooks/common.sh, rendered in by git lane install) ------
# Failing closed: a hook that cannot establish a fact it needs (git does not answer, a
# file cannot be read) refuses what could touch main, with [hook_facts_unknown]; it never
# allows by default. Null object ids are recognised by being all zeros (40 of them, or 64
# in a sha256 repository), never by comparison with one fixed string.
gl_nl='
'

# The engine's bound on a config file (guard.config.CONFIG_MAX): the hooks read no more of
# one, nor of the other state files they read (each loop counts what it read).
gl_cfg_max=1048576

# gl_capped VARS FUNC ARGS...: FUNC ARGS run in a subshell that may use one second of CPU,
# then each variable VARS names set here to the value FUNC left it; returns FUNC's status,
# or 2 when the subshell was ended. sh reads a file a byte per read(2), and no builtin
# bounds one line: the counting loops stop a file of many lines at gl_cfg_max, but one
# huge line (red team 17 F3: a sparse 100 MiB file, ~30 s) is read whole before any count,
# and only the kernel stops that (SIGXCPU past the second). A fork, no exec: ~0.15 ms idle,
# ms under load, too much for the hot paths (a ref update's config reads, the pre-commit
# epoch read: docs/trust-boundary.md, Known limits); used where a land or a notice reads.
# Values hold no newline (each is read from one line).
gl_capped() {
	gl_cv=$1
	shift
	{ gl_co=$(
		# shellcheck disable=SC3045 # dash, bash, busybox sh have both; a sh without them reads on
		ulimit -c 0
		# shellcheck disable=SC3045
		ulimit -t 1
		"$@"
		gl_crc=$?
		for gl_v in $gl_cv; do eval "printf '%s\n' \"\$$gl_v\""; done
		echo "$gl_crc"
	); } 2>/dev/null || return 2
	for gl_v in $gl_cv; do
		case $gl_co in *"$gl_nl"*) ;; *) return 2 ;; esac
		eval "$gl_v=\${gl_co%%\"\$gl_nl\"*}"
		gl_co=${gl_co#*"$gl_nl"}
	done
	case $gl_co in '' | *[!0-9]*) return 2 ;; esac
	return "$gl_co"
}

# gl_zero OID: is OID a null id (all zeros, whatever its length)?
gl_zero() {
	case $1 in '' | *[!0]*) return 1 ;; esac
}

# gl_context: gd = this worktree's git dir, common = the shared git dir, state = ours.
# From what git hands a hook: GIT_DIR (set in linked worktrees and bare repositories),
# else the .git directory of the worktree root the hook runs in; only then is git asked
# (a `.git` file: git reads all of it, and a NUL there ends the name for git, not for sh).
# A `commondir` is read here only as git writes it, the one line `../..`; any other
# (a second line is part of the name to git, a NUL ends it, a CR is cut) git resolves.
# Returns 1 when it cannot tell.
gl_context() {
	gd=${GIT_DIR:-}
	if [ -z "$gd" ]; then
		if [ -d .git ] && [ ! -L .git ]; then
			gd=.git
		else
			gl_git_path --git-dir || return 1
			gd=$gl_c
		fi
	fi
	[ -n "$gd" ] && [ -f "$gd/HEAD" ] || return 1
	common=${GIT_COMMON_DIR:-}
	if [ -z "$common" ]; then
		common=$gd
		if [ -e "$gd/commondir" ] || [ -L "$gd/commondir" ]; then
			gl_c='' gl_x=''
			if { IFS= read -r gl_c && ! IFS= read -r gl_x && [ -z "$gl_x" ]; } 2>/dev/null <"$gd/commondir" &&
				[ "$gl_c" = ../.. ]; then
				common=$gd/../..
			else
				gl_git_path --git-common-dir || return 1
				common=$gl_c
			fi
		fi
	fi
	[ -d "$common/refs" ] || return 1
	state=$common/git-lane
}

# gl_git_path OPTION: gl_c = git's `rev-parse OPTION` (a path), whole: a name that ends
# in a newline keeps it. Returns 1 when git gives none.
gl_git_path() {
	gl_c=$(git rev-parse "$1" 2>/dev/null && echo .) || return 1
	gl_c=${gl_c%.}
	gl_c=${gl_c%"$gl_nl"}
	[ -n "$gl_c" ]
}

# gl_symref FILE: gl_h = the ref FILE names as git reads a symbolic ref (`ref:`, blanks,
# the name, trailing blanks cut, over the whole file), '' when it is no symbolic ref (an
# object name). Returns 1 when FILE cannot be read, or is empty, or names no ref on one
# line (git takes a second line as part of the name, which no ref name can hold).
gl_symref() {
	gl_h='' gl_r='' gl_l=''
	{
		IFS= read -r gl_h || [ -n "$gl_h" ] || return 1
		while IFS= read -r gl_l || [ -n "$gl_l" ]; do
			gl_r=$gl_r$gl_l
			gl_l=
		done
	} 2>/dev/null <"$1" || return 1
	case $gl_h in
	ref:*) ;;
	*)
		gl_h=
		return 0
		;;
	esac
	gl_h=${gl_h#ref:}
	gl_h=${gl_h#"${gl_h%%[![:space:]]*}"}
	gl_h=${gl_h%"${gl_h##*[![:space:]]}"}
	case $gl_r in *[![:space:]]*) return 1 ;; esac
	[ -n "$gl_h" ]
}

# gl_linkref TEXT: does git take a symbolic link whose text is TEXT for a symbolic ref to
# TEXT? Only `refs/...` that check_refname_format takes (refs/files-backend.c
# read_ref_internal), the form `core.preferSymlinkRefs` writes; any other link git reads
# through, as a plain file wherever it leads. guard.repo.symlink_ref is the Python copy.
gl_linkref() {
	case $1 in refs/?*) ;; *) return 1 ;; esac
	case $1 in
	*[[:space:][:cntrl:]~^:?*\[\\]* | *..* | *@\{* | *//* | */.* | *.lock | *.lock/* | */ | *.) return 1 ;;
	esac
}

# gl_framework HOOK: one verdict per hook run under the pre-commit framework. Behind its
# script (`pre-commit install` and `git lane install`, either order) this hook is
# HOOK.legacy: the framework's hook-impl runs it (PRE_COMMIT_RUNNING_LEGACY=1), then the
# git-lane-* hook ids of .pre-commit-config.yaml (PRE_COMMIT=1), the same checks again,
# and each refusal would print twice. The legacy run records its parent, hook-impl, as
# the empty directory $gd/gitlane-framework-HOOK-PPID (a refusal adds ...-PPID-refused,
# gl_fw_refused); a hook-id run whose parent is that very process consumes the record and
# returns 0 (gl_fw_verdict = the legacy run's: '' passed, refused) instead of checking
# again. Anything else (no record, another parent: `pre-commit run`, the framework alone)
# returns 1: check. Names, never contents: in a lane $gd is the lane's to write, and
# mkdir/rmdir follow no link a lane put at the name (a write through one would land in
# the file it names); a name the lane made itself gains it nothing the hook-id run's
# own check would not give it.
gl_fw_rec=
gl_on_refuse= # (a hook sets it after this block; never the caller's environment)
gl_framework() {
	gl_fw=$gd/gitlane-framework-$1-$PPID
	if [ "${PRE_COMMIT_RUNNING_LEGACY:-}" = 1 ]; then
		# the records of earlier runs (a config with no git-lane hook id never consumes one)
		rmdir "$gd/gitlane-framework-$1-"* 2>/dev/null
		mkdir "$gl_fw" 2>/dev/null && gl_fw_rec=$gl_fw
		return 1
	fi
	[ "${PRE_COMMIT:-}" = 1 ] || return 1
	gl_fw_verdict=
	[ -d "$gl_fw" ] && [ ! -L "$gl_fw" ] && gl_fw_verdict=passed
	[ -n "$gl_fw_verdict" ] && { [ -e "$gl_fw-refused" ] || [ -L "$gl_fw-refused" ]; } && gl_fw_verdict=refused
	set -- "$gd/gitlane-framework-$1-"*
	[ -e "$1" ] || [ -L "$1" ] || return 1 # no record at all: nothing to consume
	rmdir "$@" 2>/dev/null                 # this run's, and any other run's, consumed
	[ -n "$gl_fw_verdict" ] || return 1
	[ "$gl_fw_verdict" = refused ] || gl_fw_verdict=
	return 0
}

# gl_fw_refused: mark gl_framework's record (if this run left one): the run refused.
gl_fw_refused() {
	[ -z "$gl_fw_rec" ] || mkdir "$gl_fw_rec-refused" 2>/dev/null || :
}

# gl_ml_closes TEXT: does TEXT, inside a multi-line string opened by $gl_ml, close it?
# A literal one (''') at its first '''; a basic one (""") at the first """ no backslash
# escapes: there a backslash takes the next character with it (TOML: `\"""` is a quote
# and two more of the string, `\\"""` a backslash and the end).
gl_ml_closes() {
	case $gl_ml in "'''") case $1 in *"'''"*) return 0 ;; *) return 1 ;; esac ;; esac
	gl_r=$1
	while :; do
		case $gl_r in *'"""'*) ;; *) return 1 ;; esac
		gl_b=${gl_r%%\\*} gl_q=${gl_r%%'"""'*}
		[ "${#gl_q}" -lt "${#gl_b}" ] && return 0
		gl_r=${gl_r#"$gl_b"?}
		gl_r=${gl_r#?}
	done
}

# gl_cfg_file FILE: read the keys the hooks need from flat TOML (no tables, no Python).
# No FILE: nothing configured. A FILE that is there but cannot be read: returns 1; so
# does one with a line it cannot read as a blank, a comment, a [table], `key = value`
# (a bare key) or an element of a multi-line array of strings: what else the file says
# (a line git's trace appended: `... 'x` then `enabled = "false"`) it does not know; and
# so does one larger than the engine reads (gl_cfg_max), stopped there.
gl_cfg_file() {
	[ -e "$1" ] || return 0
	[ -f "$1" ] && [ -r "$1" ] || return 1
	gl_arr='' gl_ml='' gl_n=0
	while IFS= read -r gl_l || [ -n "$gl_l" ]; do
		gl_n=$((gl_n + ${#gl_l} + 1))
		[ "$gl_n" -le "$gl_cfg_max" ] || return 1
		gl_l=${gl_l#"${gl_l%%[![:space:]]*}"}
		if [ -n "$gl_ml" ]; then # inside a multi-line string: up to its closing line
			gl_ml_closes "$gl_l" && gl_ml=
			continue
		fi
		if [ -n "$gl_arr" ]; then
			gl_l=${gl_l%"${gl_l##*[![:space:]]}"}
			case $gl_l in
			'' | \#*) ;;
			']') gl_arr= ;;
			\"*\", | \'*\',) ;;
			*) return 1 ;;
			esac
			continue
		fi
		case $gl_l in
		'' | \#*) continue ;;
		\[*) return 0 ;;
		esac
		gl_k=${gl_l%%=*}
		[ "$gl_k" = "$gl_l" ] && return 1
		gl_k=${gl_k%"${gl_k##*[![:space:]]}"}
		case $gl_k in '' | *[!A-Za-z0-9_.-]*) return 1 ;; esac
		gl_v=${gl_l#*=}
		gl_v=${gl_v#"${gl_v%%[![:space:]]*}"}
		case $gl_v in
		\"\"\"* | \'\'\'*)
			gl_ml=${gl_v%"${gl_v#???}"}
			gl_ml_closes "${gl_v#???}" && gl_ml=
			;;
		*) [ "${gl_v%"${gl_v##*[![:space:]]}"}" = '[' ] && gl_arr=1 && continue ;;
		esac
		case $gl_k in
		enabled | main_branch | sync_policy) ;;
		*) continue ;;
		esac
		case $gl_v in
		\"*) gl_v=${gl_v#\"} gl_v=${gl_v%%\"*} ;;
		\'*) gl_v=${gl_v#\'} gl_v=${gl_v%%\'*} ;;
		*) gl_v=${gl_v%%#*} gl_v=${gl_v%"${gl_v##*[![:space:]]}"} ;;
		esac
		case $gl_k in
		enabled) gl_enabled=$gl_v ;;
		main_branch)
			# guard.config's branch-name rule: a name git would not take as a branch
			# (HEAD, an option...) names no main to guard, so the hook does not know
			case $gl_v in
			HEAD | @ | -* | /* | refs/* | *. | */ | *.lock | .* | */.* | *.lock/* | \
				*[[:space:][:cntrl:]~^:?*\[\\]* | *..* | *@\{* | *//*) return 1 ;;
			esac
			gl_main_cfg=$gl_v
			;;
		sync_policy) gl_policy=$gl_v ;;
		esac
	done <"$1"
	[ -z "$gl_ml" ] # a multi-line string that never ends: what follows, it cannot know
}

# gl_config: user file, then the repository file (which wins). Returns 1 (gl_cfg_bad =
# the file) when one cannot be read: what it says, the hook does not know.
gl_config() {
	gl_enabled=true gl_main_cfg='' gl_policy=on_land_mandatory
	for gl_cfg_bad in "${XDG_CONFIG_HOME:-${HOME:-/nonexistent}/.config}/git-lane/config.toml" \
		"$state/config.toml"; do
		gl_cfg_file "$gl_cfg_bad" || return 1
	done
	gl_cfg_bad=
}

# gl_ref REF: gl_val = REF's value as git reads it ('' when REF does not exist). git must
# answer: asked for its git dir too, it replies even to "no such ref", so a git that is
# missing, broken or fake (no output) returns 1 here, and the caller refuses.
gl_ref() {
	gl_val=$(git rev-parse --git-dir --verify -q "$1" 2>/dev/null)
	gl_rc=$?
	case $gl_val in
	'') return 1 ;;
	*"$gl_nl"*) gl_val=${gl_val#*"$gl_nl"} ;;
	*) gl_val= ;;
	esac
	case $gl_rc:$gl_val in
	0:*[!0-9a-f]* | 0: | 1:?*) return 1 ;;
	0:* | 1:) return 0 ;;
	esac
	return 1
}

# gl_main_name: gl_main = the protected branch: the configured name, else main, else
# master; '' while the repository has none. The one sh copy of guard.policy.choose_main
# (and Repo.main_branch). main (then master) is there when git cannot resolve it but its
# loose file is: a dangling or looping symbolic main is still main, never "no main" nor
# "master, main being absent" (then its delete would pass as deleting nothing, or as a
# stray main's beside master, `git branch -m` would write main outside any transaction,
# and a symbolic ref no hook sees would hand main's protection to master). Returns 1
# (gl_main '') when git cannot say which of them exist.
gl_main_name() {
	gl_main=$gl_main_cfg
	[ -z "$gl_main" ] || return 0
	for gl_m in main master; do
		# a file or a link (preferSymlinkRefs); a directory is branches main/*, no main
		if [ -f "$common/refs/heads/$gl_m" ] || [ -L "$common/refs/heads/$gl_m" ]; then
			gl_main=$gl_m
			return 0
		fi
		gl_ref "refs/heads/$gl_m" || return 1
		if [ -n "$gl_val" ]; then
			gl_main=$gl_m
			return 0
		fi
	done
}

# gl_is_main BRANCH: is BRANCH (a name under refs/heads/) main? 0 yes, 1 no, 2 cannot
# tell. Asks git only when it could be (main, master or the configured name); then
# gl_main is set as above.
gl_is_main() {
	case $1 in
	'') return 1 ;;
	"$gl_main_cfg") ;;
	main | master) [ -z "$gl_main_cfg" ] || return 1 ;;
	*) return 1 ;;
	esac
	gl_main_name || return 2
	[ "$1" = "$gl_main" ]
}

# gl_lane: gl_key = the lane key of this worktree ('' outside lanes), from the marker
# file `git lane create` writes into the worktree's admin dir.
gl_lane() {
	gl_key=
	[ -f "$gd/gitlane-lane" ] && { IFS= read -r gl_key <"$gd/gitlane-lane" || :; }
	# the lane can write its admin dir: what is no lane key is never printed or logged;
	# a marker that is there but names nothing is no lane we know, never "not a lane"
	case $gl_key in '') [ -e "$gd/gitlane-lane" ] && gl_key='?' ;; *[!a-z0-9-]*) gl_key='?' ;; esac
}

# gl_owner FILE: the integration lock's owner record (key=value lines, guard.lock
# _write_owner; read_owner in Python): r_pid, r_ticks (start_ticks), r_tip, r_before
# (main_before). Returns 1 when there is no record to read, or one larger than any
# record (gl_cfg_max; one huge line: gl_capped).
gl_owner() {
	r_pid='' r_tip='' r_before='' r_ticks=''
	[ -f "$1" ] && [ -r "$1" ] || return 1
	gl_capped "r_pid r_ticks r_tip r_before" gl_owner_scan "$1" && return 0
	r_pid='' r_tip='' r_before='' r_ticks=''
	return 1
}
gl_owner_scan() {
	gl_n=0
	while IFS= read -r gl_l || [ -n "$gl_l" ]; do
		gl_n=$((gl_n + ${#gl_l} + 1))
		[ "$gl_n" -le "$gl_cfg_max" ] || return 1
		gl_k=${gl_l%%=*}
		[ "$gl_k" = "$gl_l" ] && continue
		gl_v=${gl_l#*=}
		case $gl_k in
		pid) r_pid=$gl_v ;;
		start_ticks) r_ticks=$gl_v ;;
		tip) r_tip=$gl_v ;;
		main_before) r_before=$gl_v ;;
		esac
	done <"$1"
	return 0
}

# gl_epoch_read FILE: gl_epoch = the land counter of epoch.json (guard.store Epoch, JSON
# with indent and sorted keys: "epoch" comes second, alone on its line); 0 when FILE is
# missing or says nothing readable in its first gl_cfg_max bytes (one huge line is read
# whole, then 0: off the commit's path, gl_capped stops it sooner).
gl_epoch_read() {
	gl_epoch=0
	[ -f "$1" ] || return 0
	gl_n=0
	while IFS= read -r gl_l; do
		gl_n=$((gl_n + ${#gl_l} + 1))
		[ "$gl_n" -le "$gl_cfg_max" ] || break
		case $gl_l in
		*'"epoch":'*) gl_epoch=${gl_l#*:} gl_epoch=${gl_epoch%,} gl_epoch=${gl_epoch# } ; break ;;
		esac
	done <"$1"
	# more digits than a land count has (guard.store EPOCH_MAX): corrupt, as in Python
	case $gl_epoch in '' | *[!0-9]* | ???????????*) gl_epoch=0 ;; esac
}

gl_jstr() { printf '%s' "$1" | tr -d '\000-\037' | sed 's/[\\"]/\\&/g'; }

# gl_refuse HOOK CODE WHAT NEXT EXTRA-JSON: the refusal line (guard.errors.Refusal.line:
# WHAT without trailing dots, NEXT or "nothing to run"), an audit event, exit 1.
gl_refuse() {
	gl_m=$3
	while :; do
		case $gl_m in *.) gl_m=${gl_m%.} ;; *) break ;; esac
	done
	printf 'git-lane: refused [%s]: %s. Next: %s\n' "$2" "$gl_m" "${4:-nothing to run}" >&2
	gl_fw_refused
	# what a hook must do before any refusal of it ends git (reference-transaction: put
	# back the reflog git set aside for the rename it refuses, gl_put_back)
	[ -z "${gl_on_refuse-}" ] || "$gl_on_refuse"
	# the log only when it is a plain file (or none yet): appending to a FIFO would hang,
	# through a symlink would write outside the state dir (the engine sets either aside)
	gl_log=$state/events.jsonl
	if [ -d "$state" ] && [ ! -L "$gl_log" ] && { [ -f "$gl_log" ] || [ ! -e "$gl_log" ]; }; then
		gl_lane
		gl_host=
		IFS= read -r gl_host 2>/dev/null </proc/sys/kernel/hostname || gl_host=$(uname -n)
		gl_lanej=null
		[ -n "$gl_key" ] && gl_lanej="\"$(gl_jstr "$gl_key")\""
		gl_when=$(date -u '+"%Y-%m-%dT%H:%M:%SZ" %s' 2>/dev/null) || gl_when=
		case $gl_when in '"'*'" '[0-9]*) ;; *) gl_when='null null' ;; esac # no date on PATH
		printf '{"code": "%s", "hook": "%s", "host": "%s", "kind": "refusal", "lane": %s, "message": "%s", "pid": %s, "source": "hook", "time": %s, "ts": %s%s}\n' \
			"$2" "$1" "$(gl_jstr "$gl_host")" "$gl_lanej" "$(gl_jstr "$gl_m")" "$$" "${gl_when% *}" "${gl_when#* }" "$5" \
			2>/dev/null >>"$gl_log" || :
	fi
	exit 1
}

# gl_blind HOOK WHAT: the hook cannot establish WHAT: refuse (never allow by default).
gl_blind() {
	gl_refuse "$1" hook_facts_unknown \
		"the $1 hook cannot tell $2, so it refuses rather than guess (PATH=$PATH)" \
		"git lane doctor" ", \"fact\": \"$(gl_jstr "$2")\""
}

# gl_python ARGS...: run guard.hookcheck with the Python that installed this hook, in
# isolated mode (-I): neither the current directory (a lane may hold a guard/ of its own)
# nor PYTHONPATH decides which guard runs; GITLANE_PYPATH, the directory install found it
# in, does.
gl_pymain='import sys; p = sys.argv.pop(1); sys.path[:0] = [p] if p else []; from guard.hookcheck import entry; entry()'
gl_python() {
	if [ -n "$GITLANE_PYTHON" ] && [ -x "$GITLANE_PYTHON" ]; then
		"$GITLANE_PYTHON" -I -c "$gl_pymain" "$GITLANE_PYPATH" "$@"
	elif command -v git-lane-hook >/dev/null 2>&1; then
		git-lane-hook "$@"
	else
		python3 -I -c "$gl_pymain" "${GITLANE_PYPATH-}" "$@"
	fi
}
# ---- end of common block --------------------------------------------------------------
