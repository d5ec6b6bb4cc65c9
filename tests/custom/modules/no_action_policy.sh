#!/bin/bash
# A promise module (line-based protocol) for the tests that keeps every
# promise. As no_action_policy.sh it does not declare the action_policy
# feature, so the agent must not hand it a promise that may only warn; as
# no_protocol.sh (a link to this file) its header names no protocol at
# all, so the agent warns and speaks the line protocol.
read -r _header
read -r _empty
case "$(basename "$0")" in
  no_protocol.sh) echo "vague 1.0.0 v1" ;;
  *) echo "plain 1.0.0 v1 line_based" ;;
esac
echo ""
operation=""
while IFS= read -r line; do
  if [ -z "$line" ]; then
    echo "operation=$operation"
    case "$operation" in
      validate_promise) echo "result=valid" ;;
      evaluate_promise) echo "result=kept" ;;
      terminate) echo "result=success"; echo ""; exit 0 ;;
    esac
    echo ""
    continue
  fi
  case "$line" in operation=*) operation=${line#operation=} ;; esac
done
