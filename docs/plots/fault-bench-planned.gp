# gnuplot docs/plots/fault-bench-planned.gp  (from the repository root)
set terminal pngcairo size 900,480 font "Sans,10"
set output "docs/plots/fault-bench-planned.png"
set title "fault\\_bench (2026-11-28, 2 cores): node3 SIGKILLed in step 45 of 60, cnn on 4 emulated devices"
set xlabel "seconds since the job started"
set ylabel "samples/s (each step)"
set yrange [0:*]
set grid
set key bottom right
DATA = "docs/plots/fault-bench-planned.dat"
plot DATA index 0 using 2:3 with linespoints pt 7 ps 0.5 lc rgb "#c44e52" title "replay (default)", \
     DATA index 1 using 2:3 with linespoints pt 5 ps 0.5 lc rgb "#4c72b0" title "replan", \
     DATA index 2 using 2:3 with linespoints pt 9 ps 0.5 lc rgb "#999999" title "restart from checkpoint (every 25 steps)", \
     DATA index 3 using 2:3 with linespoints pt 13 ps 0.5 lc rgb "#dd8452" title "replay, no re-balancing", \
     DATA index 4 using 2:3 with lines dt 2 lc rgb "#333333" title "fresh plan on the 3 survivors (no fault)"
