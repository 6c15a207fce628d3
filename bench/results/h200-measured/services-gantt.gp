set terminal pngcairo size 1000,440
set output '/tmp/full2-h200/services-gantt.png'
set multiplot layout 2,1 title "LLM services: three models answering requests on one GPU, against model swapping: who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:46964.7]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 120% of HBM" noenhanced
set yrange [-0.6:5.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "service-1" 3, "service-2" 4, "service-3" 5) noenhanced
plot '/tmp/full2-h200/services-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "swap at 120% of HBM" noenhanced
set yrange [-0.6:3.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "swap-server" 3) noenhanced
plot '/tmp/full2-h200/services-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
