# gnuplot docs/plots/inference-planning.gp  (from the repository root)
set terminal pngcairo size 720,450 font "Sans,10"
set output "docs/plots/inference-planning.png"
set title "planner\\_bench --inference (2026-11-29): ViT-L/16 pipelines, predicted samples/s"
set logscale x 2
set xrange [0.8:20]
set yrange [0:*]
set xtics (1, 2, 4, 8, 16)
set xlabel "devices (analytic profile, 1 Gbit/s links)"
set ylabel "predicted samples/s (micro-batch 8)"
set grid
set key top left
DATA = "docs/plots/inference-planning.dat"
plot DATA using 1:2 with linespoints pt 7 lc rgb "#c44e52" title "EdgePipe's DP", \
     DATA using 1:3 with linespoints pt 5 lc rgb "#4c72b0" title "straight pipeline", \
     DATA using 1:4 with linespoints pt 6 lc rgb "#333333" title "on-device"
