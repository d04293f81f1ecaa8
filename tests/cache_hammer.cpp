// A helper process for the cli suite: several threads look up an overlapping set of kernels in one
// cache directory (LOSSJIT_CACHE_DIR and friends, as any lossjit process), half the time through a
// fresh cache object so the directory, not this process's memory, answers. Prints one line per key
// with a hash of the image it got and a line of counters; exits 1 if one key ever gave two images.
//
//   lossjit_cache_hammer THREADS ITERATIONS
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "jit/cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "pipeline.hpp"

using namespace lossjit;

// The programs and targets the cli suite compiles for its reference; keep the two in step.
const char* const kPrograms[] = {"mean((p - t)^2)", "sum(abs(x))"};
const char* const kTargets[] = {"sm_90", "sm_80"};

std::string kernel_source(const std::string& program) {
    const auto p = check(parse(program, "expr"), {});
    KernelSpec spec;
    spec.inner_strides.assign(read_inputs(p).size(), 1);
    return emit_cuda(p, spec);
}

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s THREADS ITERATIONS\n", argv[0]);
        return 2;
    }
    const int threads = std::atoi(argv[1]), iterations = std::atoi(argv[2]);
    struct Job {
        std::string source, target;
    };
    std::vector<Job> jobs;
    for (const char* program : kPrograms)
        for (const char* target : kTargets) jobs.push_back({kernel_source(program), target});

    const CacheSettings settings = CacheSettings::from_environment();
    KernelCache shared(settings);
    std::mutex mutex;
    std::map<std::string, XXH64_hash_t> seen;  // key -> image hash
    bool mismatch = false;
    CacheCounters total;
    auto add = [&](const CacheCounters& c) {
        total.memory_hits += c.memory_hits;
        total.disk_hits += c.disk_hits;
        total.compiles += c.compiles;
        total.corrupt_entries += c.corrupt_entries;
        total.write_failures += c.write_failures;
        total.evictions += c.evictions;
    };

    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            for (int i = 0; i < iterations; ++i) {
                const Job& job = jobs[static_cast<std::size_t>(t + i) % jobs.size()];
                KernelCache fresh(settings);
                KernelCache& cache = i % 2 == 0 ? fresh : shared;
                const CacheLookup lookup = cache.get(job.source, job.target);
                const XXH64_hash_t hash = XXH3_64bits(lookup.image->data.data(), lookup.image->data.size());
                std::lock_guard lock(mutex);
                if (&cache == &fresh) add(fresh.counters());
                auto [it, inserted] = seen.emplace(lookup.key, hash);
                if (!inserted && it->second != hash) mismatch = true;
            }
        });
    }
    for (auto& w : workers) w.join();
    add(shared.counters());
    for (const auto& [key, hash] : seen) std::printf("image %s %016llx\n", key.c_str(), static_cast<unsigned long long>(hash));
    std::printf("counters %llu %llu %llu %llu %llu %llu\n", static_cast<unsigned long long>(total.memory_hits),
                static_cast<unsigned long long>(total.disk_hits), static_cast<unsigned long long>(total.compiles),
                static_cast<unsigned long long>(total.corrupt_entries),
                static_cast<unsigned long long>(total.write_failures), static_cast<unsigned long long>(total.evictions));
    if (mismatch) std::printf("mismatch\n");
    return mismatch ? 1 : 0;
}
