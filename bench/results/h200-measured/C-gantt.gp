set terminal pngcairo size 1000,608
set output '/tmp/full2-h200/C-gantt.png'
set multiplot layout 2,1 title "Combination C, hybrid: the four DNNs of B plus one LLM decode (paper Table 3, Figure 7): who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:4419.25]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 300% of HBM" noenhanced
set yrange [-0.6:7.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "resnet" 3, "llama" 4, "densenet" 5, "inception" 6, "vgg" 7) noenhanced
plot '/tmp/full2-h200/C-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 300% of HBM" noenhanced
set yrange [-0.6:7.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "resnet" 3, "vgg" 4, "inception" 5, "densenet" 6, "llama" 7) noenhanced
plot '/tmp/full2-h200/C-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
