set terminal pngcairo size 1000,888
set output '/tmp/full2-h200/multiuser-gantt.png'
set multiplot layout 2,1 title "A shared lab GPU: three users submitting long, medium and short jobs over time: who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:325.845]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 210% of HBM" noenhanced
set yrange [-0.6:12.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "long-1" 3, "medium-1" 4, "short-1" 5, "short-2" 6, "short-3" 7, "short-4" 8, "short-5" 9, "short-6" 10, "medium-2" 11, "long-2" 12) noenhanced
plot '/tmp/full2-h200/multiuser-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 210% of HBM" noenhanced
set yrange [-0.6:12.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "long-1" 3, "medium-1" 4, "short-1" 5, "short-2" 6, "short-3" 7, "short-4" 8, "short-5" 9, "short-6" 10, "medium-2" 11, "long-2" 12) noenhanced
plot '/tmp/full2-h200/multiuser-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
