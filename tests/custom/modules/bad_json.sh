#!/bin/bash
# Speaks the JSON protocol in its header, then answers every request with
# a line that is not JSON (and the empty line that ends an answer).
read -r _header
read -r _empty
echo "badjson 1.0.0 v1 json_based"
echo ""
while IFS= read -r line; do
  [ -z "$line" ] && continue
  echo "this is not JSON"
  echo ""
done
