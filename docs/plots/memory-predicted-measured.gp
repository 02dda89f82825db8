# gnuplot docs/plots/memory-predicted-measured.gp  (from the repository root)
set terminal pngcairo size 760,560 font "Sans,10"
set output "docs/plots/memory-predicted-measured.png"
set title "memory\\_bench, 2026-11-27: measured peak against prediction, 2 stages x 5 models x M = 2, 4"
set logscale xy
set xrange [3:2000]
set yrange [3:2000]
set xlabel "predicted MiB (GPU: planner + GPU libraries; CPU: planner)"
set ylabel "measured MiB (GPU: caching allocator's peak; CPU: tensors' peak)"
set grid
set key top left
DATA = "docs/plots/memory-predicted-measured.dat"
plot x lc rgb "#333333" dt 1 title "measured = predicted", \
     1.15*x lc rgb "#999999" dt 2 title "+/- 15 %", \
     0.85*x lc rgb "#999999" dt 2 notitle, \
     DATA index 0 using 3:4 with points pt 7 ps 1.1 lc rgb "#c44e52" title "GPU (H200, LibTorch 2.11)", \
     DATA index 1 using 3:4 with points pt 5 ps 1.0 lc rgb "#4c72b0" title "CPU (2 cores, LibTorch 1.13)"
