# gnuplot docs/plots/serve-vit-large.gp  (from the repository root)
set terminal pngcairo size 720,450 font "Sans,10"
set output "docs/plots/serve-vit-large.png"
set title "serve\\_bench --preset vit-large (2026-11-27): ViT-L/16 at 32x32 on 1-16 emulated devices"
set logscale x 2
set xrange [0.8:20]
set yrange [0:*]
set xtics (1, 2, 4, 8, 16)
set xlabel "emulated devices (NX, TX2, Nano, Nano, ...)"
set ylabel "samples/s"
set grid
set key top left
DATA = "docs/plots/serve-vit-large.dat"
plot DATA using 1:2 with linespoints pt 6 lc rgb "#333333" title "predicted (EdgePipe's DP)", \
     DATA using 1:3 with linespoints pt 7 lc rgb "#c44e52" title "measured"
