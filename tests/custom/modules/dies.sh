#!/bin/bash
# Validates promises, then exits when asked to evaluate one.
read -r _header
read -r _empty
echo "mortal 1.0.0 v1 line_based"
echo ""
operation=""
while IFS= read -r line; do
  if [ -z "$line" ]; then
    [ "$operation" = evaluate_promise ] && exit 1
    echo "operation=$operation"
    echo "result=valid"
    echo ""
    continue
  fi
  case "$line" in operation=*) operation=${line#operation=} ;; esac
done
