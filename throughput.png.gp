set terminal pngcairo size 1400,600 noenhanced
set output 'throughput.png'
set datafile separator ','
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'samples/s (emulated time)'
set xtics rotate by -35
set key outside right
set title 'Measured throughput per plan (throughput_bench)'
plot 'throughput.csv.wide' using 2:xtic(1) title 'on-device', 'throughput.csv.wide' using 3 title 'asteroid'
