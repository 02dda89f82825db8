# gnuplot docs/plots/throughput-1000mbps-run14.gp  (from the repository root)
DATA = "docs/plots/throughput-1000mbps-run14.dat"
set output "docs/plots/throughput-1000mbps-run14.png"
set title "throughput\\_bench run 14, 1000 Mbit/s (2026-11-24, 03aeea3): measured (bars) vs predicted (marks)"
load "docs/plots/throughput-common.gp"
