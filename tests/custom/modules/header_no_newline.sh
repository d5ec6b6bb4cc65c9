#!/bin/bash
# Sends its header without a newline, then exits.
read -r _header
read -r _empty
printf 'broken 1.0.0 v1 line_based'
