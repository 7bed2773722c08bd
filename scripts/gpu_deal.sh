# Sourced by the device scripts: deal_over_gpus N FN runs `FN i` for i = 0 … N−1, item i on GPU i mod (number of
# GPUs) with CUDA_VISIBLE_DEVICES set, the items of one GPU one after another, the GPUs side by side. Returns 1 if
# any item failed.
deal_over_gpus() {
  local n=$1 fn=$2 gpus g pid status=0
  local pids=()
  gpus=$(nvidia-smi --list-gpus | wc -l)
  for ((g = 0; g < gpus; g++)); do
    (
      rc=0
      for ((i = g; i < n; i += gpus)); do CUDA_VISIBLE_DEVICES=$g "$fn" "$i" || rc=1; done
      exit $rc
    ) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  return $status
}
