# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion for sandboxctl(1)

__sandboxctl_sessions() {
        # the ids from "sandboxctl ls" (first column, header skipped): NODE_HEX or 16 hex digits
        # alone; quietly nothing on errors. No {n} in the regex: mawk has none.
        sandboxctl "${__sandboxctl_conn[@]}" ls 2>/dev/null |
                awk 'NR > 1 { hex = $1; sub(/^[a-z][a-z0-9]*_/, "", hex) }
                     NR > 1 && hex ~ /^[0-9a-f]+$/ && length(hex) == 16 && length($1) <= 49 { print $1 }'
}

__sandboxctl_images() {
        sandboxctl "${__sandboxctl_conn[@]}" image ls 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_sandboxctl() {
        local cur prev words cword
        _init_completion -n : || return

        local verbs="create ls show rm freeze thaw exec run attach shell signal cp port image health drain mcp"
        local opts_global="--help --version --url= --key= --key-file= --transport= --json --quiet"
        local -A opts_verb=(
                [create]="--memory-max= --cpu-quota= --tasks-max= --ttl= --exec-mode= --image="
                [ls]="--user="
                [rm]="--purge"
                [exec]="--cwd= --env= --timeout= --request-id= --stdin --tty"
                [run]="--cwd= --env= --timeout= --request-id= --stdin --user= --workspace= --rm --exec-mode= --image="
                [attach]="--offset= --tty"
                [shell]="--cwd= --env= --timeout= --request-id="
                [cp]="--recursive --progress --no-progress"
                [drain]="--cancel --status"
                [port]="--host"
                [mcp]="--user= --workspace= --max-output="
        )

        # connection options already given apply to the look-ups too
        local -a __sandboxctl_conn=()
        local i verb= nargs=0
        for ((i = 1; i < cword; i++)); do
                case ${words[i]} in
                --url=* | --key=* | --key-file=* | --transport=*) __sandboxctl_conn+=("${words[i]}") ;;
                -*) ;;
                *)
                        if [[ -z $verb ]]; then
                                verb=${words[i]}
                        else
                                ((nargs++))
                        fi
                        ;;
                esac
        done

        if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$opts_global ${opts_verb[$verb]}" -- "$cur"))
                [[ ${COMPREPLY[0]-} == *= ]] && compopt -o nospace
                return
        fi
        case $prev in
        --key-file) _filedir; return ;;
        --transport) COMPREPLY=($(compgen -W "dbus http" -- "$cur")); return ;;
        --exec-mode) COMPREPLY=($(compgen -W "unit session" -- "$cur")); return ;;
        --image) COMPREPLY=($(compgen -W "$(__sandboxctl_images)" -- "$cur")); return ;;
        --url | --key | --cwd | --env | --timeout | --request-id | --user | --workspace | --offset) return ;;
        esac

        if [[ -z $verb ]]; then
                COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
                return
        fi
        case $verb in
        show | rm | freeze | thaw | attach | signal | shell)
                if ((nargs == 0)) || [[ $verb == rm ]]; then
                        COMPREPLY=($(compgen -W "$(__sandboxctl_sessions)" -- "$cur"))
                elif [[ $verb == signal && $nargs -eq 2 ]]; then
                        COMPREPLY=($(compgen -W "SIGINT SIGTERM SIGKILL SIGHUP SIGUSR1 SIGUSR2" -- "$cur"))
                fi
                ;;
        exec)
                # the command runs in the sandbox: local command names mean nothing there
                ((nargs == 0)) && COMPREPLY=($(compgen -W "$(__sandboxctl_sessions)" -- "$cur"))
                ;;
        port)
                if ((nargs == 0)); then
                        COMPREPLY=($(compgen -W "expose ls rm" -- "$cur"))
                elif ((nargs == 1)); then
                        COMPREPLY=($(compgen -W "$(__sandboxctl_sessions)" -- "$cur"))
                fi
                ;;
        image)
                if ((nargs == 0)); then
                        COMPREPLY=($(compgen -W "ls show import rm" -- "$cur"))
                elif ((nargs == 1)) && [[ ${words[cword - 1]} == show || ${words[cword - 1]} == rm ]]; then
                        COMPREPLY=($(compgen -W "$(__sandboxctl_images)" -- "$cur"))
                elif ((nargs == 2)); then
                        _filedir
                fi
                ;;
        cp)
                local s
                _filedir
                for s in $(__sandboxctl_sessions); do
                        [[ $s: == "$cur"* ]] && COMPREPLY+=("$s:")
                done
                compopt -o nospace
                ;;
        esac
}

complete -F _sandboxctl sandboxctl
