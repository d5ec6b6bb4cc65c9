#!/bin/bash
# A promise module (line-based protocol) for the tests that keeps every
# promise and does not declare the action_policy feature, so the agent
# must not hand it a promise that may only warn.
read -r _header
read -r _empty
echo "plain 1.0.0 v1 line_based"
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
