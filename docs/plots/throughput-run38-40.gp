# gnuplot docs/plots/throughput-run38-40.gp  (from the repository root)
DATA = "docs/plots/throughput-run38-40.dat"
set output "docs/plots/throughput-run38-40.png"
set title "throughput\\_bench runs 38-40: ResNet-50 at batch 32, measured (bars) vs simulated (marks)"
XMAX = 2.6
load "docs/plots/throughput-common.gp"
