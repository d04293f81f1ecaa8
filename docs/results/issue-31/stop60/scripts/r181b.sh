#!/bin/bash
# Round 181, second call (H200): the prefetch test (round 181's first shard reached its limit in it) and
# the tests after it in that shard, at once.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
(LOSSJIT_CACHE_DIR=/tmp/c_p timeout 145 build/tests/lossjit_tests -tc="row programs: the row prefetch*" --duration=true > $OUT/prefetch.txt 2>&1; echo "exit $?" >> $OUT/prefetch.txt) &
(LOSSJIT_CACHE_DIR=/tmp/c_r timeout 145 build/tests/lossjit_tests -tc="rows of two strides*,several results*,sizes around block*,side by side with several*" --duration=true > $OUT/rest.txt 2>&1; echo "exit $?" >> $OUT/rest.txt) &
wait
