# gnuplot docs/plots/throughput-run26-27.gp  (from the repository root)
DATA = "docs/plots/throughput-run26-27.dat"
set output "docs/plots/throughput-run26-27.png"
set title "throughput\\_bench runs 26 (ResNet-50) and 27 (BERT-small), 2026-11-30: measured vs simulated"
load "docs/plots/throughput-common.gp"
