set terminal pngcairo size 1000,776
set output '/tmp/full2-h200/real-mix-gantt.png'
set multiplot layout 2,1 title "Real programs: Llama decoders beside ResNet-50 training, replayed from H200 traces: who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:106.903]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 300% of HBM" noenhanced
set yrange [-0.6:10.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "llama-1" 3, "llama-2" 4, "train-1" 5, "llama-3" 6, "train-2" 7, "train-3" 8, "train-4" 9, "train-5" 10) noenhanced
plot '/tmp/full2-h200/real-mix-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 300% of HBM" noenhanced
set yrange [-0.6:10.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "llama-1" 3, "llama-2" 4, "llama-3" 5, "train-1" 6, "train-2" 7, "train-3" 8, "train-4" 9, "train-5" 10) noenhanced
plot '/tmp/full2-h200/real-mix-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
