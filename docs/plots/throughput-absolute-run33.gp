# gnuplot docs/plots/throughput-absolute-run33.gp  (from the repository root)
DATA = "docs/plots/throughput-absolute-run33.dat"
set output "docs/plots/throughput-absolute-run33.png"
set title "throughput\\_bench run 33 (environments C and D), absolute speeds, OpenBLAS (2026-11-30): measured (bars) vs the plans' simulated schedules (marks)"
load "docs/plots/throughput-common.gp"
