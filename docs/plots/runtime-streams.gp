# gnuplot docs/plots/runtime-streams.gp  (from the repository root)
set terminal pngcairo size 1000,450 font "Sans,10"
set output "docs/plots/runtime-streams.png"
set title "runtime\\_bench streams on loopback, 2026-12-02, 0a391e6, medians of 6 runs (--transfers-only --repeats 5)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics
set yrange [0:*]
set ylabel "MB/s"
set key outside right top
DATA = "docs/plots/runtime-streams.dat"
plot DATA using 2:xtic(1) lc rgb "#4c72b0" title "data plane", \
     '' using 3 lc rgb "#8fb0dd" title "TLS data plane", \
     '' using 4 lc rgb "#dd8452" title "CAF 0.17 message", \
     '' using 5 lc rgb "#f0bf95" title "TLS CAF", \
     '' using 6 lc rgb "#555555" title "iperf3", \
     '' using 7 lc rgb "#999999" title "raw TCP, the stream's payloads"
