# gnuplot docs/plots/throughput-absolute-run36.gp  (from the repository root)
DATA = "docs/plots/throughput-absolute-run36.dat"
set output "docs/plots/throughput-absolute-run36.png"
set title "throughput\\_bench run 36 (2026-11-30), C and D, absolute speeds, devices on one core: measured (bars), simulated (marks)"
load "docs/plots/throughput-common.gp"
