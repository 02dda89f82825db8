# gnuplot docs/plots/throughput-dp-batch.gp  (from the repository root)
set terminal pngcairo size 720,450 font "Sans,10"
set output "docs/plots/throughput-dp-batch.png"
set title "throughput\\_bench, A / MobileNetV2 / 100 Mbit/s: Asteroid over even DP against the batch size"
set logscale x 2
set xrange [24:340]
set yrange [0:5]
set xtics (32, 64, 128, 256)
set xlabel "mini-batch size"
set ylabel "Asteroid samples/s / even-DP samples/s"
set grid
set key top right
DATA = "docs/plots/throughput-dp-batch.dat"
plot DATA using 1:2 with linespoints pt 7 lc rgb "#c44e52" title "measured", \
     DATA using 1:3 with linespoints pt 6 lc rgb "#333333" title "predicted (cost model)", \
     DATA using 1:4 with lines dt 2 lc rgb "#4c72b0" title "paper (Table 4: 1.5)"
