#pragma once
// What a strategy is prepared with in a test: a model, plain SGD with momentum, a phase timer
// and the precision, on one device.
#include <optional>
#include <utility>

#include <torch/optim/sgd.h>

#include "strategies/strategy.hpp"

namespace ddpbench::testing {

struct PreparedTraining {
  PreparedTraining(torch::nn::AnyModule m, c10::Device device, StrategyOptions strategy_options, double lr,
                   AmpMode amp = AmpMode::off)
      : model(std::move(m)),
        optimizer((model.ptr()->to(device), model.ptr()->parameters()), torch::optim::SGDOptions(lr).momentum(0.9)),
        options(std::move(strategy_options)),
        timer(make_phase_timer(device)),
        precision(amp, device) {
    dist.device = device;
  }
  void prepare(Strategy& strategy) {
    setup.emplace(TrainingSetup{model, optimizer, dist, options, *timer, precision});
    strategy.prepare(*setup);
  }

  torch::nn::AnyModule model;
  torch::optim::SGD optimizer;
  DistContext dist;
  StrategyOptions options;
  std::unique_ptr<PhaseTimer> timer;
  MixedPrecision precision;
  std::optional<TrainingSetup> setup;
};

}  // namespace ddpbench::testing
