#!/usr/bin/env bash
# On the GPU machine: builds the CUDA variant if needed, then delta_rule_check.mjs (the fused delta-rule kernels
# against the ATen formulation and a float64 reference, timed at the 9B shape), and with RACECHECK=1 first a
# small shape under compute-sanitizer's shared-memory race checker.
# Usage: bash bench/gpu/delta_rule_check.sh
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
bash bench/gpu/ensure-addon.sh "$OUT/build.log"
if [ "${RACECHECK:-0}" = 1 ]; then
  timeout 300 compute-sanitizer --tool racecheck --racecheck-report hazard node bench/gpu/delta_rule_check.mjs --small \
    > "$OUT/racecheck.log" 2>&1; echo "racecheck exit $?"; grep -E "RACECHECK SUMMARY|hazard|Error" "$OUT/racecheck.log" | head -20
fi
[ "${CHECK:-1}" = 1 ] && node bench/gpu/delta_rule_check.mjs 2>&1 | tee "$OUT/delta-rule-check.txt"
if [ "${NCU:-0}" = 1 ]; then  # the fused kernels of one training step under Nsight Compute (no clock control)
  ncu --clock-control none -k regex:program_kernel -c "${NCU_KERNELS:-7}" --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section InstructionStats \
    node bench/gpu/delta_rule_check.mjs --profile > "$OUT/ncu.txt" 2>&1; echo "ncu exit $?"
  grep -E "program_kernel|Duration|Achieved Occupancy|Registers Per|Block Limit|Memory Throughput|Compute \(SM\)|way bank" "$OUT/ncu.txt" | head -90
fi
