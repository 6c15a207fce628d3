set terminal pngcairo size 1000,384
set output '/tmp/full2-h200/E-train-gantt.png'
set multiplot layout 2,1 title "Single task bigger than the GPU: DNN training whose weights, gradients and activations exceed HBM: who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:31656.8]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 300% of HBM" noenhanced
set yrange [-0.6:3.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "train" 3) noenhanced
plot '/tmp/full2-h200/E-train-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 300% of HBM" noenhanced
set yrange [-0.6:3.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "train" 3) noenhanced
plot '/tmp/full2-h200/E-train-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
