#!/bin/bash
# Answers the agent's header with two lines of text instead of a header
# and an empty line, then reads until its input ends.
read -r _header
read -r _empty
echo "hello, this is not a header"
echo "and this is not an empty line"
while read -r _line; do :; done
