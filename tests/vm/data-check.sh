#!/bin/bash
# The data-path suite as make check runs it: every test on the first
# configuration, smaller sizes, one mount per other configuration (see
# PROFILE in data.sh). The full suite is make vm-test-data.
export PROFILE=check
exec "$(dirname "$0")/data.sh"
