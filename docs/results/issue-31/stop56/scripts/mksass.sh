set -e
cd /work/main
export LOSSJIT_SOURCE_DIR=$PWD
mk() { name=$1; shift; rm -rf /tmp/sc; LOSSJIT_CACHE_DIR=/tmp/sc build/lossjit compile "$@" >/dev/null; f=$(ls /tmp/sc/*.ljk); tail -c +81 $f > build/sass/${PFX}$name.cubin; LOSSJIT_CACHE_DIR=/tmp/sc build/lossjit emit "$@" > build/sass/${PFX}$name.cu; }
CE16="examples/cross_entropy.loss -i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
CE32="examples/cross_entropy.loss -i x=32768x4096:normal -i y=32768:integers[0,4095]:i64"
COS="examples/cosine.loss -i a=16384x16384:normal -i b=16384x16384:normal"
TRI="examples/triplet.loss -i a=32768x8192:normal -i p=32768x8192:normal -i n=32768x8192:normal"
mk ce16_vg $CE16 --grad x
mk ce32_vg $CE32 --grad x
mk ce32_fwd $CE32
mk cos_vg $COS --grad a --grad b
mk cos_fwd $COS
mk tri_vg $TRI --grad a --grad p --grad n
mk kl_fwd examples/kl.loss -i p=16384x16384:softmax -i t=16384x16384:softmax
ls -la build/sass
