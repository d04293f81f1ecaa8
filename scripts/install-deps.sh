#!/usr/bin/env bash
# Installs the Debian packages lossjit builds against (Debian 12; the CUDA 13 toolkit is expected in
# /usr/local/cuda). Does nothing when they are all present, so it is cheap to run before every build.
set -euo pipefail

packages=(cmake g++ make tao-pegtl-dev libfmt-dev doctest-dev libcli11-dev libxxhash-dev nlohmann-json3-dev libreadline-dev libboost-math-dev
          libdlpack-dev pkgconf python3-numpy python3-pytest python3-venv python3-torch
          libtorch-dev pybind11-dev python3-dev ninja-build)
# libdlpack-dev: dlpack/dlpack.h for the C ABI (liblossjit_c.so); pkgconf: the install test builds a C
# program with `pkg-config --libs lossjit`; the python3 packages: the Python package's tests
# (python/tests, run by scripts/test.sh); python3-venv: a venv and its pip for `pip install ./python`
# (tests/install/python_install.sh; the package's build backend is in-tree, so no index); python3-torch
# (1.13, CPU): the oracle of the differential test (tests/differential/); libtorch-dev, pybind11-dev,
# python3-dev, ninja-build: torch's C++ extension loader builds the native autograd path
# (python/lossjit/_native.cpp) against them in python/tests/test_native.py.
# Where clang 14 is installed, scripts/test.sh also runs a short fuzz test; it needs clang's runtime
# (libFuzzer and the sanitizers), which Debian ships apart from the compiler.
if dpkg-query -W -f='${Status}' clang-14 2>/dev/null | grep -q "install ok installed"; then
  packages+=(libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "install-deps: the CUDA toolkit (13.x, with NVRTC) must be installed in /usr/local/cuda" >&2
  exit 1
fi
