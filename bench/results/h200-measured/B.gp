set terminal pngcairo size 900,540
set output '/tmp/full2-h200/B.png'
set title "Combination B, multiple DNN inference: ResNet/VGG/Inception/DenseNet-like layer sequences (paper Table 3, Figure 7) (simulated)" noenhanced font ',10'
set xlabel 'total footprint, % of HBM'
set ylabel 'throughput, inferences per second (log)'
set logscale y
set grid
set key outside right
set datafile missing '?'
set arrow from 100, graph 0 to 100, graph 1 nohead dashtype 2
plot '/tmp/full2-h200/B.dat' using 1:2 with linespoints lw 2 title 'um', '/tmp/full2-h200/B.dat' using 1:3 with linespoints lw 2 title 'alloc', '/tmp/full2-h200/B.dat' using 1:4 with linespoints lw 2 title 'msched', '/tmp/full2-h200/B.dat' using 1:5 with linespoints lw 2 title 'exclusive', '/tmp/full2-h200/B.dat' using 1:6 with linespoints lw 2 dashtype 3 title 'ideal'
