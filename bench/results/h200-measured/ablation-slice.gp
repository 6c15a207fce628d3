set terminal pngcairo size 900,540
set output '/tmp/full2-h200/ablation-slice.png'
set title "Ablation: adaptive vs fixed time-slice length, on the micro-benchmark (simulated)" noenhanced font ',10'
set xlabel 'total footprint, % of HBM'
set ylabel 'throughput, tasks per second (log)'
set logscale y
set grid
set key outside right
set datafile missing '?'
set arrow from 100, graph 0 to 100, graph 1 nohead dashtype 2
plot '/tmp/full2-h200/ablation-slice.dat' using 1:2 with linespoints lw 2 title 'msched', '/tmp/full2-h200/ablation-slice.dat' using 1:3 with linespoints lw 2 title 'msched-fixed-200ms', '/tmp/full2-h200/ablation-slice.dat' using 1:4 with linespoints lw 2 dashtype 3 title 'ideal'
