# gnuplot docs/plots/throughput-100mbps-run15.gp  (from the repository root)
DATA = "docs/plots/throughput-100mbps-run15.dat"
set output "docs/plots/throughput-100mbps-run15.png"
set title "throughput\\_bench run 15, 100 Mbit/s (2026-11-28, ef54052): measured (bars) vs predicted (marks)"
load "docs/plots/throughput-common.gp"
