#!/bin/bash
# Names both protocols in its header (the last one, JSON, is used) and
# answers every request with a JSON line that keeps the promise.
read -r _header
read -r _empty
echo "twofaced 1.0.0 v1 line_based json_based"
echo ""
while IFS= read -r line; do
  [ -z "$line" ] && continue
  case "$line" in
    *'"operation":"validate_promise"'*) echo '{"result":"valid"}' ;;
    *'"operation":"terminate"'*) echo '{"result":"success"}'; echo ""; exit 0 ;;
    *) echo '{"result":"kept","result_classes":["twofaced_kept"]}' ;;
  esac
  echo ""
done
