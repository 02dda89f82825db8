#pragma once

#include "asteroid/models/layer_range.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace asteroid::models {

/// A per-sample tensor shape (the batch dimension is never included).
using shape_t = std::vector<int64_t>;

/// Named tensors of a layer range: parameters and buffers, each named
/// `<layer>.<name inside the layer>`, in a deterministic order.
using named_tensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// One element of a `sequential_model`: a named module with known per-sample
/// input and output shapes. A layer outside the model's built range has no
/// module (`module.is_empty()`): only its name and shapes are known.
struct layer {
  std::string name;
  torch::nn::AnyModule module;
  shape_t input_shape;
  shape_t output_shape;
};

/// Constructs one layer's module; called only for layers a model builds.
using layer_factory = std::function<torch::nn::AnyModule()>;

/// An ordered chain of named layers; any contiguous range is a valid pipeline
/// stage.
///
/// Blocks with internal skip connections (residual blocks, transformer encoder
/// layers) are a single layer, so cutting the chain between two layers never
/// cuts a skip connection. Every layer maps a batch `[B, input_shape...]` to
/// `[B, output_shape...]`, and layer `i`'s output shape is layer `i + 1`'s
/// input shape.
///
/// A model may build only a range of its layers (a *stage-only* model: what
/// a pipeline replica hosts). The other layers keep their names and shapes,
/// so indices, names and shapes are those of the whole model, but they own no
/// module and no tensors; asking for their modules, parameters, state or
/// forward pass throws `std::logic_error` naming the layer.
class sequential_model_impl : public torch::nn::Module {
public:
  /// Creates an empty model that takes per-sample inputs of `input_shape` and
  /// element type `input_dtype` (token ids use `torch::kLong`), and that
  /// constructs the modules of the layers in `built` only.
  explicit sequential_model_impl(shape_t input_shape = {},
                                 torch::Dtype input_dtype = torch::kFloat,
                                 layer_range built = {});

  /// Appends a layer whose per-sample output shape is `output_shape`; its
  /// input shape is the previous layer's output shape (or the model's input
  /// shape). Throws when the name is empty, contains '.', or is taken. A
  /// layer outside the built range drops `module` (prefer the layer_factory
  /// overload there: it never constructs the module).
  void push_back(std::string name, torch::nn::AnyModule module,
                 shape_t out_shape);

  /// Appends a layer whose module `make` constructs, calling it only when
  /// the layer is in the built range: how a model builds only a stage.
  void push_back(std::string name, const layer_factory& make, shape_t out_shape);

  /// Appends a layer and infers its output shape by running one zero sample
  /// through it (in eval mode, without gradients). Outside the built range
  /// the module is dropped after the dry run.
  void push_back(std::string name, torch::nn::AnyModule module);

  /// The layers this model constructs (as given; `end` may be -1).
  const layer_range& built_range() const noexcept { return built_; }

  /// Whether layer `i` has its module (it lies in the built range).
  bool is_built(int i) const;

  /// The number of layers.
  int64_t size() const noexcept {
    return static_cast<int64_t>(layers_.size());
  }

  /// The name of layer `i`.
  const std::string& layer_name(int i) const;

  /// The index of the layer called `name`; throws when there is none.
  int index_of(const std::string& name) const;

  /// Per-sample input shape of layer `i`.
  shape_t input_shape(int i) const;

  /// Per-sample output shape of layer `i`.
  shape_t output_shape(int i) const;

  /// Per-sample input shape of the model.
  shape_t input_shape() const { return input_shape_; }

  /// Per-sample output shape of the model (its input shape when empty).
  shape_t output_shape() const;

  /// Element type the model expects as input.
  torch::Dtype input_dtype() const noexcept { return input_dtype_; }

  /// The whole layer record of layer `i`.
  const layer& at(int i) const;

  /// The module of layer `i` (e.g. to move one stage to a device); throws
  /// `std::logic_error` for a layer this model does not build.
  std::shared_ptr<torch::nn::Module> layer_module(int i) const;

  /// Runs all layers.
  torch::Tensor forward(torch::Tensor x);

  /// Runs layers `[first, end)`; `end == -1` means up to the last layer.
  torch::Tensor forward_range(torch::Tensor x, int first, int end = -1);

  /// Parameters of layers `[first, end)` in layer order.
  std::vector<torch::Tensor> range_parameters(int first, int end = -1) const;

  /// Parameters and buffers of layers `[first, end)`, named
  /// `<layer>.<name>`. The tensors alias the model's storage.
  named_tensors range_state(int first, int end = -1) const;

  /// Copies `state` into layers `[first, end)`.
  ///
  /// The names must be exactly those of `range_state(first, end)` (any order)
  /// and every tensor must match in shape; otherwise throws
  /// `std::invalid_argument` naming the offending tensor, leaving the model
  /// unchanged. Tensors are converted to the destination's dtype and device.
  void load_range_state(int first, int end, const named_tensors& state);

  /// Number of parameter scalars in layers `[first, end)`.
  int64_t parameter_count(int first = 0, int end = -1) const;

  /// Runs a zero batch of `batch` samples through every layer and throws
  /// `std::logic_error` naming the first layer whose actual output shape
  /// differs from its declared one. Restores the training mode afterwards.
  void check_shapes(int64_t batch = 2);

  /// Prints one line per layer: name, shapes, parameter count.
  void pretty_print(std::ostream& stream) const override;

private:
  /// Resolves `end == -1` and throws `std::out_of_range` for bad ranges,
  /// `std::logic_error` naming the first layer of the range not built here.
  int resolve_range(int first, int end, const char* what) const;

  /// Appends the record of a layer; `module` is empty outside the built
  /// range.
  void append(std::string name, torch::nn::AnyModule module, shape_t out_shape);

  /// Element type the next appended layer receives.
  torch::Dtype input_dtype_at_end() const;

  shape_t input_shape_;
  torch::Dtype input_dtype_;
  layer_range built_;
  std::vector<layer> layers_;
};

/// Holder for `sequential_model_impl`, as `TORCH_MODULE` makes it.
TORCH_MODULE_IMPL(sequential_model, sequential_model_impl);

/// Formats a shape as `[a, b, c]` for messages.
std::string to_string(const shape_t& shape);

} // namespace asteroid::models
