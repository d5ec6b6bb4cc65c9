#!/bin/bash
# A promise module (line-based protocol) for the tests: promises that a
# file holds exactly one line of content.
#
#   file_content:
#     "/path/to/file" content => "the line";
#
# It supports action_policy: with action_policy=warn it only says what it
# would change.

reset() {
  operation="" promiser="" content="" have_content=no action_policy="" unknown=""
}

answer() {
  echo "operation=$operation"
  echo "result=$1"
  echo ""
}

validate() {
  local ok=valid
  case "$promiser" in
    /*) ;;
    *) echo "log_error=File path '$promiser' must be absolute"; ok=invalid ;;
  esac
  if [ "$have_content" = no ]; then
    echo "log_error=Attribute 'content' is missing for '$promiser'"; ok=invalid
  fi
  if [ -n "$unknown" ]; then
    echo "log_error=Unknown attribute '$unknown' for '$promiser'"; ok=invalid
  fi
  answer "$ok"
}

evaluate() {
  local base
  base=$(basename "$promiser" | tr -c 'a-zA-Z0-9_\n' '_')
  if [ -f "$promiser" ] && [ "$(cat "$promiser")" = "$content" ]; then
    echo "result_classes=${base}_content_kept"
    answer kept
  elif [ "$action_policy" = warn ] || [ "$action_policy" = nop ]; then
    echo "log_warning=Should write '$content' to '$promiser', but only warning promised"
    echo "result_classes=${base}_content_would_change"
    answer not_kept
  elif mkdir -p "$(dirname "$promiser")" 2>/dev/null &&
    printf '%s\n' "$content" 2>/dev/null >"$promiser"; then
    echo "log_info=Wrote '$content' to '$promiser'"
    echo "result_classes=${base}_content_written,${base}-changed"
    answer repaired
  else
    echo "log_error=Could not write to '$promiser'"
    answer not_kept
  fi
}

read -r _header
read -r _empty
echo "file_content 1.0.0 v1 line_based action_policy"
echo ""
reset
while IFS= read -r line; do
  if [ -z "$line" ]; then
    case "$operation" in
      validate_promise) validate ;;
      evaluate_promise) evaluate ;;
      terminate) answer success; exit 0 ;;
      *) echo "log_critical=Unknown operation '$operation'"; answer error ;;
    esac
    reset
    continue
  fi
  key=${line%%=*}
  value=${line#*=}
  case "$key" in
    operation) operation=$value ;;
    promiser) promiser=$value ;;
    attribute_content) content=$value; have_content=yes ;;
    attribute_action_policy) action_policy=$value ;;
    attribute_handle | attribute_comment) ;;
    attribute_*) unknown=${key#attribute_} ;;
  esac
done
