# Shared by the throughput-*-run*.gp scripts: measured samples/s (bars)
# and predicted samples/s (black marks) per row and plan, from a .dat written from docs/benchmarks.md.
set terminal pngcairo size 900,450 font "Sans,10"
set datafile missing "?"
set style fill solid 0.85 border -1
set boxwidth 0.15
set grid ytics
set yrange [0:*]
# XMAX: a script with fewer rows sets it before loading this file.
if (!exists("XMAX")) XMAX = 7.6
set xrange [-0.6:XMAX]
set ylabel "samples/s (emulated time)"
set key below horizontal width 1
set bmargin 5
plans = "on-device dp-even pp pipedream asteroid"
colors = "#4c72b0 #8c8c8c #55a868 #dd8452 #c44e52"
off(p) = (p - 2) * 0.16
plot DATA using 1:(NaN):xtic(2) notitle with points, \
     for [p=0:4] DATA using ($1 + off(p)):(column(3 + 2*p)) \
       with boxes lc rgb word(colors, p + 1) title word(plans, p + 1), \
     for [p=0:4] DATA using ($1 + off(p)):(column(4 + 2*p)) \
       with points pt 7 ps 0.6 lc rgb "black" title (p == 0 ? "predicted" : "")
