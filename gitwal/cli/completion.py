"""`git wal completion bash|zsh`: the shell script that completes `git wal`.

click's own script is built from the program name, and "git wal" holds a
space: it would register a completion for `git` itself. These scripts ask
`git-wal` the way click's do (``_GIT_WAL_COMPLETE``, ``COMP_WORDS``,
``COMP_CWORD``, set by the group in cli/__init__.py), and define the
function git's own completion calls for a subcommand: ``_git_wal`` (bash)
and ``_git-wal`` (zsh). So `git wal <TAB>` and `git-wal <TAB>` both work.
"""

from __future__ import annotations

import click

COMPLETE_VAR = "_GIT_WAL_COMPLETE"

BASH = r"""# bash completion for `git wal` and `git-wal` (gitwal).
# Load it in this shell:  source <(git wal completion bash)
# or for every new shell, save it as
#   ~/.local/share/bash-completion/completions/git-wal
# `git wal <TAB>` goes through git's own completion, which calls _git_wal.

# Ask git-wal for the completions of "$@" (the words after `wal`, the last
# being the one completed); each one gets the suffix $1.
__git_wal_ask() {
    local suffix=$1 line type value cmdline=git-wal word
    shift
    for word in "${@:1:$#-1}"; do
        cmdline+=" $(printf '%q' "$word")"
    done
    cmdline+=" $(printf '%q' "${@: -1}")"
    COMPREPLY=()
    while IFS= read -r line; do
        type=${line%%,*}
        value=${line#*,}
        case $type in
        plain) COMPREPLY+=("$value$suffix") ;;
        dir) COMPREPLY=(); compopt -o dirnames 2>/dev/null; return ;;
        file) COMPREPLY=(); compopt -o default 2>/dev/null; return ;;
        esac
    done < <(env COMP_WORDS="$cmdline" COMP_CWORD=$# __COMPLETE_VAR__=bash_complete \
             git-wal 2>/dev/null)
}

# Called by git's completion for `git wal ...` (it completes with -o nospace:
# a finished word carries its own space).
_git_wal() {
    local i=1 n=${cword:-$COMP_CWORD}
    local -a w
    if [[ -n ${words+set} ]]; then w=("${words[@]}"); else w=("${COMP_WORDS[@]}"); fi
    while (( i < n )) && [[ ${w[i]} != wal ]]; do (( i++ )); done
    (( i < n )) || return 0
    __git_wal_ask " " "${w[@]:i+1:n-i}"
}

# `git-wal ...` typed as a command of its own.
_git_wal_command() {
    __git_wal_ask "" "${COMP_WORDS[@]:1:COMP_CWORD}"
}

complete -o nosort -F _git_wal_command git-wal 2>/dev/null \
    || complete -F _git_wal_command git-wal
"""

ZSH = r"""#compdef git-wal
# zsh completion for `git wal` and `git-wal` (gitwal).
# Load it (after compinit):  source <(git wal completion zsh)
# or save it as _git-wal in a directory of $fpath.
# `git wal <TAB>` goes through zsh's git completion, which calls _git-wal.

_git-wal() {
    # words[1] is `wal` (under _git) or `git-wal`; CURRENT is the word completed.
    local -a response completions completions_with_descriptions
    local cmdline="git-wal ${(j: :)${(@q)words[2,CURRENT]}}"
    response=("${(@f)$(env COMP_WORDS="$cmdline" COMP_CWORD=$((CURRENT-1)) \
        __COMPLETE_VAR__=zsh_complete git-wal 2>/dev/null)}")
    local type key descr
    for type key descr in ${response}; do
        if [[ $type == plain ]]; then
            if [[ $descr == _ ]]; then
                completions+=("$key")
            else
                completions_with_descriptions+=("$key":"$descr")
            fi
        elif [[ $type == dir ]]; then
            _path_files -/
        elif [[ $type == file ]]; then
            _path_files -f
        fi
    done
    if [[ -n $completions_with_descriptions ]]; then
        _describe -V unsorted completions_with_descriptions -U
    fi
    if [[ -n $completions ]]; then
        compadd -U -V unsorted -a completions
    fi
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _git-wal "$@"
else
    compdef _git-wal git-wal
fi
"""

SCRIPTS = {"bash": BASH, "zsh": ZSH}


def script(shell: str) -> str:
    return SCRIPTS[shell].replace("__COMPLETE_VAR__", COMPLETE_VAR)


@click.command("completion")
@click.argument("shell", type=click.Choice(sorted(SCRIPTS)))
def completion(shell: str) -> None:
    """Print the script that completes `git wal` and `git-wal` in SHELL."""
    click.echo(script(shell), nl=False)
