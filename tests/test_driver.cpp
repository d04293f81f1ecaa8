// driver: without a GPU the library starts, says why there is no device, and fails clearly.
#include <doctest/doctest.h>

#include "tools/host.hpp"
#include "lossjit/lossjit.hpp"

using namespace lossjit;

TEST_SUITE("driver") {

TEST_CASE("cuda_available explains itself") {
    std::string reason;
    const bool available = cuda_available(&reason);
    if (available) {
        CHECK(reason.empty());
        const auto info = device_info(0);
        CHECK(info.multiprocessors > 0);
        CHECK(info.arch().rfind("sm_", 0) == 0);
        return;
    }
    MESSAGE("no CUDA device here: " << reason);
    CHECK_FALSE(reason.empty());
    CHECK_THROWS_AS(device_info(0), CudaError);
    CHECK_THROWS_AS(DeviceBuffer(16), CudaError);
}

TEST_CASE("a GPU call without a GPU is a CudaError, and the CPU reference still works") {
    if (cuda_available()) return;
    auto loss = compile("mean((p - t)^2)");
    const auto p = generate(parse_generator("100:uniform"), 1);
    const auto t = generate(parse_generator("100:uniform"), 2);
    const std::vector<TensorView> views{p.view(), t.view()};
    CHECK_THROWS_AS(loss(views), CudaError);
    CHECK(loss.reference(views) > 0.0);
}

}  // TEST_SUITE
