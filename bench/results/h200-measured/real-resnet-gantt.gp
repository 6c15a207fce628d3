set terminal pngcairo size 1000,664
set output '/tmp/full2-h200/real-resnet-gantt.png'
set multiplot layout 2,1 title "Real programs: several torchvision ResNet-50 training jobs, replayed from an H200 trace (the paper's deep-learning case): who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:87.1269]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 300% of HBM" noenhanced
set yrange [-0.6:8.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "train-1" 3, "train-2" 4, "train-3" 5, "train-4" 6, "train-5" 7, "train-6" 8) noenhanced
plot '/tmp/full2-h200/real-resnet-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 300% of HBM" noenhanced
set yrange [-0.6:8.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "train-1" 3, "train-2" 4, "train-3" 5, "train-4" 6, "train-5" 7, "train-6" 8) noenhanced
plot '/tmp/full2-h200/real-resnet-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
