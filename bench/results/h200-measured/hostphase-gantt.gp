set terminal pngcairo size 1000,496
set output '/tmp/full2-h200/hostphase-gantt.png'
set multiplot layout 2,1 title "Jobs that leave the GPU idle: training with data-loading and evaluation phases: who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:976.988]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 135% of HBM" noenhanced
set yrange [-0.6:5.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "train-1" 3, "train-2" 4, "train-3" 5) noenhanced
plot '/tmp/full2-h200/hostphase-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 135% of HBM" noenhanced
set yrange [-0.6:5.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "train-1" 3, "train-2" 4, "train-3" 5) noenhanced
plot '/tmp/full2-h200/hostphase-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
