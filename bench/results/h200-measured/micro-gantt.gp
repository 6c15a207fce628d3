set terminal pngcairo size 1000,552
set output '/tmp/full2-h200/micro-gantt.png'
set multiplot layout 2,1 title "Micro-benchmark: 2 vector-add + 2 matrix-multiply processes (paper section 7.1, Figure 6): who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:6440.39]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 300% of HBM" noenhanced
set yrange [-0.6:6.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "vadd-1" 3, "vadd-2" 4, "matmul-1" 5, "matmul-2" 6) noenhanced
plot '/tmp/full2-h200/micro-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 300% of HBM" noenhanced
set yrange [-0.6:6.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "vadd-1" 3, "vadd-2" 4, "matmul-1" 5, "matmul-2" 6) noenhanced
plot '/tmp/full2-h200/micro-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
