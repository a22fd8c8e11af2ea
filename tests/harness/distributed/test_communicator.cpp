#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

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
    comm->sum(t, "test");
    EXPECT_TRUE(at::equal(t, at::full({4}, 6.0)));
    auto b = at::full({2, 2}, static_cast<double>(rank * 10));
    comm->broadcast(b, 2);
    EXPECT_TRUE(at::equal(b, at::full({2, 2}, 20.0)));
    const auto rows = all_gather_rows(*comm, at::full({2}, static_cast<float>(rank)), "test");
    EXPECT_TRUE(at::equal(rows, at::tensor({0.f, 0.f, 1.f, 1.f, 2.f, 2.f}).view({3, 2})));
  });
}

std::string message_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const CollectiveError& e) {
    return e.what();
  }
  return "(no CollectiveError)";
}

TEST(Communicator, AStoreNobodyServesFailsTheRendezvousNamingTheAddress) {
  // Rank 1 of 2, with nobody serving the store at that port.
  const int64_t port = free_port();
  const RankEnvironment env = local_rank_environment(1, 2, port);
  const auto start = std::chrono::steady_clock::now();
  const std::string message =
      message_of([&] { Communicator(CommunicatorOptions{env, CommBackend::gloo, c10::kCPU, std::chrono::seconds(2)}); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2 + 5));
  EXPECT_NE(message.find("rendezvous failed on rank 1"), std::string::npos) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
}

TEST(Communicator, ARankThatNeverJoinsIsNamed) {
  // Rank 0 of 3 serves the store; rank 1 joins; rank 2 never starts.
  const int64_t port = free_port();
  std::string message;
  std::thread rank1([&] {
    message_of([&] {
      Communicator(CommunicatorOptions{local_rank_environment(1, 3, port), CommBackend::gloo, c10::kCPU,
                                       std::chrono::seconds(3)});
    });
  });
  const auto start = std::chrono::steady_clock::now();
  message = message_of([&] {
    Communicator(
        CommunicatorOptions{local_rank_environment(0, 3, port), CommBackend::gloo, c10::kCPU, std::chrono::seconds(3)});
  });
  const auto elapsed = std::chrono::steady_clock::now() - start;
  rank1.join();
  EXPECT_LT(elapsed, std::chrono::seconds(3 + 5));
  EXPECT_NE(message.find("rendezvous failed on rank 0"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 2 never joined"), std::string::npos) << message;
  EXPECT_EQ(message.find("rank 1 never joined"), std::string::npos) << message;
}

// Progress, not liveness: a rank alive (beating) but stuck before a collective the other
// waits in is named as behind, with where it is and where the other waits.
TEST(Communicator, ARankAliveButStuckBeforeACollectiveIsNamedAsBehind) {
  std::string message;
  testing::run_ranks(
      2,
      [&](int64_t rank, std::shared_ptr<Communicator> comm) {
        auto t = at::ones({4});
        comm->sum(t, "SyncBN forward");  // both pass collective #2 (the rendezvous is #1)
        if (rank == 1) {
          // Alive (its heartbeat goes on) but never enters the next collective.
          std::this_thread::sleep_for(std::chrono::seconds(7));
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        message = message_of([&] { comm->sum(t, "allreduce of bucket 7"); });
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2 + 5));
      },
      std::chrono::seconds(2));
  EXPECT_EQ(message.rfind("allreduce of bucket 7 failed on rank 0: ", 0), 0U) << message;
  EXPECT_NE(message.find("rank 1 is behind, alive: "), std::string::npos) << message;
  EXPECT_NE(message.find("past collective #2 (SyncBN forward)"), std::string::npos) << message;
  EXPECT_NE(message.find("never reached collective #3, where rank 0 is in collective #3 (allreduce of bucket 7)"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("rank 0 is behind"), std::string::npos) << message;
  EXPECT_NE(message.find("c10d said: "), std::string::npos) << message;
}

// Phases are left when their collective completes: the record says where a rank is now.
TEST(Communicator, CollectivesAreEnteredAndLeftInTheProgressRecord) {
  testing::run_ranks(2, [](int64_t, std::shared_ptr<Communicator> comm) {
    auto t = at::ones({2});
    comm->sum(t, "SyncBN forward");
    const auto marks = comm->marks();
    const int64_t bucket = marks->enter("allreduce of bucket 0");
    EXPECT_EQ(bucket, 3);  // the rendezvous, the sum, this one
    marks->leave(bucket);
    const double blocked = comm->blocked_s();
    EXPECT_GT(blocked, 0.0);
    comm->sum(t, "SyncBN backward");
    EXPECT_GT(comm->blocked_s(), blocked);
  });
}

// The local addresses ("0100007F" for 127.0.0.1, in /proc's byte order) listening on `port`.
std::vector<std::string> listeners_on(int64_t port) {
  char port_hex[8];
  std::snprintf(port_hex, sizeof port_hex, "%04lX", static_cast<long>(port));
  std::vector<std::string> hosts;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const auto colon = local.find(':');
      if (state == "0A" && local.substr(colon + 1) == port_hex) hosts.push_back(local.substr(0, colon));
    }
  }
  return hosts;
}

TEST(Communicator, TheStoreListensOnMasterAddrOnly) {
  const int64_t port = free_port();
  Communicator comm(
      CommunicatorOptions{local_rank_environment(0, 1, port), CommBackend::gloo, c10::kCPU, std::chrono::seconds(10)});
  // Not the wildcard address (00000000, or :: in tcp6): only loopback can reach it.
  EXPECT_EQ(listeners_on(port), std::vector<std::string>{"0100007F"});
}

TEST(Communicator, TheInterfaceTowardsAnAddressIsTheOneThatRoutesThere) {
  EXPECT_EQ(interface_towards("127.0.0.1"), "lo");
  EXPECT_EQ(interface_towards("not-an-address.invalid"), "");
}

// NCCL as init_process_group(device_id=...): the group is bound to the rank's device and its
// communicator formed at once, so a world of one sums through NCCL from the first call.
TEST(GpuCommunicator, NcclBindsTheDeviceAndFormsTheCommunicatorAtOnce) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::kCUDA, 0);
  testing::run_ranks(
      1,
      [&](int64_t, std::shared_ptr<Communicator> comm) {
        EXPECT_EQ(comm->backend_name(), "nccl");
        ASSERT_TRUE(comm->process_group()->getBoundDeviceId().has_value());
        EXPECT_EQ(*comm->process_group()->getBoundDeviceId(), cuda);
        auto t = at::full({4}, 3.0, at::TensorOptions().device(cuda));
        comm->sum(t, "test");
        EXPECT_TRUE(at::equal(t.cpu(), at::full({4}, 3.0)));
      },
      std::chrono::seconds(60), CommBackend::nccl, cuda);
}

// An NCCL peer that never starts is tested with the rank as a process of its own
// (GpuLauncher.AnNcclPeerThatNeverStartsIsNamedAndItsRankExits): it leaves a thread inside
// ncclCommInitRank and a live watchdog that only the process's end can take.

// Rank threads sharing a CUDA device would deadlock in backward: the helper refuses them
// before any rank starts, naming processes as the way.
TEST(RankThreads, RanksSharingACudaDeviceAreRefusedAsThreads) {
  std::atomic<int> started{0};
  try {
    testing::run_ranks(
        2, [&](int64_t, std::shared_ptr<Communicator>) { ++started; }, std::chrono::seconds(5), CommBackend::gloo,
        c10::Device(c10::kCUDA, 0));
    ADD_FAILURE() << "two rank threads on cuda:0 were not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("2 rank threads sharing cuda:0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("as processes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(started.load(), 0);
  // On CPUs every graph's work runs on its caller's thread: threads are fine there.
  testing::run_ranks(2, [&](int64_t, std::shared_ptr<Communicator>) { ++started; });
  EXPECT_EQ(started.load(), 2);
}

TEST(Communicator, BackendChoice) {
  EXPECT_EQ(resolve_backend(CommBackend::auto_select, c10::kCPU), CommBackend::gloo);
  EXPECT_EQ(resolve_backend(CommBackend::auto_select, c10::Device(c10::kCUDA, 0)), CommBackend::nccl);
  EXPECT_THROW(resolve_backend(CommBackend::nccl, c10::kCPU), InputError);
}

}  // namespace
}  // namespace ddpbench
