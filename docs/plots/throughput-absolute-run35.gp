# gnuplot docs/plots/throughput-absolute-run35.gp  (from the repository root)
DATA = "docs/plots/throughput-absolute-run35.dat"
set output "docs/plots/throughput-absolute-run35.png"
set title "throughput\\_bench run 35 (2026-11-30), absolute speeds, devices on one core: measured (bars), simulated (marks)"
load "docs/plots/throughput-common.gp"
