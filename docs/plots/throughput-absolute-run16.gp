# gnuplot docs/plots/throughput-absolute-run16.gp  (from the repository root)
DATA = "docs/plots/throughput-absolute-run16.dat"
set output "docs/plots/throughput-absolute-run16.png"
set title "throughput\\_bench run 16, absolute speeds, compute from the profile (2026-11-29): measured (bars) vs predicted (marks)"
load "docs/plots/throughput-common.gp"
