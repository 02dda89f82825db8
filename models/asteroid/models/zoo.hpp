#pragma once

#include "asteroid/models/model_options.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <string>
#include <vector>

namespace asteroid::models {

/// Builds the model called `name` (one of `model_names()`).
///
/// | name            | default input | reference (1000 classes)          |
/// |-----------------|---------------|-----------------------------------|
/// | mlp             | 1x28x28       | 784-256-128-10                    |
/// | cnn, cnn_bn     | 1x28x28       | conv32-conv64-fc128               |
/// | mobilenet_v2    | 3x32x32       | 3,504,872 params at 224           |
/// | resnet18        | 3x32x32       | 11,689,512 params at 224          |
/// | resnet50        | 3x32x32       | 25,557,032 params at 224          |
/// | efficientnet_b1 | 3x32x32       | 7,794,184 params                  |
/// | bert_small      | int64 [128]   | 4 layers, hidden 512, 8 heads     |
/// | bert_tiny       | int64 [128]   | 2 layers, hidden 128, 2 heads     |
/// | bert_base       | int64 [128]   | BERT-Base: 109,482,240 + head     |
/// | vit             | 3x224x224     | ViT-B/16: 86,567,656 params       |
/// | vit_tiny        | 3x224x224     | ViT-Ti/16: 5,717,416 params       |
/// | vit_large       | 3x224x224     | ViT-L/16: 304,326,632 params      |
///
/// Initialisation draws from LibTorch's global generator only, so it is
/// deterministic after `torch::manual_seed` (or with `options.seed(s)`).
/// Throws `std::invalid_argument` for an unknown name (listing the known
/// ones) or an invalid option (naming it).
sequential_model make_model(const std::string& name,
                            const model_options& options = {});

/// Names accepted by `make_model`, in the order of the table above.
std::vector<std::string> model_names();

} // namespace asteroid::models
