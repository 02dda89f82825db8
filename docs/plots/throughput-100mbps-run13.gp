# gnuplot docs/plots/throughput-100mbps-run13.gp  (from the repository root)
DATA = "docs/plots/throughput-100mbps-run13.dat"
set output "docs/plots/throughput-100mbps-run13.png"
set title "throughput\\_bench run 13, 100 Mbit/s (2026-11-24, 03aeea3): measured (bars) vs predicted (marks)"
load "docs/plots/throughput-common.gp"
