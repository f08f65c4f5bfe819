#!/bin/bash
# Checks that the GPU script parses (it can only run on a GPU host).
set -e
bash -n "$1"
