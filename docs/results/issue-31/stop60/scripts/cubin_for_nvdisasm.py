# Rewrites a CUDA 13 sm_90 cubin's ELF header (OS/ABI 41, ABI version 8, the new e_flags) as CUDA 11.8
# wrote it (33, 7, 0x5a055a: SM90, virtual SM90, 64-bit addresses, unified textures), so that the
# nvdisasm of Debian's non-free nvidia-cuda-toolkit (11.8) disassembles it. Usage: IN OUT.
import sys, struct
b = bytearray(open(sys.argv[1], "rb").read())
b[7] = 33; b[8] = 7
struct.pack_into("<I", b, 48, 0x5a055a)
open(sys.argv[2], "wb").write(b)
