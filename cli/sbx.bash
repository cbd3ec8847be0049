# sbx.bash - bash completion for the `sbx` command: commands, each command's options, the
# global options, profile names (from `sbx config check --json`) and session ids (from
# `sbx session ls --json`). Source it from ~/.bashrc, or install it as
# /usr/share/bash-completion/completions/sbx. It only reads; it never runs a sandbox.

_sbx_globals="--config --json --broker --endpoint --ca-file --cert-file --key-file --token-env
  --subject --principal-mode --help --version"

# Options of each command (the global ones are added to all).
_sbx_command_options() {
  case $1 in
    run) echo "--profile --timeout --timeout-ms --from-snapshot -i --stdin --network --allow --memory-mb --cpu --pids --disk-mb --strict" ;;
    exec) echo "--session --timeout --timeout-ms -i --stdin -d --detach --recreate-elsewhere --network --allow --memory-mb --cpu --pids --disk-mb --strict" ;;
    attach) echo "--offset --stderr-offset" ;;
    kill) echo "--signal" ;;
    code) echo "--language --profile --session --timeout --timeout-ms -i --stdin --network --allow --memory-mb --cpu --pids --disk-mb --strict" ;;
    session) echo "--profile --name --from-snapshot --forget" ;;
    cp) echo "-r --recursive" ;;
    worker) echo "--listen" ;;
    *) echo "" ;;
  esac
}

# Words of a JSON array of objects' "key" fields, printed by `sbx ... --json`.
_sbx_json_keys() {
  local key=$1
  shift
  "$@" --json 2>/dev/null | sed -n "s/^ *\"$key\": \"\\([^\"]*\\)\".*/\\1/p"
}

_sbx() {
  local cur prev cmd i word
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  local commands="config replay providers run code session exec attach kill pause resume expose snapshot cp version worker help"

  # the command: the first word that is not an option (or the value of one)
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    case $word in
      --config | --broker | --endpoint | --ca-file | --cert-file | --key-file | --token-env | \
        --subject | --principal-mode | --profile | --session | -s | --timeout | --timeout-ms | --language | -l | --name | -n | --listen | \
        --offset | --stderr-offset | --signal | --from-snapshot | --network | --allow | --memory-mb | --cpu | \
        --pids | --disk-mb)
        ((i++)) ;;
      -*) ;;
      *) cmd=$word; break ;;
    esac
  done

  case $prev in
    --config | --ca-file | --cert-file | --key-file)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return 0 ;;
    --broker) mapfile -t COMPREPLY < <(compgen -W "embedded thread remote" -- "$cur"); return 0 ;;
    --principal-mode) mapfile -t COMPREPLY < <(compgen -W "agent user" -- "$cur"); return 0 ;;
    --language | -l) mapfile -t COMPREPLY < <(compgen -W "python bash sh node" -- "$cur"); return 0 ;;
    --profile)
      mapfile -t COMPREPLY < <(compgen -W "$(_sbx_json_keys name sbx config check)" -- "$cur")
      return 0 ;;
    --session | -s)
      mapfile -t COMPREPLY < <(compgen -W "$(_sbx_json_keys session_id sbx session ls)" -- "$cur")
      return 0 ;;
    --endpoint | --token-env | --subject | --timeout | --timeout-ms | --name | --listen | --offset | \
      --stderr-offset) return 0 ;;
    --signal) mapfile -t COMPREPLY < <(compgen -W "1 2 9 15" -- "$cur"); return 0 ;;
    --network) mapfile -t COMPREPLY < <(compgen -W "deny allow" -- "$cur"); return 0 ;;
    --allow | --memory-mb | --cpu | --pids | --disk-mb) return 0 ;;
    --from-snapshot)
      mapfile -t COMPREPLY < <(compgen -W "$(_sbx_json_keys name sbx snapshot ls)" -- "$cur")
      return 0 ;;
  esac

  if [[ -z $cmd ]]; then
    if [[ $cur == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$_sbx_globals" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
    fi
    return 0
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_sbx_command_options "$cmd") $_sbx_globals" -- "$cur")
    return 0
  fi
  case $cmd in
    config) ((COMP_CWORD == i + 1)) && mapfile -t COMPREPLY < <(compgen -W "check" -- "$cur") ||
      mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
    session) ((COMP_CWORD == i + 1)) && mapfile -t COMPREPLY < <(compgen -W "new ls rm" -- "$cur") ||
      mapfile -t COMPREPLY < <(compgen -W "$(_sbx_json_keys session_id sbx session ls)" -- "$cur") ;;
    worker) mapfile -t COMPREPLY < <(compgen -W "serve" -- "$cur") ;;
    snapshot)
      if ((COMP_CWORD == i + 1)); then
        mapfile -t COMPREPLY < <(compgen -W "create ls rm" -- "$cur")
      elif [[ ${COMP_WORDS[i + 1]} == create ]]; then
        ((COMP_CWORD == i + 2)) &&
          mapfile -t COMPREPLY < <(compgen -W "$(_sbx_json_keys session_id sbx session ls)" -- "$cur")
      elif [[ ${COMP_WORDS[i + 1]} == rm ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_sbx_json_keys name sbx snapshot ls)" -- "$cur")
      fi ;;
    attach | kill | pause | resume | expose) ((COMP_CWORD == i + 1)) &&
      mapfile -t COMPREPLY < <(compgen -W "$(_sbx_json_keys session_id sbx session ls)" -- "$cur") ;;
    help) mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur") ;;
    cp | replay) mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
    run | exec) mapfile -t COMPREPLY < <(compgen -c -- "$cur") ;;
  esac
  return 0
}
complete -o default -F _sbx sbx
