# gnuplot docs/plots/planner-dp-batch.gp  (from the repository root)
set terminal pngcairo size 1000,480 font "Sans,10"
set output "docs/plots/planner-dp-batch.png"
set title "planner\\_bench --dp-batch (2026-11-26): Asteroid's predicted speedup over even DP, analytic profiles"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics
set logscale y
set yrange [0.8:*]
set ylabel "speedup over even DP (log scale)"
set key top right
set xtics rotate by -30 font "Sans,9"
set bmargin 6
DATA = "docs/plots/planner-dp-batch.dat"
plot DATA using 3:xtic(1) lc rgb "#4c72b0" title "predicted, batch 32", \
     '' using 6 lc rgb "#55a868" title "predicted, batch 256", \
     '' using 8 lc rgb "#c44e52" title "paper (Table 4)"
