# gnuplot docs/plots/throughput-run38-39.gp  (from the repository root)
DATA = "docs/plots/throughput-run38-39.dat"
set output "docs/plots/throughput-run38-39.png"
set title "throughput\\_bench runs 38 and 39: ResNet-50 at batch 32, measured (bars) vs simulated (marks)"
XMAX = 1.6
load "docs/plots/throughput-common.gp"
