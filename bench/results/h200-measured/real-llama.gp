set terminal pngcairo size 900,540
set output '/tmp/full2-h200/real-llama.png'
set title "Real programs: several transformers Llama decoders, replayed from an H200 trace (the paper's LLM case) (simulated)" noenhanced font ',10'
set xlabel 'total footprint, % of HBM'
set ylabel 'throughput, runs per second (log)'
set logscale y
set grid
set key outside right
set datafile missing '?'
set arrow from 100, graph 0 to 100, graph 1 nohead dashtype 2
plot '/tmp/full2-h200/real-llama.dat' using 1:2 with linespoints lw 2 title 'um', '/tmp/full2-h200/real-llama.dat' using 1:3 with linespoints lw 2 title 'alloc', '/tmp/full2-h200/real-llama.dat' using 1:4 with linespoints lw 2 title 'msched', '/tmp/full2-h200/real-llama.dat' using 1:5 with linespoints lw 2 title 'msched-undeclared', '/tmp/full2-h200/real-llama.dat' using 1:6 with linespoints lw 2 title 'exclusive', '/tmp/full2-h200/real-llama.dat' using 1:7 with linespoints lw 2 dashtype 3 title 'ideal'
