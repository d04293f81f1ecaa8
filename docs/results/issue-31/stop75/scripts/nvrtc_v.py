import ctypes, sys
lib = ctypes.CDLL('/usr/local/cuda/lib64/libnvrtc.so')
for f in sys.argv[1:]:
    src = open(f, 'rb').read()
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b'k.cu', 0, None, None) == 0
    opts = [b'--gpu-architecture=sm_90', b'-std=c++17', b'-default-device', b'--ptxas-options=-v']
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log)
    lines = [l for l in log.value.decode().splitlines() if 'error' in l or 'registers' in l or 'spill' in l]
    print(f, rc, *lines[:6], sep='\n  ')
