# Round 217's programs, shapes and variants (sourced by r217.sh and warm217.sh). With the change's
# library, knob block=512 gives main's kernel of these shapes (16 warps keeping part of each row; the
# emitted sources compared equal), "default" the change's (fewer warps keeping whole rows).
FAMILY=("cross-entropy" "class weights" "label smoothing" "focal" "loss, z and accuracy")
declare -A FILES=(["cross-entropy"]=cross_entropy.loss ["class weights"]=cross_entropy_weighted.loss
                  ["label smoothing"]=cross_entropy_smoothing.loss ["focal"]=focal.loss
                  ["loss, z and accuracy"]=cross_entropy_z_acc.loss)
SHAPES="32768x4096 24576x6144 20480x5120"
MAPS=("exp(x - logsumexp(x, -1))" "x - logsumexp(x, -1)" "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)"
      "x / sqrt(mean(x^2, -1) + 1e-6)")
warps_of() { case $1 in 32768x4096) echo 384 ;; *) echo 256 ;; esac; }
