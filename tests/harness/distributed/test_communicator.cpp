#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "harness/base/input_error.hpp"
#include "harness/distributed/communicator.hpp"
#include "harness/launch/launcher.hpp"
#include "support/rank_threads.hpp"

namespace ddpbench {
namespace {

TEST(Communicator, SumBroadcastAndGatherOverGloo) {
  testing::run_ranks(3, [](int64_t rank, std::shared_ptr<Communicator> comm) {
    EXPECT_EQ(comm->rank(), rank);
    EXPECT_EQ(comm->world_size(), 3);
    EXPECT_EQ(comm->backend_name(), "gloo");
    auto t = at::full({4}, static_cast<double>(rank + 1));
    comm->sum(t);
    EXPECT_TRUE(at::equal(t, at::full({4}, 6.0)));
    auto b = at::full({2, 2}, static_cast<double>(rank * 10));
    comm->broadcast(b, 2);
    EXPECT_TRUE(at::equal(b, at::full({2, 2}, 20.0)));
    const auto rows = all_gather_rows(*comm, at::full({2}, static_cast<float>(rank)));
    EXPECT_TRUE(at::equal(rows, at::tensor({0.f, 0.f, 1.f, 1.f, 2.f, 2.f}).view({3, 2})));
  });
}

TEST(Communicator, AMissingPeerIsAnErrorWithinTheTimeout) {
  // Rank 1 of 2, with nobody serving the store at that port.
  const RankEnvironment env = local_rank_environment(1, 2, free_port());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(Communicator(CommunicatorOptions{env, CommBackend::gloo, c10::kCPU, std::chrono::seconds(2)}),
               std::exception);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(Communicator, BackendChoice) {
  EXPECT_EQ(resolve_backend(CommBackend::auto_select, c10::kCPU), CommBackend::gloo);
  EXPECT_EQ(resolve_backend(CommBackend::auto_select, c10::Device(c10::kCUDA, 0)), CommBackend::nccl);
  EXPECT_THROW(resolve_backend(CommBackend::nccl, c10::kCPU), InputError);
}

}  // namespace
}  // namespace ddpbench
