# session 25: Nsight Compute on CCQ's six kernels (forward + backward, 16K, K = 32 then 128)
set -u
R=$OUT/r; mkdir -p $R
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
echo "ncu: $NCU" > $R/ncu.txt
export PYTHONPATH=.
timeout 400 $NCU --clock-control none --profile-from-start off --target-processes all -k regex:"ccq_" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SourceCounters \
  --export $R/probe python3 benchmarks/h200-2026-12-01/session25/ncu/ncu_probe.py >> $R/ncu.txt 2>&1
echo "rc $?" >> $R/ncu.txt
$NCU --import $R/probe.ncu-rep --page details > $R/details.txt 2>&1
$NCU --import $R/probe.ncu-rep --page raw --csv --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,regex:smsp__average_warp.*,launch__.* > $R/raw.csv 2>&1
tail -n 3 $R/ncu.txt; grep -E "^  ccq_[a-z_]+_kernel|Duration|Warp Cycles Per Issued|Achieved Occupancy|Theoretical Occupancy|Issued Warp|Registers Per|Memory Throughput|Compute \(SM\) Throughput|Block Limit" $R/details.txt | head -150
rm -f $R/probe.ncu-rep
