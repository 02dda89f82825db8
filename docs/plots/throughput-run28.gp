# gnuplot docs/plots/throughput-run28.gp  (from the repository root)
DATA = "docs/plots/throughput-run28.dat"
set output "docs/plots/throughput-run28.png"
set title "throughput\\_bench run 28 (BERT-small, 512 tokens, OpenBLAS), 2026-11-30: measured vs simulated"
XMAX = 2.6
load "docs/plots/throughput-common.gp"
