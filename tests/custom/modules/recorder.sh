#!/bin/bash
# A promise module (line-based protocol) for the tests that keeps every
# promise and says, as notices, each line of each request it gets.
read -r header
read -r _empty
echo "recorder 1.0.0 v1 line_based action_policy"
echo ""
count=0
operation=""
while IFS= read -r line; do
  if [ -z "$line" ]; then
    count=$((count + 1))
    echo "operation=$operation"
    case "$operation" in
      validate_promise) echo "result=valid" ;;
      evaluate_promise) echo "result=kept" ;;
      terminate) echo "log_notice=terminating after $count requests (agent header '$header')"; echo "result=success"; echo ""; exit 0 ;;
    esac
    echo ""
    continue
  fi
  case "$line" in operation=*) operation=${line#operation=} ;; esac
  echo "log_notice=request $((count + 1)) line: $line"
done
