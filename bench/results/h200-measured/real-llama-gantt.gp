set terminal pngcairo size 1000,664
set output '/tmp/full2-h200/real-llama-gantt.png'
set multiplot layout 2,1 title "Real programs: several transformers Llama decoders, replayed from an H200 trace (the paper's LLM case): who held the GPU (simulated device time)" noenhanced font ',10'
set xrange [0:122.267]
set xlabel 'device time, ms'
set grid xtics
unset key
set style fill solid 1.0 noborder
set title "msched at 300% of HBM" noenhanced
set yrange [-0.6:8.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "llama-1" 3, "llama-2" 4, "llama-3" 5, "llama-4" 6, "llama-5" 7, "llama-6" 8) noenhanced
plot '/tmp/full2-h200/real-llama-gantt-0.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
set title "exclusive at 300% of HBM" noenhanced
set yrange [-0.6:8.6]
set ytics ("link to host (swap-outs)" 0, "link to device (swap-ins)" 1, "GPU idle" 2, "llama-1" 3, "llama-2" 4, "llama-3" 5, "llama-4" 6, "llama-5" 7, "llama-6" 8) noenhanced
plot '/tmp/full2-h200/real-llama-gantt-1.dat' using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35):4 with boxxyerror lc rgb variable
unset multiplot
