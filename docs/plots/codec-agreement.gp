# gnuplot docs/plots/codec-agreement.gp  (from the repository root)
set terminal pngcairo size 720,450 font "Sans,10"
set output "docs/plots/codec-agreement.png"
set title "codec\\_agreement (2026-11-29): bert\\_small, 4 stages, 200 random inputs, every link compressed"
set style fill solid 0.6
set boxwidth 0.5
set xrange [-0.6:3.6]
set yrange [1e-4:1e-1]
set logscale y
set ylabel "max |output - fp32 output| (bars, log scale)"
set y2range [0.95:1.005]
set y2tics
set y2label "top-1 agreement with fp32 (points)"
set grid
set key outside bottom center horizontal
DATA = "docs/plots/codec-agreement.dat"
plot DATA using 1:4:xtic(2) with boxes lc rgb "#4c72b0" title "max abs difference", \
     DATA using 1:3 axes x1y2 with points pt 7 ps 1.5 lc rgb "#c44e52" title "top-1 agreement"
