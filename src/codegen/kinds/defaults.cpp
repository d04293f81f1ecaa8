// defaults: the launch policy's numbers and the measurements behind them (defaults.hpp).
#include "codegen/kinds/defaults.hpp"

#include <array>
#include <string>

#include <fmt/format.h>

#include "lossjit/errors.hpp"

namespace lossjit {
namespace {

using D = Default;
using G = GpuClass;

// "ms" are kernel times of the measured kernel, lower is better; "%" of the memory roofline.
constexpr std::string_view kHistory = "docs/results/performance-history.md";
constexpr std::string_view kRows = "docs/results/issue-12/rows_explore.json";
constexpr std::string_view kAxisRows = "docs/results/issue-29/axis-rows.txt";
constexpr std::string_view kFourthRound = "docs/results/issue-15/session4/README.md";
constexpr std::string_view kRowCache = "docs/results/issue-31/row-cache/README.md";
constexpr std::string_view kRowCluster = "docs/results/issue-31/row-cluster/README.md";
constexpr std::string_view kFewRows = "docs/results/issue-29/stop42/README.md";
constexpr std::string_view kSideCache = "docs/results/issue-29/stop48/README.md";
constexpr std::string_view kAxisRowsLater = "docs/results/issue-29/stop52/round125/axis_shapes-h100-a.txt";
constexpr std::string_view kLongRowClusters = "docs/results/issue-31/stop53/README.md";
constexpr std::string_view kUnrollH200 = "docs/results/issue-31/stop53/round132/h200/unroll.txt";
constexpr std::string_view kUnrollH100 = "docs/results/issue-31/stop53/round132/h100/unroll.txt";
constexpr std::string_view kPrefetch = "docs/results/issue-31/stop54/README.md";
constexpr std::string_view kAloneBlock = "docs/results/issue-31/stop57/README.md";
constexpr std::string_view kPrefetchAlone = "docs/results/issue-31/stop58/README.md";
constexpr std::string_view kWalkAheadTakes = "docs/results/issue-31/stop61/README.md";
constexpr std::string_view kManyWalks = "docs/results/issue-31/stop65/README.md";
constexpr std::string_view kWarpValuesH200 = "docs/results/issue-31/stop66/round210-h200/three.txt";
constexpr std::string_view kSeveralInputsH200 = "docs/results/issue-31/stop72/round237-h200/sweeps.txt";
constexpr std::string_view kWholeWarpRows = "docs/results/issue-31/stop68/README.md";
constexpr std::string_view kPickedTakes = "docs/results/issue-31/stop69/README.md";
constexpr std::string_view kPrefetchAlonePart = "docs/results/issue-31/stop70/README.md";
constexpr std::string_view kResidentGrid = "docs/results/issue-31/stop79/README.md";

constexpr std::array kTable = {
    DefaultRow{D::MapThreads, G::Any, 128,
               "hardsigmoid [4096, 393216] on an H200: 128 threads x 8 elements 100.8% of copy, 256 x 16 97%",
               "docs/results/issue-15/h200-explore/hs.txt"},
    DefaultRow{D::ReductionThreads, G::Any, 256,
               "the five reductions at 87-100% of the read roofline on both GPUs with 256 threads",
               "docs/results/issue-15/h100-final/table.md"},
    DefaultRow{D::GradientThreads, G::Any, 256,
               "smooth L1 + d/dp on an H100: 4.63 ms at 256; larger programs need more than 64 registers a thread",
               kHistory},
    DefaultRow{D::SmallGradientThreads, G::Any, 1024,
               "H100: smooth L1 + d/dp 4.41 ms at 1024 threads, 4.47 at 512, 4.63 at 256; hinge + d/dp, d/dt 3.05 "
               "against 3.06",
               kHistory},
    DefaultRow{D::ColumnsSmallGradientThreads, G::Any, 512,
               "hinge + d/dp, d/dt [32768, 32768], t [32768]: 512 threads x 4 rows H200 2.161 ms against 2.313, "
               "H100 3.040 against 3.052",
               "docs/results/issue-15/session4/h200-final/ab.txt"},
    DefaultRow{D::AlongRowsSmallGradientThreads, G::Any, 512,
               "squared hinge + d/dp, d/dt [32768, 32768], t [32768, 1] on an H200: 2.189-2.200 ms at 512 against "
               "2.270-2.275 at 1024",
               "docs/results/issue-15/session4/h200-final/ab.txt"},
    DefaultRow{D::AlongRowsSmallGradientThreads, G::HopperHbm3, 1024,
               "the same on an H100: 2.988 ms at 1024 against 3.020 at 512", "docs/results/issue-15/session4/h100-final/ab.txt"},
    DefaultRow{D::SixteenBitReductionThreads, G::Any, 512,
               "bfloat16 [32768, 32768] on an H100: smooth L1 1.405 ms at 512 against 1.431-1.436 at 256; hinge 0.709 "
               "against 0.707-0.711",
               "docs/results/issue-13/h100-final/bf16-smooth_l1.txt"},
    DefaultRow{D::CommonPathReductionThreads, G::Any, 512,
               "KL [16384, 16384] on an H200: 0.513-0.517 ms at 512 against 0.528-0.533 at 256",
               "docs/results/issue-15/session3/h200-prefetch/kl.txt"},
    DefaultRow{D::ByRowWarpTeamThreads, G::Any, 512,
               "cross-entropy 32768 x 4096 on an H100: 0.202 ms with 16 warps a block against 0.208 with 8", kRows},
    DefaultRow{D::ByRowBlockTeamThreads, G::Any, 256,
               "cross-entropy 4096 x 131072 on an H100: 0.724 ms with 256-thread blocks against 0.755 with 128", kRows},
    DefaultRow{D::ByRowSideTeamThreads, G::Any, 512,
               "a thread a row, sum over dimension 1 of [128, 4096, 4095]: H100 79.3% at 512 (unroll 16), 42.6% "
               "at 1024 (2 threads a row); H200 65.8 / 30.8; [64, 1000, 8192] H100 90.5 / 42.6", kAxisRows},
    DefaultRow{D::ByRowSideSharedThreads, G::Any, 1024,
               "several threads a row, sum over dimension 0 of [4096, 16384]: H100 92.3% at 1024, 81.8% at 512; "
               "H200 71.0 / 64.5; of [32768, 4224]: H100 96.3 / 49.8, H200 78.6 / 36.8", kAxisRows},
    DefaultRow{D::ByRowSideTeamMinRowsPerSm, G::Any, 32,
               "sum over dimension 0 of [32768, R] on an H100: a warp per strided row at R = 4223, 26.5%; side by "
               "side at 4224 (32 a SM), 50.1%", kAxisRows},
    DefaultRow{D::ByRowSideTeamBlocksPerSm, G::Any, 4,
               "16384 rows: a thread per row (64 blocks) 11.5%, 8 threads per row 44.9%, as many as give 4 blocks a "
               "SM 81.6%", kAxisRows},
    DefaultRow{D::AssumedMultiprocessors, G::Any, 132,
               "an H100's SMs: the source printed without a GPU is the one an H100 would get where the count matters",
               kAxisRows},
    DefaultRow{D::ByRowWarpMaxColumns, G::Any, 8192,
               "a warp per row while a row is a few thousand elements (no block barrier per row); the block beyond", kRows},
    DefaultRow{D::ByRowBlockTeamResidentGrid, G::Any, 0,
               "the rule as set on 2026-11-23 (a block a row up to the slots): on an H100, cross-entropy forward "
               "16384 x 32768 0.750 ms against 0.789 for a resident grid (that day's explore mixes block sizes and "
               "caps); the resident grid alone not measured on an H100 since",
               kRows},
    DefaultRow{D::ByRowBlockTeamResidentGrid, G::HopperHbm3e, 1,
               "H200, forward, a block a slot (4224 blocks) / the resident grid, lossjit_bench --rows in turn (round "
               "277): cosine 16384 x 16384 0.492-0.493 / 0.484-0.485 ms (95.5-95.8 / 97.1-97.3% of the read "
               "roofline), cross-entropy 16384 x 32768 0.497-0.498 / 0.490-0.492 ms; cosine's grid swept (round 276): "
               "0.4898-0.4899 ms at 4224 blocks, 0.4843-0.4882 at 1024-2048, 0.4827 at 528 (resident); fused "
               "values and gradients it changes (bfloat16 cross-entropy, 50257 columns, distillation; round 278): "
               "the same within the spread",
               kResidentGrid},
    DefaultRow{D::SmallGradientProgramNodes, G::Any, 64,
               "1024 threads leave 64 registers a thread: only programs this small fit without spilling", kHistory},
    DefaultRow{D::ShortElementProgram, G::Any, 4,
               "MSE (2 applications) and hinge (3) stream best at 16 accesses, smooth L1 (9) at 8",
               "docs/results/issue-15/h200-explore/sl1.txt"},
    DefaultRow{D::ColumnsSmallThreadsPerSm, G::Any, 1024,
               "hinge + d/dp, d/dt, columns loop at 512 x 4: 100 registers (one block per SM); capped, 64 without "
               "spills (float32 only: float64 spilled 100 bytes, bfloat16 24)",
               kFourthRound},
    DefaultRow{D::ByRowWarpOneInputMaxRegisters, G::Any, 255,
               "ptxas's own limit, no bound: an H100's 512 x 8 was measured without one (loss, z-loss and accuracy, "
               "one block an SM at 78 registers, the best or within 0.1%)",
               kUnrollH100},
    DefaultRow{D::ByRowWarpOneInputMaxRegisters, G::HopperHbm3e, 64,
               "512 x 8 on an H200 without a bound: loss, z-loss and accuracy 78 registers, one block an SM, 84.1% of "
               "the read roofline against 88.4 at 512 x 4; bounded to 64 (no local memory) 0.1346 / 0.1352 / 0.1341 ms "
               "against 512 x 4's 0.1375 / 0.1418 / 0.1353 at 32768 x 4096 / 65536 x 2048 / 16384 x 8192",
               kWarpValuesH200},
    DefaultRow{D::ByRowBlockSeveralInputsMaxRegisters, G::Any, 255,
               "ptxas's own limit, no bound: the H100's cosine and triplet forwards at 256 x 4 (73-76 registers, three "
               "blocks an SM) ran at 96.9 and 96.6% of the read roofline (stop 65); not measured bounded there",
               kRows},
    DefaultRow{D::ByRowBlockSeveralInputsMaxRegisters, G::HopperHbm3e, 64,
               "an H200, 16384 x 16384 at 256 x 4, % of the read roofline unbounded -> bounded to 64 (four blocks an "
               "SM, no local memory): cosine 93.7 -> 97.0-97.1 (73 -> 61 registers), triplet 97.7-97.9 (76 -> 64), a "
               "row MSE 96.7 -> 97.3 (64 -> 54); bounded to 48 (five blocks) cosine 95.4-95.6, triplet spills",
               kSeveralInputsH200},
    DefaultRow{D::ShortReductionAccesses, G::Any, 16,
               "MSE on an H100: unroll 8 (16 accesses over 2 streams) 2.745 ms against 2.802 at 4",
               "docs/results/issue-15/h100-2026-11-23/bench.log"},
    DefaultRow{D::LongReductionAccesses, G::Any, 8,
               "smooth L1 on an H200: unroll 8 took 88 registers, 95.5% against 99.4% at 4",
               "docs/results/issue-15/h200-explore/sl1.txt"},
    DefaultRow{D::MapAccesses, G::Any, 4,
               "hardsigmoid on an H200: unroll 2 (input and output stream) 100.8% of copy, 4 at 256 threads 97%",
               "docs/results/issue-15/h200-explore/hs.txt"},
    DefaultRow{D::MapBackwardAccesses, G::Any, 8,
               "a map's backward reads the upstream gradient too: twice a map's accesses", kHistory},
    DefaultRow{D::SixteenBitAccesses, G::Any, 4,
               "bfloat16 [8192, 32768] on an H100, vector 8: unroll 2 against 8: hinge 0.182 ms against 0.184, "
               "smooth L1 0.356 against 0.411, mse 0.351 against 0.347",
               "docs/results/issue-13/vw8/bf16-sweep-vector-unroll.txt"},
    DefaultRow{D::GradientUnrollLimit, G::Any, 2,
               "smooth L1 + d/dp on an H200: unroll 2 3.67 ms, 8 5.18 ms (registers cut occupancy)", kHistory},
    DefaultRow{D::TranscendentalUnrollLimit, G::Any, 2,
               "KL on an H100: unroll 2 3% faster than 8 (bound by arithmetic)", kHistory},
    DefaultRow{D::CommonPathUnrollLimit, G::Any, 4,
               "KL on the logs' common path: H200 0.528-0.532 ms at 4 against 0.539-0.543 at 2; H100 0.713-0.715 "
               "against 0.719-0.720",
               kHistory},
    DefaultRow{D::ColumnsSmallUnroll, G::Any, 4,
               "hinge + d/dp, d/dt, columns loop: 512 threads x 4 rows against 1024 x 2 (as ColumnsSmallGradientThreads)",
               "docs/results/issue-15/session4/h100-final/ab.txt"},
    DefaultRow{D::ByRowUnrollOneInput, G::Any, 2,
               "a block a row, cross-entropy's forward 16384 x 32768 / 4096 x 131072 on an H200: 0.4934-0.4948 / "
               "0.4921-0.4930 ms at 2, 0.4934-0.4949 / 0.5108-0.5109 at 4, 0.5063-0.5076 / 0.4932-0.4954 at 8 (H100: "
               "8 within 0.6% of 2; 2026-11-25's kernels, warps too: 0.202 ms at 2 against 0.219 at 4)",
               kUnrollH200},
    DefaultRow{D::ByRowWarpUnrollOneInput, G::Any, 4,
               "a warp a row, cross-entropy's forward 32768 x 4096 on an H200 (2026-11-27; its own row below since): "
               "0.1290-0.1297 ms at 4, 0.1297-0.1306 at 8, 0.1316-0.1318 at 2; logsumexp(x, -1) - x[y]: 0.1261-0.1264 "
               "at 4, 0.1290-0.1295 at 2; loss, z and accuracy 0.1447-0.1455 at 4, 0.1516-0.1523 at 8 (h200/heavier.txt "
               "beside)",
               kUnrollH200},
    DefaultRow{D::ByRowWarpUnrollOneInput, G::HopperHbm3, 8,
               "the same on an H100: 0.1835-0.1848 ms at 8, 0.1868-0.1880 at 4, 0.1884-0.1914 at 2; logsumexp(x, -1) - "
               "x[y]: 0.1826-0.1833 at 8, 0.1880-0.1911 at 2; loss, z and accuracy and focal at 8 the best or within "
               "0.1% (h100/heavier.txt beside)",
               kUnrollH100},
    DefaultRow{D::ByRowWarpUnrollOneInput, G::HopperHbm3e, 8,
               "an H200, values of one input, at most 64 registers a thread (ByRowWarpOneInputMaxRegisters), "
               "against 512 x 4: cross-entropy 32768 x 4096 0.1287-0.1291 ms against 0.1314-0.1324, label smoothing "
               "0.1329 against 0.1408-0.1415, bfloat16 logits 0.0899 against 0.1050; of 24 programs and shapes 15 "
               "faster by 1.3-24%, none slower by more than 1.2% (the sweep of 256-1024 threads x 4-8: "
               "stop66/round208-h200)",
               kWarpValuesH200},
    DefaultRow{D::ByRowUnrollSeveralInputs, G::Any, 4, "cosine and triplet (two and three inputs along the row): 4", kRows},
    DefaultRow{D::ByRowSideTeamUnroll, G::Any, 8,
               "16384 rows side by side on an H100, 8 threads a row: 81.6% at unroll 8; a thread a row writing every "
               "element (RMS norm over dim 1): H100 58.9% at 8, 59.1% at 16 (spills), H200 6.93 ms at 8, 7.99 at 16",
               kAxisRows},
    DefaultRow{D::ByRowSideAloneUnroll, G::Any, 8,
               "H100, a thread a row, 2026-11-27: sum over dim 1 of [128, 4096, 4095] 87-88% of the copy rate at 8, "
               "73% at 16, 83-84% at 4; of [64, 1000, 8192] 99 / 90-91 / 90-91; of [256, 512, 4096] 96-100 / 92-94 / "
               "88-90 (16 was chosen on 2026-11-25's kernel, where 8 ran at half the rate)",
               kAxisRowsLater},
    DefaultRow{D::ByRowSideAloneCompareUnroll, G::Any, 4,
               "H100, a thread a row, 2026-11-27: amax over dim 1 of [128, 4096, 4095] 82% at 4, 77-78% at 8, 73% at 16; "
               "of [64, 1000, 8192] 99-100 / 94-95 / 90; argmax 82-83 / 78 / 86-87 and 99-100 / 95-96 / 99 (2026-11-25: "
               "argmax 73.7 / 71.0 / 60.3, 90 registers)",
               kAxisRowsLater},
    DefaultRow{D::ByRowCachedThreads, G::Any, 512,
               "H100, value + gradient with the row cache: cosine 16384 x 16384 96.0% of the floor at 512 threads "
               "(unroll 4), 46.7% at 1024; cross-entropy 16384 x 32768 71.6% at 512 (unroll 8), 64.4% at 256; "
               "softmax 32768 x 4096 89.3% at 512 (unroll 8), 72.9% at 256",
               kRowCache},
    DefaultRow{D::ByRowAloneGradientThreads, G::Any, 1024,
               "value + gradient, % of the floor at 512 / 1024 threads: H100 cross-entropy 16384 x 32000 62.6-87.6 / "
               "85.4-94.0, with z-loss and accuracy 62.4-64.5 / 91.7-92.7, focal 77.2-77.6 / 85.8-87.0, distillation "
               "24.2-24.7 / 58.5-58.8, 16384 x 32768 92.8 / 92.9; H200 cross-entropy 16384 x 32000 67.2-69.3 / "
               "77.4-77.9, 16384 x 32768 73.6-77.4 / 80.8-81.4; not with light element work: cosine H200 81.8-82.8 / "
               "79.7-81.2",
               kAloneBlock},
    DefaultRow{D::ByRowCachedBytesInFlight, G::Any, 65536,
               "H100, float32 in vectors of 4 (16 bytes): cross-entropy 32768 x 4096 value + gradient 83.1% at 512 "
               "threads x unroll 8 x 1 input (64 KB), 79.9% at 512 x 4; cosine 96.4% at 512 x 4 x 2 inputs (64 KB), "
               "59.2% at 512 x 8 x 2; softmax 16384 x 32768 84.0% at 512 x 8, 74.4% at 512 x 4",
               kRowCache},
    DefaultRow{D::ByRowCachedValuesPerThread, G::Any, 32,
               "H100, 512 threads: float32 softmax 32768 x 4096 at unroll 8 x vector 4 (32 values) 119-128 registers, "
               "no spill, 89.8%; bfloat16 at 16 x 4 (64) 288 bytes spilled, 26.5% against 54.4% without the cache. "
               "More threads a block, as many fewer values (by_rows.cpp): H200 (stop 61, round 184, "
               "docs/results/issue-31/stop61), bfloat16 cross-entropy value + gradient 16384 x 32768 at 1024 x 8 x 4 "
               "(32 values, 168 bytes a thread in local memory) 40.3% of the floor, at 1024 x 4 x 4 with the cache "
               "48.8%, without it (what the rule then gives) 54.2%",
               kRowCache},
    DefaultRow{D::ByRowCachedValuesManyWalks, G::Any, 16,
               "H100, distillation's value + gradient (3 walks, s and t cached, exp at each element), ms at 32 "
               "values a thread (the rule above) against 16: 32768 x 4096 1.485 / 1.042 (128 threads x unroll 4, "
               "159 registers, against 256 x 2), 16384 x 8192 1.252 / 1.016 (at 32: 48 bytes a thread of local "
               "memory), 8192 x 1000 0.216 / 0.129 (at 32: 40 bytes); soft-target cross-entropy (2 walks) unchanged "
               "by 16 at 32768 x 4096 and 16384 x 8192 (0.592 / 0.594, 0.586 / 0.585), slower at 8192 x 1000 (0.073 "
               "/ 0.067): not for 2 walks",
               kManyWalks},
    DefaultRow{D::ByRowCacheMinShare, G::Any, 4,
               "H100, cross-entropy 4096 x 131072 (43% of the row kept) value + gradient 65.7% of the floor against "
               "62.2% without; triplet 32768 x 8192 (28%) 69.1% against 64.1%",
               kRowCache},
    DefaultRow{D::ByRowCacheWarpMinShare, G::Any, 2,
               "H100 value + gradient: triplet 32768 x 8192, warps keeping 14% of their rows 64.0% of the floor, the "
               "block the whole row 95.7%; cross-entropy 32768 x 4096, warps keeping 85% 83.2%, the block the whole "
               "row 76.4%",
               kRowCache},
    DefaultRow{D::ByRowWarpWholeRows, G::Any, 0, "not measured beyond the H200 (the H100 keeps 16 warps)", kWholeWarpRows},
    DefaultRow{D::ByRowWarpWholeRows, G::HopperHbm3e, 1,
               "H200 value + gradient, ms, 16 warps keeping part of each row / fewer keeping them whole (round 217): "
               "cross-entropy 32768 x 4096 (89% kept / 12 warps) 0.333-0.360 / 0.308-0.339, lossjit_bench --rows "
               "79.0-82.1% / 86.7-87.7% of the floor; 24576 x 6144 (59% / 8) 0.420-0.439 / 0.386-0.406; class "
               "weights 0.346-0.373 / 0.320-0.354, 0.432-0.435 / 0.404-0.410; 20480 x 5120 (71% / 8) -3% to +3%; "
               "softmax's forward 32768 x 4096 0.2968 / 0.2721 (round 218); 14 warps (whole, uneven among the "
               "schedulers) 0.343-0.358 against 16's 0.337-0.350 (round 215)",
               kWholeWarpRows},
    DefaultRow{D::ByRowWarpWholeRowsMinWarps, G::Any, 8,
               "H200, cross-entropy value + gradient: 16384 x 8192 at 7 warps keeping whole rows 0.391-0.396 ms, 8 "
               "keeping 88% 0.383-0.385, a block of 256 a row 0.346-0.353; 32768 x 4096 at 8 warps 0.356 (12: 0.311)",
               kWholeWarpRows},
    DefaultRow{D::ByRowBlockTeamMinThreads, G::Any, 128,
               "H100 forward + backward, a block a row with the row cache (round 112): layer norm 32768 x 4096 "
               "1.36-1.49 ms at 128 threads, 1.63-1.70 at 256, 2.23-2.32 at 512; softmax 1.19-1.30 at 128, "
               "1.35-1.45 at 512; layer norm's forward over 16384 x 8192 0.41-0.43 at 128, 0.48 at 512",
               kRowCache},
    DefaultRow{D::ByRowClusterBlocksPerSm, G::Any, 2,
               "H200, clusters asked for, each block's share at most half the SM's shared memory and 64 registers: "
               "RMS norm 16384 x 32768 83.2% of the floor in clusters of 2 against 76.9% a block a row; log_softmax "
               "4096 x 131072 71.9% in 4, 56.5% in 8, 63.6% a block a row; cross-entropy 16384 x 32768 value + "
               "gradient 56.1% in 2, 56.2% a block a row",
               kRowCluster},
    DefaultRow{D::ByRowClusterLongRowShare, G::Any, 2,
               "cross-entropy value + gradient 4096 x 131072 (a block keeps 43% of its row): a block a row 66.2% of "
               "the floor on an H100, 56.4% on an H200; clusters of 2 (44% of each share kept) 73.0 / 65.2%, 4 (82%) "
               "82.0 / 69.0%, 8 (all) 75.8 / 58.5%; softmax 4096 x 393216 in clusters of 8 with the cache 74.7% "
               "against 63.5% without (H100, round 103)",
               kLongRowClusters},
    DefaultRow{D::ByRowClusterFewRowsShare, G::Any, 2,
               "H100, layer norm of 16 rows of 4M (KernelBench 40): a block a row 1.850 ms (10.5% of the copy rate), "
               "clusters of 8 0.376 ms (51.5%), 4 0.534, 2 0.983; cross-entropy 64 x 262144 forward 0.120 -> 0.058 ms; "
               "with more rows than half the SMs a block a row already keeps every SM busy",
               kFewRows},
    DefaultRow{D::ByRowClusterMinTiles, G::Any, 4,
               "not measured: a guard that each block of a cluster walks a few tiles of its row (rows that short are "
               "a launch's work, not a row's)",
               kFewRows},
    DefaultRow{D::ByRowPrefetch, G::Any, 0,
               "value + gradient, % of the floor without / with: cross-entropy 16384 x 32768 H100 90.0-90.9 / "
               "85.7-85.9, H200 66.9-67.1 / 65.6-66.2; 32768 x 4096 (warps) H100 84.4-85.0 / 78.9-81.2, H200 "
               "76.7-78.3 / 73.9-74.2; cosine H100 95.7-96.7 / 93.1-93.2; softmax 8192 x 16384 H200 90.8-91.1 / "
               "86.5; layer norm 32768 x 4096 (warps) H100 88.5 / 83.1-83.9, H200 73.5-73.9 / 76.2",
               kPrefetch},
    DefaultRow{D::ByRowPrefetchCentered, G::Any, 1,
               "layer norm, a block a row, % of the copy rate without / with: 16384 x 32768 H100 83.7 / 93.7; "
               "8192 x 16384 H100 86.3 / 88.9-89.3, H200 67.9-68.1 / 77.5; forward + backward from Python "
               "8192 x 16384 H100 1.173-1.174 / 1.104-1.107 ms",
               kPrefetch},
    DefaultRow{D::ByRowPrefetchAlone, G::Any, 0,
               "H100 value + gradient, % of the floor without / with (round 163): cross-entropy 16384 x 32768 at 1024 "
               "threads 95.4-95.6 / 92.0-92.1, at 512 95.1-95.4 / 85.8-86.1; cosine 95.3-96.2 / 92.1-92.6",
               kAloneBlock},
    DefaultRow{D::ByRowPrefetchAlone, G::HopperHbm3e, 1,
               "H200, % of the floor without / with (round 169): value + gradient cross-entropy 16384 x 32000 78.9 / "
               "84.2, 16384 x 32768 80.2-82.2 / 80.7-83.7, 8192 x 49152 77.9 / 83.2; class weights 65.7-68.0 / "
               "81.6-83.7; z-loss and accuracy 74.3 / 79.3; focal 70.2-72.0 / 70.8-75.5; cosine 82.2 / 83.3-84.5; "
               "the rule against the library before it (round 170): cross-entropy 16384 x 32768 81.2-81.3 / "
               "83.2-83.8, cosine 82.0-82.4 / 84.0-85.6; not where two blocks "
               "share an SM (triplet 32768 x 8192 91.0 / 84.4) or a row is kept in part (distillation 42.0-42.4 / "
               "40.2-42.6)",
               kPrefetchAlone},
    DefaultRow{D::ByRowPrefetchAlonePart, G::Any, 0,
               "not measured beyond the H200 (where the H100 keeps a row alone on its SM it copies nothing ahead: "
               "ByRowPrefetchAlone)",
               kPrefetchAlonePart},
    DefaultRow{D::ByRowPrefetchAlonePart, G::HopperHbm3e, 1,
               "H200, value + gradient over 8192 x 65536 (1024 threads keep 86% of each row), % of the floor without "
               "/ with (bench/row_variants.py, in turn; round 227, two rounds): cross-entropy 75.0-75.1 / 78.5-79.1; "
               "(round 228, one round) cross-entropy 71.0 / 73.7, label smoothing 69.0 / 74.6, class weights 65.6 / "
               "72.7, z-loss and accuracy 71.2 / 78.4, focal 70.8 / 78.9; main / the rule (round 229, each library in "
               "turn): cross-entropy 74.6 / 77.1, label smoothing 71.9 / 75.2, class weights 69.1 / 71.5, z-loss and "
               "accuracy 72.5 / 75.2, focal 70.6 / 75.7. Not two inputs kept in part (distillation 16384 x 32000, "
               "round 169: 42.0-42.4 / 40.2-42.6), nor maps (not measured)",
               kPrefetchAlonePart},
    DefaultRow{D::ByRowWalkAheadMaxThreads, G::Any, 512,
               "H200, % of the floor with the copies / walked ahead (rounds 177-178): 1 - cosine 16384 x 16384 at 512 "
               "threads 83.5-85.0 / 90.2-91.7; at 1024 threads cross-entropy 16384 x 32768 83.2-83.4 / 82.1-83.3, "
               "16384 x 32000 84.8 / 79.4, class weights 16384 x 32768 83.5-83.7 / 69.8-72.4, focal 70.2-71.5 / "
               "65.5-66.6 (a hand-written kernel of that schedule: 93.8% of the copy rate; the printed walk needs 81 "
               "registers, it 64); the H100 not measured. Stop 61, the take read by its lane (round 186, committed "
               "/ walked ahead at 1024): cross-entropy 16384 x 32768 81.3-82.4 / 82.8-83.6, 16384 x 32000 80.8-87.0 / "
               "82.0-84.5, class weights 79.6-82.8 / 70.7-70.9, focal 70.6-71.4 / 61.7-65.2 (stop 59: "
               "docs/results/issue-31/stop59/README.md). Stop 62, the take's parity without a division (round 189, "
               "docs/results/issue-31/stop62/README.md): "
               "cross-entropy 16384 x 32768 77.1-80.4 / 83.0-84.0, 16384 x 32000 78.7-84.1 / 82.0-82.6, class "
               "weights 77.4-82.5 / 68.1-70.4, focal 66.9-72.4 / 62.4-64.5",
               kWalkAheadTakes},
    DefaultRow{D::ByRowWalkAheadPickedMaxThreads, G::Any, 512,
               "not measured beyond the H200 (where the H100 keeps a row alone on its SM it copies nothing ahead: "
               "ByRowPrefetchAlone)",
               kPickedTakes},
    DefaultRow{D::ByRowWalkAheadPickedMaxThreads, G::HopperHbm3e, 1024,
               "H200, 1024 threads, % of the floor with the copies / walked ahead with the take picked out of the "
               "walk (stop 62's P12; rounds 220-221, each library in turn): cross-entropy 16384 x 32768 81.8-83.0 / "
               "82.1-85.8 (bench/row_variants.py), 83.0-84.3 / 87.0-87.7 (lossjit_bench --rows); 16384 x 32000 "
               "81.4-85.2 / 81.9-85.9; 8192 x 49152 80.1-85.3 / 87.6-89.6. Walked ahead with a take its owner reads "
               "at the row's start: class weights (w[y]) 79.4-83.9 / 67.2-70.3, label smoothing ((x - lse)[y]) "
               "73.9-78.2 / 69.2-72.3, focal 76.9-81.5 / 69.2-72.5",
               kPickedTakes},
    DefaultRow{D::ByRowSideCachedThreads, G::Any, 64,
               "H100, RMS norm over the 64 features of [8, 64, 512, 512] with the cache, unroll 8: 89.0% of the copy "
               "rate at 64 threads (13 blocks an SM), 88.0% at 128, 88.8% at 256; 63.9% without the cache",
               kSideCache},
    DefaultRow{D::ByRowSideCachedUnroll, G::Any, 8,
               "H100, the same at 64 threads: 89.0% at unroll 8, 73.8% at 16 (96 bytes spilled: registers for 13 "
               "blocks), 49.2% at 32",
               kSideCache},
    DefaultRow{D::ByRowSideCachedMinThreadsPerSm, G::Any, 384,
               "H100, RMS norm with the cache against without: 64 features (832 threads an SM) 89.0% / 63.9%, 128 "
               "(384) 75.8% / 63.7%, 256 (192) 49.0% / 62.3%; log_softmax over 100 classes (512) 81.9% / 63.6%",
               kSideCache},
    DefaultRow{D::ByRowSideCachedMinRegisters, G::Any, 64,
               "H100, K-dimensional cross-entropy over the 21 classes of [16, 21, 512, 512], value + gradient, "
               "registers for 32 blocks of 64 (32 a thread): 1.257 ms with the cache, 0.779 without; RMS norm with "
               "72 registers (13 blocks) 89.0%",
               kSideCache},
};

}  // namespace

GpuClass gpu_class(const GpuFacts& gpu) {
    if (gpu.arch != 90) return GpuClass::Any;
    constexpr double kHbm3eBytesPerSecond = 4.0e12;
    constexpr std::int64_t kHbm3eMemoryBytes = std::int64_t{100} << 30;
    const bool hbm3e = gpu.memory_bytes_per_second > 0 ? gpu.memory_bytes_per_second >= kHbm3eBytesPerSecond
                                                       : gpu.memory_bytes >= kHbm3eMemoryBytes;
    return hbm3e ? GpuClass::HopperHbm3e : GpuClass::HopperHbm3;
}

std::span<const NamedGpu> named_gpus() {
    // What the driver reports (CU_DEVICE_ATTRIBUTE_*; runtime/kernels.cpp, open_device): 227 KB of
    // shared memory a block may opt in to, 2048 threads an SM; the bandwidth from the memory clock
    // and bus width (any value on the right side of 4 TB/s gives the same class).
    static constexpr std::array kGpus = {
        NamedGpu{"h100", "NVIDIA H100 SXM: sm_90, 132 SMs, 80 GB of HBM3",
                 GpuFacts{.arch = 90, .multiprocessors = 132, .l2_bytes = 50LL << 20, .memory_bytes = 80LL << 30,
                          .memory_bytes_per_second = 3.35e12, .shared_bytes_per_block = 227 * 1024, .threads_per_sm = 2048}},
        NamedGpu{"h200", "NVIDIA H200 SXM: sm_90, 132 SMs, 141 GB of HBM3e",
                 GpuFacts{.arch = 90, .multiprocessors = 132, .l2_bytes = 50LL << 20, .memory_bytes = 141LL << 30,
                          .memory_bytes_per_second = 4.8e12, .shared_bytes_per_block = 227 * 1024, .threads_per_sm = 2048}},
    };
    return kGpus;
}

GpuFacts named_gpu_facts(std::string_view name) {
    if (name.empty()) return {};
    std::string known;
    for (const NamedGpu& gpu : named_gpus()) {
        if (gpu.name == name) return gpu.facts;
        known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", gpu.name, gpu.description);
    }
    throw UsageError(fmt::format("unknown GPU '{}': lossjit chooses kernels without a GPU for {}", name, known));
}

std::string_view to_string(GpuClass gpu) {
    switch (gpu) {
        case GpuClass::Any: return "any GPU";
        case GpuClass::HopperHbm3: return "Hopper with HBM3 (H100)";
        case GpuClass::HopperHbm3e: return "Hopper with HBM3e (H200)";
    }
    throw InternalError("to_string: invalid GpuClass");
}

std::span<const DefaultRow> default_table() { return kTable; }

int default_value(Default what, const GpuFacts& gpu) {
    const GpuClass cls = gpu_class(gpu);
    const DefaultRow* any = nullptr;
    for (const DefaultRow& row : kTable) {
        if (row.what != what) continue;
        if (row.gpu == cls) return row.value;
        if (row.gpu == GpuClass::Any) any = &row;
    }
    if (!any) throw InternalError("a launch default without a row for any GPU");
    return any->value;
}

std::string_view to_string(Default what) {
    switch (what) {
        case D::MapThreads: return "map threads";
        case D::ReductionThreads: return "reduction threads";
        case D::GradientThreads: return "gradient threads";
        case D::SmallGradientThreads: return "small gradient threads";
        case D::ColumnsSmallGradientThreads: return "columns small gradient threads";
        case D::AlongRowsSmallGradientThreads: return "along-rows small gradient threads";
        case D::SixteenBitReductionThreads: return "16-bit reduction threads";
        case D::CommonPathReductionThreads: return "common-path reduction threads";
        case D::ByRowWarpTeamThreads: return "by-row warp-team threads";
        case D::ByRowWarpOneInputMaxRegisters: return "by-row warp-team values of one input, registers a thread at most";
        case D::ByRowBlockSeveralInputsMaxRegisters: return "by-row block-team reductions of several inputs, registers a thread at most";
        case D::ByRowBlockTeamThreads: return "by-row block-team threads";
        case D::ByRowWarpMaxColumns: return "by-row warp max columns";
        case D::ByRowBlockTeamResidentGrid: return "by-row block teams on a resident grid beyond the slots";
        case D::ByRowSideTeamThreads: return "by-row side-by-side threads";
        case D::ByRowSideSharedThreads: return "by-row side-by-side threads, several a row";
        case D::ByRowSideTeamMinRowsPerSm: return "by-row side-by-side min rows per SM";
        case D::ByRowSideTeamBlocksPerSm: return "by-row side-by-side blocks per SM";
        case D::AssumedMultiprocessors: return "assumed multiprocessors";
        case D::ByRowSideTeamUnroll: return "by-row side-by-side unroll";
        case D::ByRowSideAloneUnroll: return "by-row side-by-side unroll, a thread per row";
        case D::ByRowSideAloneCompareUnroll: return "by-row side-by-side unroll, a thread per row, amax, amin, argmax or argmin";
        case D::SmallGradientProgramNodes: return "small gradient program nodes";
        case D::ShortElementProgram: return "short element program";
        case D::ColumnsSmallThreadsPerSm: return "columns small threads per SM";
        case D::ShortReductionAccesses: return "short reduction accesses";
        case D::LongReductionAccesses: return "long reduction accesses";
        case D::MapAccesses: return "map accesses";
        case D::MapBackwardAccesses: return "map backward accesses";
        case D::SixteenBitAccesses: return "16-bit accesses";
        case D::GradientUnrollLimit: return "gradient unroll limit";
        case D::TranscendentalUnrollLimit: return "transcendental unroll limit";
        case D::CommonPathUnrollLimit: return "common-path unroll limit";
        case D::ColumnsSmallUnroll: return "columns small unroll";
        case D::ByRowUnrollOneInput: return "by-row unroll, one input";
        case D::ByRowWarpUnrollOneInput: return "by-row unroll, one input, a warp a row";
        case D::ByRowCachedThreads: return "by-row threads with a row cache";
        case D::ByRowAloneGradientThreads: return "by-row value-and-gradient threads of a block alone on its SM";
        case D::ByRowBlockTeamMinThreads: return "by-row fewest threads of a block a row with a row cache";
        case D::ByRowWarpWholeRows: return "by-row row cache, fewer warps keeping whole rows";
        case D::ByRowWarpWholeRowsMinWarps: return "by-row row cache, least warps keeping whole rows";
        case D::ByRowCachedBytesInFlight: return "by-row bytes in flight with a row cache";
        case D::ByRowCachedValuesPerThread: return "by-row loaded values a thread with a row cache";
        case D::ByRowCachedValuesManyWalks: return "by-row loaded values a thread with a row cache, many heavy walks";
        case D::ByRowCacheMinShare: return "by-row row cache, least share of the row";
        case D::ByRowCacheWarpMinShare: return "by-row row cache, least share of a warp's row";
        case D::ByRowClusterBlocksPerSm: return "by-row row cache, blocks an SM with row clusters";
        case D::ByRowClusterLongRowShare: return "by-row row cache, clusters for rows a block keeps under 1 / this of";
        case D::ByRowClusterFewRowsShare: return "by-row row clusters for rows fewer than SMs / this";
        case D::ByRowClusterMinTiles: return "by-row row clusters, least tiles a block";
        case D::ByRowPrefetch: return "by-row row cache, next row prefetched";
        case D::ByRowPrefetchCentered: return "by-row row cache, next row prefetched with a centered accumulator";
        case D::ByRowPrefetchAlone: return "by-row row cache, next row prefetched by a block alone on its SM";
        case D::ByRowPrefetchAlonePart:
            return "by-row row cache, next row prefetched by a block alone on its SM keeping one input's row in part";
        case D::ByRowWalkAheadMaxThreads: return "by-row row prefetch, most threads a block that walks the next row ahead";
        case D::ByRowWalkAheadPickedMaxThreads:
            return "by-row row prefetch, most threads a block that walks the next row ahead, its takes picked";
        case D::ByRowSideCachedThreads: return "by-row side-by-side threads with a row cache";
        case D::ByRowSideCachedUnroll: return "by-row side-by-side unroll with a row cache";
        case D::ByRowSideCachedMinThreadsPerSm: return "by-row side-by-side row cache, least threads an SM";
        case D::ByRowSideCachedMinRegisters: return "by-row side-by-side row cache, least registers a thread";
        case D::ByRowUnrollSeveralInputs: return "by-row unroll, several inputs";
        case D::Count_: break;
    }
    throw InternalError("to_string: invalid Default");
}

bool is_switch(Default what) {
    return what == D::ByRowPrefetch || what == D::ByRowPrefetchCentered || what == D::ByRowPrefetchAlone ||
           what == D::ByRowPrefetchAlonePart ||
           what == D::ByRowWarpWholeRows || what == D::ByRowBlockTeamResidentGrid;
}

}  // namespace lossjit
