# gnuplot docs/plots/throughput-absolute-run31.gp  (from the repository root)
DATA = "docs/plots/throughput-absolute-run31.dat"
set output "docs/plots/throughput-absolute-run31.png"
set title "throughput\\_bench run 31, absolute speeds, OpenBLAS (2026-11-30): measured (bars) vs the plans' simulated schedules (marks)"
load "docs/plots/throughput-common.gp"
