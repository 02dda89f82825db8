# gnuplot docs/plots/throughput-run30.gp  (from the repository root)
DATA = "docs/plots/throughput-run30.dat"
set output "docs/plots/throughput-run30.png"
set title "throughput\\_bench runs 30 and 30a (BERT-small, 512 tokens, update priced), 2026-11-30: measured vs simulated"
XMAX = 2.6
load "docs/plots/throughput-common.gp"
