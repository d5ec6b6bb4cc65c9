#!/bin/bash
# Exits at once, before sending a header.
exit 3
