# gnuplot docs/plots/runtime-veth-large-payloads.gp  (from the repository root)
set terminal pngcairo size 900,420 font "Sans,10"
set output "docs/plots/runtime-veth-large-payloads.png"
set title "Streams over a testbed veth, two node programs side by side, 2026-12-02, medians of 24 iterations"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics
set yrange [0:*]
set ylabel "Mbit/s"
set key outside right top
DATA = "docs/plots/runtime-veth-large-payloads.dat"
plot DATA using 2:xtic(1) lc rgb "#555555" title "iperf3, 3 s", \
     '' using 3 lc rgb "#8fb0dd" title "data plane before", \
     '' using 4 lc rgb "#4c72b0" title "data plane, 0a391e6"
