# gnuplot docs/plots/throughput-absolute-run21.gp  (from the repository root)
DATA = "docs/plots/throughput-absolute-run21.dat"
set output "docs/plots/throughput-absolute-run21.png"
set title "throughput\\_bench run 21, absolute speeds, links full duplex (2026-11-29): measured (bars) vs predicted (marks)"
load "docs/plots/throughput-common.gp"
