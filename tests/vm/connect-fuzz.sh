#!/bin/bash
# The connection suite with RFC 8797 private data of every length the CM
# allows (0..56 bytes on RoCE, 0..251 on iWARP), random contents from
# PD_SEED (make hostile).
export PD_FUZZ=all
exec "$(dirname "$0")/connect.sh"
