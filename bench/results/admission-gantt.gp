set terminal pngcairo size 1000,664
set output '/tmp/fb2/admission-gantt.png'
set multiplot layout 2,1 title "Admission and ordering: two long jobs and four short ones (the coordinator's mixed-job scenario): who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:954.166]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 161% of HBM" noenhanced
set yrange [-0.6:8.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "long-1" 3, "short-1" 4, "short-2" 5, "short-3" 6, "short-4" 7, "long-2" 8) noenhanced
plot '/tmp/fb2/admission-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 161% of HBM" noenhanced
set yrange [-0.6:8.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "long-1" 3, "long-2" 4, "short-1" 5, "short-2" 6, "short-3" 7, "short-4" 8) noenhanced
plot '/tmp/fb2/admission-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
