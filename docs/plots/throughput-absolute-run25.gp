# gnuplot docs/plots/throughput-absolute-run25.gp  (from the repository root)
DATA = "docs/plots/throughput-absolute-run25.dat"
set output "docs/plots/throughput-absolute-run25.png"
set title "throughput\\_bench run 25, absolute speeds (2026-11-29): measured (bars) vs the plans' simulated schedules (marks)"
load "docs/plots/throughput-common.gp"
