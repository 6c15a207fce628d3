set terminal pngcairo size 900,540
set output '/tmp/full2-h200/ablation-prediction.png'
set title "Ablation: whole-allocation vs template prediction, on D (paper section 7.3, Figure 8) (simulated)" noenhanced font ',10'
set xlabel 'total footprint, % of HBM'
set ylabel 'throughput, tokens per second (log)'
set logscale y
set grid
set key outside right
set datafile missing '?'
set arrow from 100, graph 0 to 100, graph 1 nohead dashtype 2
plot '/tmp/full2-h200/ablation-prediction.dat' using 1:2 with linespoints lw 2 title 'msched', '/tmp/full2-h200/ablation-prediction.dat' using 1:3 with linespoints lw 2 title 'msched-alloc', '/tmp/full2-h200/ablation-prediction.dat' using 1:4 with linespoints lw 2 dashtype 3 title 'ideal'
