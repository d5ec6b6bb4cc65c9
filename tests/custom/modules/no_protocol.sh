#!/bin/bash
# Names no protocol in its header (cf-agent then uses the line-based one),
# and keeps every promise.
read -r _header
read -r _empty
echo "vague 1.0.0 v1"
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
