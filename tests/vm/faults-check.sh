#!/bin/bash
# The fault suite as make check runs it: every scenario, small counts (see
# PROFILE in faults.sh). The full counts run in make hostile.
export PROFILE=check
exec "$(dirname "$0")/faults.sh"
