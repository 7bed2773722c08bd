# session 19, call 2: Nsight Compute on the engine's kernels (GDN fwd+bwd, 16K) and VLA's d = 128 gate (4K fwd).
set -u
R=$OUT/r; mkdir -p $R
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
echo "ncu: $NCU" > $R/ncu.txt
cd .variants/s19/x && export PYTHONPATH=.
timeout 500 $NCU --clock-control none --profile-from-start off --target-processes all \
  -k regex:"state_fwd_kernel|state_bwd_kernel|local_bwd_kernel|gate_apply_kernel|wy_fwd_kernel|output_fwd_kernel|wy_apply_kernel|state_bwd_local_kernel" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SourceCounters \
  --export $R/probe python3 ../ncu_probe.py 16384 >> $R/ncu.txt 2>&1
echo "rc $?" >> $R/ncu.txt
$NCU --import $R/probe.ncu-rep --page details > $R/details.txt 2>&1
$NCU --import $R/probe.ncu-rep --page raw --csv --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,regex:smsp__average_warp.*,launch__.* > $R/raw.csv 2>&1
tail -n 5 $R/ncu.txt; grep -E "^  [a-z_]+_kernel|Stall|Warp Cycles Per Issued|Achieved Occupancy|Duration|Issued Warp|No Eligible|Theoretical Occupancy|Registers Per|Shared Memory Config" $R/details.txt | head -150
tar czf $OUT/s19b.tgz -C $R .
