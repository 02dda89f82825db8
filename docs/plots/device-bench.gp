# gnuplot docs/plots/device-bench.gp  (from the repository root)
set terminal pngcairo size 900,460 font "Sans,10"
set output "docs/plots/device-bench.png"
set multiplot layout 1,2 title "device\\_bench: a GPU node and a CPU node, ResNet-18 at 32x32, batch 64 (H200 machine, 16 cores), one run each day"
DATA = "docs/plots/device-bench.dat"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set key top right
set yrange [0:*]
set bmargin 4
set title "samples/s (GPU / CPU = 4.65x, then 3.35x)"
plot DATA using 2:xtic(1) title "2026-11-27" lc rgb "#4c72b0", '' using 5 title "2026-11-30" lc rgb "#8fa9d6"
set title "ms per step the framework adds (step - replica compute)"
plot DATA using (1000*($3-$4)):xtic(1) title "2026-11-27" lc rgb "#c44e52", '' using (1000*($6-$7)) title "2026-11-30" lc rgb "#e39a9c"
unset multiplot
