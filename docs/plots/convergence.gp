# gnuplot docs/plots/convergence.gp  (from the repository root)
set terminal pngcairo size 900,450 font "Sans,10"
set output "docs/plots/convergence.png"
set title "convergence\\_bench, 2026-11-23 (env D, 100 Mbps, small CNN, D = 1.47)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics
set yrange [0:*]
set ylabel "emulated seconds"
set key top right
set bmargin 4
DATA = "docs/plots/convergence.dat"
plot DATA using 2:xtic(sprintf("%s\nfinal accuracy %.2f %%", strcol(1), $3)) lc rgb "#4c72b0" title "to 71.8 % test accuracy", \
     '' using 4 lc rgb "#dd8452" title "150 steps"
