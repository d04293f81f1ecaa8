# Round 220-221's programs and shapes (sourced by warm220.sh, r220.sh, r221.sh).
FAMILY=("cross-entropy" "class weights" "label smoothing" "focal" "loss, z and accuracy")
declare -A FILES=(["cross-entropy"]=cross_entropy.loss ["class weights"]=cross_entropy_weighted.loss
                  ["label smoothing"]=cross_entropy_smoothing.loss ["focal"]=focal.loss
                  ["loss, z and accuracy"]=cross_entropy_z_acc.loss)
SHAPES="16384x32768 16384x32000 8192x49152"
