set terminal pngcairo size 900,540
set output '/tmp/full2-h200/services.png'
set title "LLM services: three models answering requests on one GPU, against model swapping (simulated, 120% (120%) of HBM)" noenhanced font ',10'
set ylabel 'milliseconds of device time (log)'
set logscale y
set grid ytics
set key outside right
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set datafile missing '?'
plot '/tmp/full2-h200/services.dat' using 2:xtic(1) title 'mean wait', '' using 3 title 'p95 wait', '' using 4 title 'makespan'
