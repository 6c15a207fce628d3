// `msched bench [SCENARIO...] [--device PROFILE] [--quick] [--out DIR]`:
// runs the benchmark suite on the simulated GPU, printing progress and the
// tables, and writes report.md, results.csv and the plots into DIR.
#pragma once

namespace msched::bench {

// argv[0] is "bench". Returns the process exit status: 0 when every run
// finished with correct results, 1 when one did not, 2 on a usage error.
int BenchMain(int argc, char** argv);

}  // namespace msched::bench
