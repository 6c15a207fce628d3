#!/usr/bin/env bash
# Installs what msched needs to build and test, from Debian (idempotent, and
# quiet when everything is there), and checks for the CUDA 13 toolkit, whose
# headers and stub library the build derives the driver API from. No GPU and
# no NVIDIA driver are needed.
set -euo pipefail

# clang and libclang-rt-dev: the fuzz targets (libFuzzer); libtsan2: GCC's
# ThreadSanitizer runtime for the TSan build. The packaging tests: systemd
# (systemd-analyze verify, no running systemd needed), and dpkg-dev and file,
# which CPack's .deb generator uses to find the package's dependencies.
# prometheus: the real Prometheus server tests/tools/prometheus_test.sh has
# scrape mschedd --metrics (the test starts its own on free ports; the
# package's own service, which Debian enables where systemd runs, is not
# needed). slurm-wlm (slurmctld, slurmd and the client commands: Slurm
# 22.05) and munge: tests/tools/slurm_test.sh runs jobs through a real Slurm
# on loopback under msched's TaskProlog (docs/slurm.md); it too starts its
# own daemons.
# xz-utils: the real programs' traces in bench/traces are xz-compressed
# (tests/src/profile/real_traces_test.cc decompresses them). clang-format:
# the test command checks that every C++ file is formatted (.clang-format).
# help2man: the programs' man pages, made from their --help and --version.
packages=(cmake make g++ python3 binutils
          libgtest-dev libgmock-dev libbenchmark-dev
          libspdlog-dev libfmt-dev nlohmann-json3-dev
          gnuplot-nox clang libclang-rt-dev libtsan2
          systemd dpkg-dev file
          prometheus
          slurm-wlm munge xz-utils clang-format help2man)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/cuda.h" ] || [ ! -f "$cuda/include/cudaTypedefs.h" ] || [ ! -f "$cuda/lib64/stubs/libcuda.so" ]; then
  cat >&2 <<MSG
setup: no CUDA toolkit found at $cuda (looked for include/cuda.h, include/cudaTypedefs.h
and lib64/stubs/libcuda.so). msched builds against the CUDA 13 toolkit's headers; it needs
no GPU and no driver. Install NVIDIA's CUDA 13 toolkit (https://developer.nvidia.com/cuda-downloads,
or the cuda-toolkit-13-0 package from NVIDIA's Debian repository), or set CUDA_HOME to one.
MSG
  exit 1
fi
version=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$cuda/include/cuda.h")
if [ "${version:-0}" -lt 13000 ]; then
  echo "setup: the CUDA toolkit at $cuda is version $version; msched needs 13.0 (13000) or later" >&2
  exit 1
fi
