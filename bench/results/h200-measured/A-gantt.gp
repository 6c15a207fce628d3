set terminal pngcairo size 1000,552
set output '/tmp/full2-h200/A-gantt.png'
set multiplot layout 2,1 title "Combination A, scientific computing: Rodinia-like dwt2d, hotspot, cfd, nn (paper Table 3, Figure 7): who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:1952.2]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 300% of HBM" noenhanced
set yrange [-0.6:6.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "cfd" 3, "dwt2d" 4, "hotspot" 5, "nn" 6) noenhanced
plot '/tmp/full2-h200/A-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 300% of HBM" noenhanced
set yrange [-0.6:6.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "dwt2d" 3, "hotspot" 4, "cfd" 5, "nn" 6) noenhanced
plot '/tmp/full2-h200/A-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
