#!/bin/bash
# A promise module (line protocol) that makes a symbolic link point where
# it is promised to:
#
#   symlink:
#     "/srv/app/current" target => "/srv/app/releases/42";
#
# With action_policy=warn it only says what it would change.

answer() {
  echo "operation=$operation"
  echo "result=$1"
  echo ""
}

validate() {
  case "$promiser" in
    /*) ;;
    *) echo "log_error=symlink: '$promiser' is not an absolute path"; answer invalid; return ;;
  esac
  if [ -z "$target" ]; then
    echo "log_error=symlink: the promise for '$promiser' has no 'target'"
    answer invalid
    return
  fi
  answer valid
}

evaluate() {
  local class
  class="$(basename "$promiser" | tr -c 'a-zA-Z0-9_\n' '_')_linked"
  if [ -L "$promiser" ] && [ "$(readlink "$promiser")" = "$target" ]; then
    answer kept
  elif [ -e "$promiser" ] && [ ! -L "$promiser" ]; then
    echo "log_error=symlink: '$promiser' exists and is not a symbolic link"
    answer not_kept
  elif [ "$action_policy" = warn ]; then
    echo "log_warning=Should link '$promiser' to '$target', but only warning promised"
    answer not_kept
  elif ln -sfn "$target" "$promiser" 2>/dev/null; then
    echo "log_info=Linked '$promiser' to '$target'"
    echo "result_classes=$class"
    answer repaired
  else
    echo "log_error=symlink: could not link '$promiser' to '$target'"
    answer not_kept
  fi
}

read -r _agent_header
read -r _empty
echo "symlink 1.0.0 v1 line_based action_policy"
echo ""
operation="" promiser="" target="" action_policy=""
while IFS= read -r line; do
  if [ -n "$line" ]; then
    case "$line" in
      operation=*) operation=${line#operation=} ;;
      promiser=*) promiser=${line#promiser=} ;;
      attribute_target=*) target=${line#attribute_target=} ;;
      attribute_action_policy=*) action_policy=${line#attribute_action_policy=} ;;
    esac
    continue
  fi
  case "$operation" in
    validate_promise) validate ;;
    evaluate_promise) evaluate ;;
    terminate) answer success; exit 0 ;;
    *) echo "log_critical=symlink: unknown operation '$operation'"; answer error ;;
  esac
  operation="" promiser="" target="" action_policy=""
done
