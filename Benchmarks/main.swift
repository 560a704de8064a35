// Benchmarks: the Promises library against hand-written baselines, measured in the same run.
//
//   swift run -c release Benchmarks [--filter SUBSTRING] [--json] [--smoke] [--samples N]
//
//   --filter SUBSTRING  run only cases whose name ("workload/variant", e.g. "chain/promise") contains
//                       it; a full name runs just that case. Ratios need the workload's `dispatch`
//                       case: filter on a workload name ("--filter contention") to keep it.
//   --json              a JSON array on stdout, one object per case: name, workload, variant, unit,
//                       units_per_sample, median_ns, p90_ns (ns per unit), baseline, ratio_to_baseline, samples,
//                       checksum, peak_rss_bytes, peak_rss_growth_bytes, bytes_per_link (deep-chain
//                       only, else null), optimized, error, megabytes_per_second and
//                       throughput_ratio_to_baseline (transfer only, else null). Progress and the
//                       total checksum go to stderr.
//   --smoke             every case once, tiny sizes, no warm-up: proves the executable completes (CI).
//   --samples N         exactly N timed samples per case (deep-chain: at most its default of 3).
//                       Without it each workload has its own sample count, and a case stops sampling
//                       after ~8 s once it has 5 samples, so a slow build cannot stretch the run.
//   Exit status: 0, or 1 if a case failed (wrong result, timeout, error, memory above a
//   workload's limit), 2 for bad arguments.
//
// HOW A CASE IS MEASURED
//   A case has an untimed setup (e.g. creating the pending inputs) and a timed body. The body runs a
//   few times to warm up, then N samples are timed with ContinuousClock. The cases of one workload
//   are sampled in rounds (sample 1 of each case, then sample 2, …, each round in a new shuffled
//   order), so the drift of a busy machine hits them all alike, no case always follows the same
//   neighbour, and their ratios stay comparable. A sample does `units` units
//   of work; the table shows nanoseconds per unit, median and 90th percentile over the samples. The
//   body returns a value derived from its work (the tail's value, a sum reported by every callback,
//   an order-sensitive sum of `all`'s array); it must equal the expected value, else the case FAILS,
//   and it is summed into a checksum printed at the end, so nothing can be optimised away.
//   A debug build prints a loud banner on stderr: its numbers are meaningless.
//
// VARIANTS (the same workload, each implemented the natural way)
//   promise          our Promise; callbacks on a serial queue we create: `then(on: callbackQueue)`.
//   promise-default  our Promise; callbacks on the library's default queue (`then` without `on:`).
//   inline           hand-written completion closures called inline, no queue and (where one thread
//                    suffices) no lock: the floor, what the bare bookkeeping costs.
//   dispatch         hand-written `DispatchQueue.async` on one serial queue, the same shape: THE
//                    baseline of the ratio.
//   async-…          async/await in one Task, the closest fair equivalent (named for what it does).
//   handoff-floor    (resolved-then) a hand-written batched hand-off with a promise's allocations
//                    and nothing else: what batching alone can reach (see HandoffFloor.swift).
//
// RATIO  "× dispatch" = median ns/unit of the case ÷ median ns/unit of the same workload's
//   `dispatch` case in this run. 1.00 = costs what hand-written Dispatch costs; 2.00 = twice as
//   much; below 1 = cheaper. Ratios, not absolute numbers, are comparable between runs and machines.
//
// WORKLOADS (per-unit cost; full sizes, smoke sizes are tiny)
//   1 one-link       pending promise, one `then`, fulfil, block in `wait(timeout:)` until the
//                    callback ran; 1,000 sequential round trips per sample (ns per op). dispatch:
//                    `queue.async` + semaphore; async-task: `await Task { … }.value`.
//   2 chain          1,000 `then` links on one pending promise on ONE serial queue, fulfil the head,
//                    wait for the tail (ns per link; building the chain is timed). dispatch: a
//                    1,000-hop chain, each hop async-dispatching the next to the same serial queue;
//                    async-call: a loop of awaits on a non-suspending async function (the floor);
//                    async-yield: a loop of `await Task.yield()` (one executor hop per link).
//                    After its table, "chain, phase by phase" takes the promise and the Dispatch
//                    chain apart (ChainPhases.swift): building the links, the wake-up of the queue's
//                    thread before the first link, the links themselves (ns per link), and the
//                    wake-up of the waiting thread after the last; "link work" is a link's share of
//                    building plus running it, the part of `chain` that is the link's own cost.
//   3 resolved-then  100,000 `then` on an already fulfilled promise, wait until all ran (ns per op).
//                    dispatch: 100,000 `queue.async`; async-task-value: `await task.value` on a
//                    completed task. Callbacks report to a shared atomic countdown (all variants).
//   4 all            `Promise.all` over 1,000 pending promises (created untimed) fulfilled one by
//                    one, wait for the array (ns per element). dispatch: 1,000 completions
//                    dispatched to the serial queue and joined by a counter; async-taskgroup: a task
//                    group of 1,000 child tasks collected in input order.
//   5 contention     100,000 pending promises (created untimed); one thread fulfils them while
//                    another chains a `then` on each; wait for all callbacks (ns per promise).
//                    dispatch: the same two threads with a lock-protected hand-off slot per value,
//                    the callback sent with `queue.async`; inline-locked: the same, called inline.
//   6 deep-chain     workload 2 with 1,000,000 links: total time (ns per link) and peak resident
//                    memory: VmHWM from /proc/self/status, reset before each sample through
//                    /proc/self/clear_refs, minus VmRSS at the sample's start (after malloc_trim);
//                    "bytes/link" is that growth ÷ links (worst sample). Peak RSS is process-wide,
//                    so this workload runs LAST; the output says how the peak was measured.
//   7 transfer       1 GiB (8 MiB under --smoke) over loopback from the in-process server, 3
//                    samples: download to a file and upload from a file, by curl (a child process,
//                    THE baseline of each direction: download-curl, upload-curl), by PromiseHTTP
//                    (download-promise, upload-promise) and by bare URLSession (…-urlsession).
//                    Per MiB, plus MB/s and "MB/s ÷ curl"; the file or the server's receipt is
//                    checked untimed. Peak RSS growth as for deep-chain; in a full run a sample
//                    growing more than 32 MiB fails the case. See Cases+Transfer.swift.

import Foundation

let status = BenchmarkCommand.run(Array(CommandLine.arguments.dropFirst()))
exit(status)
