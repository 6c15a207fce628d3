set terminal pngcairo size 1000,440
set output '/tmp/full2-h200/urgent-gantt.png'
set multiplot layout 2,1 title "An urgent job arrives while a long job holds 70% of HBM: who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:1362.77]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 120% of HBM" noenhanced
set yrange [-0.6:4.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "long" 3, "urgent" 4) noenhanced
plot '/tmp/full2-h200/urgent-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 120% of HBM" noenhanced
set yrange [-0.6:4.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "long" 3, "urgent" 4) noenhanced
plot '/tmp/full2-h200/urgent-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
