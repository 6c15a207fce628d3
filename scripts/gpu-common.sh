# gpu-common.sh: what scripts/gpu-check.sh, gpu-overhead.sh and gpu-sharing.sh
# need alike of the machine's GPU, so that their reports name the card alike,
# their CUDA programs build alike and they wait for a coordinator alike.
# Sourced, not run.

# Whether nvidia-smi finds a GPU.
gpu_present() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

# Sets, from the first GPU: device (its name), driver (the driver's
# version), slug (the name as report files carry it: "h100-80gb-hbm3") and
# arch (its compute capability as nvcc's sm_ digits).
gpu_facts() {
  device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
  slug=$(echo "$device" | tr 'A-Z' 'a-z' | sed 's/nvidia //; s/[^a-z0-9]\+/-/g; s/-$//')
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
}

# gpu_compile SRC OUT: builds the CUDA program SRC (tests/gpu/*.cu) for this
# GPU (gpu_facts first).
gpu_compile() { nvcc -O2 -std=c++17 -arch=sm_"$arch" -o "$2" "$1" -lcuda; }

# seconds_between START END: END - START, both from `date +%s.%N`, to 0.01 s.
seconds_between() { python3 -c "print(f'{$2 - $1:.2f}')"; }

# wait_for_socket PATH: waits up to 5 s for a coordinator to listen at PATH;
# fails if it never does.
wait_for_socket() {
  local _
  for _ in $(seq 50); do [ -S "$1" ] && return 0; sleep 0.1; done
  return 1
}
