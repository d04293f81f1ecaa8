# Round 215's programs and variants (sourced by r215.sh and warm215.sh).
FAMILY=("cross-entropy" "class weights" "label smoothing" "focal" "loss, z and accuracy")
declare -A FILES=(["cross-entropy"]=cross_entropy.loss ["class weights"]=cross_entropy_weighted.loss
                  ["label smoothing"]=cross_entropy_smoothing.loss ["focal"]=focal.loss
                  ["loss, z and accuracy"]=cross_entropy_z_acc.loss)
variants() {
  case $1 in
    32768x4096) echo default block=448,row_cache=on block=224,row_cache=on block=384,row_cache=on ;;
    16384x8192) echo default block=224,row_cache=on,row_team=warp block=256,row_cache=on,row_team=warp ;;
  esac
}
