#!/bin/bash
# The data-path suite as make check runs it: every test on the first
# configuration, smaller sizes, one mount per other configuration (see
# PROFILE in data.sh). The full suite is make vm-test-data.
export PROFILE=check
# The short hostile-client test (tests/vm/hostile.sh; make hostile runs the
# full counts): ~4 min, the directed cases most of it. HOSTILE_SHORT= (empty:
# make check's core suite) leaves it to make hostile.
export HOSTILE_SHORT=${HOSTILE_SHORT-20}
exec "$(dirname "$0")/data.sh"
