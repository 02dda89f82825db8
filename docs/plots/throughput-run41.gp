# gnuplot docs/plots/throughput-run41.gp  (from the repository root)
DATA = "docs/plots/throughput-run41.dat"
set output "docs/plots/throughput-run41.png"
set title "throughput\\_bench runs 41 and 41a (BERT-small, 512 tokens, devices on one core), 2026-12-01: measured vs simulated"
XMAX = 2.6
load "docs/plots/throughput-common.gp"
