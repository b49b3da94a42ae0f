#!/bin/bash
# The data-path suite against the kernel's C svcrdma (rpcrdma.ko, transport
# "rdma"): the same tests must pass there, or they are not valid tests.
export SERVER=c
export CONFIGS=${CONFIGS:-rxe:frmr siw:frmr}
exec "$(dirname "$0")/data.sh"
