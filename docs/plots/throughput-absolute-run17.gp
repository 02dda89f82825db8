# gnuplot docs/plots/throughput-absolute-run17.gp  (from the repository root)
DATA = "docs/plots/throughput-absolute-run17.dat"
set output "docs/plots/throughput-absolute-run17.png"
set title "throughput\\_bench run 17, environments C and D, absolute speeds, compute from the profile (2026-11-29): measured (bars) vs predicted (marks)"
load "docs/plots/throughput-common.gp"
