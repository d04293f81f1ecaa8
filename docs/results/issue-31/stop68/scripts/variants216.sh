# Round 216's programs and variants (sourced by r216.sh and warm216.sh).
FAMILY=("cross-entropy" "class weights" "label smoothing" "focal" "loss, z and accuracy")
declare -A FILES=(["cross-entropy"]=cross_entropy.loss ["class weights"]=cross_entropy_weighted.loss
                  ["label smoothing"]=cross_entropy_smoothing.loss ["focal"]=focal.loss
                  ["loss, z and accuracy"]=cross_entropy_z_acc.loss)
SHAPES="32768x4096 65536x2048 24576x6144"
variants() {
  case $1 in
    32768x4096) echo default block=384,row_cache=on block=320,row_cache=on block=256,row_cache=on block=192,row_cache=on \
                     block=128,row_cache=on block=384,row_cache=on,unroll=4 block=512,row_cache=on,unroll=4 \
                     block=384,row_cache=on,row_prefetch=on ;;
    65536x2048) echo default block=384,row_cache=on block=256,row_cache=on block=192,row_cache=on ;;
    24576x6144) echo default block=256,row_cache=on,row_team=warp block=192,row_cache=on,row_team=warp ;;
  esac
}
