#include "asteroid/planner/analytic_profiles.hpp"

#include <algorithm>
#include <cmath>

#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"

namespace asteroid::planner {

namespace {

// Per-kernel launch overhead on the reference device (jetson-nano), forward;
// backward launches twice as many kernels. An assumption (typical CUDA
// launch + framework dispatch cost on a Jetson), it only matters at tiny
// shares.
constexpr double launch_s = 20e-6;
constexpr int64_t f32 = 4;

struct shape {
  int64_t c, h, w;
  int64_t elements() const { return c * h * w; }
};

// One profile layer (a block) accumulated op by op.
struct block {
  std::string name;
  double flops = 0.0;       // forward FLOPs per sample
  int64_t params = 0;       // trainable parameters + buffers (elements)
  int64_t stash = 0;        // elements per sample saved for backward
  int64_t largest = 0;      // largest single intermediate (elements per sample)
  int64_t out = 0;          // output elements per sample
  int64_t out_bytes_per_el = f32;
  int kernels = 0;

  void op(double fl, int64_t par, int64_t out_elements, int k = 1) {
    flops += fl;
    params += par;
    stash += out_elements;
    largest = std::max(largest, out_elements);
    out = out_elements;
    kernels += k;
  }
  shape conv(shape in, int64_t cout, int64_t k, int64_t stride, int64_t groups = 1,
             bool bias = false) {
    shape o{cout, (in.h + stride - 1) / stride, (in.w + stride - 1) / stride};
    double macs = static_cast<double>(o.elements()) * static_cast<double>(in.c / groups * k * k);
    op(2.0 * macs, cout * (in.c / groups) * k * k + (bias ? cout : 0), o.elements());
    return o;
  }
  shape bn(shape in) {
    op(4.0 * static_cast<double>(in.elements()), 4 * in.c, in.elements()); // 2 trained + 2 stats
    return in;
  }
  shape act(shape in, double flops_per_el = 1.0) {
    op(flops_per_el * static_cast<double>(in.elements()), 0, in.elements());
    return in;
  }
  shape add(shape in) {
    op(static_cast<double>(in.elements()), 0, in.elements());
    return in;
  }
  shape pool(shape in, int64_t k, int64_t stride) {
    shape o{in.c, (in.h + stride - 1) / stride, (in.w + stride - 1) / stride};
    op(static_cast<double>(o.elements() * k * k), 0, o.elements());
    return o;
  }
  shape global_pool(shape in) {
    shape o{in.c, 1, 1};
    op(static_cast<double>(in.elements()), 0, o.elements());
    return o;
  }
  shape linear(shape in, int64_t out_features, int64_t tokens = 1) {
    int64_t in_f = in.elements() / tokens;
    op(2.0 * static_cast<double>(tokens * in_f * out_features), in_f * out_features + out_features,
       tokens * out_features);
    return {out_features * tokens, 1, 1};
  }
};

struct model_def {
  std::vector<block> blocks;
  int64_t input_bytes = 0;
  double optimizer_factor = 1.0; // optimizer state bytes / parameter bytes
  // Calibration: training seconds per sample at batch 32 on jetson-nano.
  double target_s_per_sample = 0.0;
};

// --- MobileNetV2, CIFAR-10 variant (stride 1 in conv1 and the 2nd stage) ---
model_def mobilenetv2() {
  model_def m;
  m.input_bytes = 3 * 32 * 32 * f32;
  m.optimizer_factor = 1.0; // SGD with momentum
  shape x{3, 32, 32};
  block stem{"conv1"};
  x = stem.act(stem.bn(stem.conv(x, 32, 3, 1)));
  m.blocks.push_back(stem);
  struct cfg { int64_t e, c, n, s; };
  const cfg cfgs[] = {{1, 16, 1, 1}, {6, 24, 2, 1}, {6, 32, 3, 2}, {6, 64, 4, 2},
                      {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int idx = 0;
  for (const auto& c : cfgs)
    for (int64_t r = 0; r < c.n; ++r) {
      int64_t stride = r == 0 ? c.s : 1;
      block b{"block" + std::to_string(++idx)};
      int64_t planes = c.e * x.c;
      shape y = b.act(b.bn(b.conv(x, planes, 1, 1)));
      y = b.act(b.bn(b.conv(y, planes, 3, stride, planes)));
      y = b.bn(b.conv(y, c.c, 1, 1));
      if (stride == 1) {
        if (x.c != c.c)
          b.bn(b.conv(x, c.c, 1, 1)); // projection shortcut
        y = b.add(y);
      }
      x = y;
      m.blocks.push_back(b);
    }
  block head{"conv2"};
  x = head.act(head.bn(head.conv(x, 1280, 1, 1)));
  m.blocks.push_back(head);
  block cls{"pool_linear"};
  x = cls.global_pool(x);
  cls.linear(x, 10);
  m.blocks.push_back(cls);
  m.target_s_per_sample = 22.0 * 60.0 / 50000.0; // 22 min per CIFAR-10 epoch on Nano
  return m;
}

// --- EfficientNet-B1, CIFAR adaptation (stem stride 1) ---------------------
model_def efficientnet_b1() {
  model_def m;
  m.input_bytes = 3 * 32 * 32 * f32;
  m.optimizer_factor = 1.0;
  shape x{3, 32, 32};
  const double swish = 4.0; // FLOPs per element (sigmoid + multiply)
  block stem{"stem"};
  x = stem.act(stem.bn(stem.conv(x, 32, 3, 1)), swish);
  m.blocks.push_back(stem);
  struct cfg { int64_t e, k, s, c, n; };
  // B0 stages with depth multiplier 1.1 (repeats ceil(1.1 r)), width 1.0.
  const cfg cfgs[] = {{1, 3, 1, 16, 2}, {6, 3, 2, 24, 3}, {6, 5, 2, 40, 3}, {6, 3, 2, 80, 4},
                      {6, 5, 1, 112, 4}, {6, 5, 2, 192, 5}, {6, 3, 1, 320, 2}};
  int idx = 0;
  for (const auto& c : cfgs)
    for (int64_t r = 0; r < c.n; ++r) {
      int64_t stride = r == 0 ? c.s : 1;
      block b{"mbconv" + std::to_string(++idx)};
      int64_t hidden = x.c * c.e;
      shape y = x;
      if (c.e != 1)
        y = b.act(b.bn(b.conv(y, hidden, 1, 1)), swish);
      y = b.act(b.bn(b.conv(y, hidden, c.k, stride, hidden)), swish);
      // Squeeze-and-excitation, reduced to a quarter of the block input.
      int64_t se = std::max<int64_t>(1, x.c / 4);
      shape s = b.global_pool(y);
      s = b.act(b.conv(s, se, 1, 1, 1, true), swish);
      s = b.act(b.conv(s, hidden, 1, 1, 1, true), swish);
      y = b.act(y); // channel-wise scale
      y = b.bn(b.conv(y, c.c, 1, 1));
      if (stride == 1 && x.c == c.c)
        y = b.add(y);
      x = y;
      m.blocks.push_back(b);
    }
  block head{"head"};
  x = head.act(head.bn(head.conv(x, 1280, 1, 1)), swish);
  m.blocks.push_back(head);
  block cls{"pool_linear"};
  x = cls.global_pool(x);
  cls.linear(x, 10);
  m.blocks.push_back(cls);
  m.target_s_per_sample = 26.7 * 60.0 / 50000.0; // 26.7 min per CIFAR-10 epoch on Nano
  return m;
}

// --- ResNet-50 (torchvision v1.5), 224x224, 100 classes ---------------------
model_def resnet50() {
  model_def m;
  m.input_bytes = 3 * 224 * 224 * f32;
  m.optimizer_factor = 1.0;
  shape x{3, 224, 224};
  block stem{"stem"};
  x = stem.pool(stem.act(stem.bn(stem.conv(x, 64, 7, 2))), 3, 2);
  m.blocks.push_back(stem);
  struct cfg { int64_t mid, n, s; };
  const cfg cfgs[] = {{64, 3, 1}, {128, 4, 2}, {256, 6, 2}, {512, 3, 2}};
  int stage = 0;
  for (const auto& c : cfgs) {
    ++stage;
    for (int64_t r = 0; r < c.n; ++r) {
      int64_t stride = r == 0 ? c.s : 1;
      block b{"layer" + std::to_string(stage) + "." + std::to_string(r)};
      int64_t out = c.mid * 4;
      shape y = b.act(b.bn(b.conv(x, c.mid, 1, 1)));
      y = b.act(b.bn(b.conv(y, c.mid, 3, stride)));
      y = b.bn(b.conv(y, out, 1, 1));
      if (r == 0)
        b.bn(b.conv(x, out, 1, stride)); // downsample
      y = b.act(b.add(y));
      x = y;
      m.blocks.push_back(b);
    }
  }
  block cls{"pool_fc"};
  x = cls.global_pool(x);
  cls.linear(x, 100);
  m.blocks.push_back(cls);
  // ASSUMPTION: 1.14 h per epoch on TX2 over all 60,000 Mini-ImageNet images,
  // converted to Nano with the catalog's TX2 speed.
  m.target_s_per_sample = 1.14 * 3600.0 / 60000.0 * catalog_speed("jetson-tx2");
  return m;
}

// --- BERT-small: 4 layers, hidden 512, 8 heads, FFN 2048, sequence 512 -----
model_def bert_small() {
  const int64_t S = 512, H = 512, A = 8, F = 2048, V = 30522;
  model_def m;
  m.input_bytes = S * 8; // int64 token ids
  m.optimizer_factor = 2.0; // Adam: two moments
  block emb{"embeddings"};
  emb.op(8.0 * static_cast<double>(S * H), V * H + S * H + 2 * H, S * H, 4); // gathers + sums
  emb.op(8.0 * static_cast<double>(S * H), 2 * H, S * H);                   // layer norm
  m.blocks.push_back(emb);
  for (int l = 0; l < 4; ++l) {
    block at{"encoder" + std::to_string(l) + ".attention"};
    at.op(2.0 * 3 * S * H * H, 3 * (H * H + H), 3 * S * H, 3);      // Q, K, V
    at.op(2.0 * A * S * S * (H / A), 0, A * S * S);                  // scores
    at.op(5.0 * A * S * S, 0, A * S * S);                            // softmax
    at.op(1.0 * A * S * S, 0, A * S * S / 4);                        // dropout mask (bytes)
    at.op(2.0 * A * S * S * (H / A), 0, S * H);                      // context
    at.op(2.0 * S * H * H, H * H + H, S * H);                        // output projection
    at.op(2.0 * S * H, 0, S * H);                                    // dropout + residual
    at.op(8.0 * S * H, 2 * H, S * H);                                // layer norm
    m.blocks.push_back(at);
    block ff{"encoder" + std::to_string(l) + ".ffn"};
    ff.op(2.0 * S * H * F, H * F + F, S * F);                        // up projection
    ff.op(8.0 * S * F, 0, S * F);                                    // GELU
    ff.op(2.0 * S * F * H, F * H + H, S * H);                        // down projection
    ff.op(2.0 * S * H, 0, S * H);                                    // dropout + residual
    ff.op(8.0 * S * H, 2 * H, S * H);                                // layer norm
    m.blocks.push_back(ff);
  }
  block cls{"pooler_classifier"};
  cls.op(2.0 * H * H, H * H + H, H);
  cls.op(2.0 * H * 2, 2 * H + 2, 2);
  m.blocks.push_back(cls);
  // ASSUMPTION: no epoch time in the paper; BERT's dense GEMMs get the same
  // effective FLOP rate as ResNet-50 (set in analytic_profile).
  m.target_s_per_sample = 0.0;
  return m;
}

// --- ViT-L/16 at 224x224, 1000 classes; transformer sub-layers as units
// (attention and MLP of every encoder block), as EdgePipe partitions it ---
model_def vit_large() {
  const int64_t S = 197, H = 1024, A = 16, F = 4096, P = 16, C = 1000;
  model_def m;
  m.input_bytes = 3 * 224 * 224 * f32;
  m.optimizer_factor = 2.0; // Adam, as it is trained
  block emb{"patch_embedding"};
  emb.op(2.0 * (S - 1) * H * 3 * P * P, 3 * P * P * H + H, (S - 1) * H); // 16x16/16 conv
  emb.op(static_cast<double>(S * H), H + S * H, S * H, 2); // class token, positions
  m.blocks.push_back(emb);
  for (int l = 0; l < 24; ++l) {
    block at{"encoder" + std::to_string(l) + ".attention"};
    at.op(8.0 * S * H, 2 * H, S * H);                                // layer norm
    at.op(2.0 * 3 * S * H * H, 3 * (H * H + H), 3 * S * H, 3);      // Q, K, V
    at.op(2.0 * A * S * S * (H / A), 0, A * S * S);                  // scores
    at.op(5.0 * A * S * S, 0, A * S * S);                            // softmax
    at.op(2.0 * A * S * S * (H / A), 0, S * H);                      // context
    at.op(2.0 * S * H * H, H * H + H, S * H);                        // output projection
    at.op(1.0 * S * H, 0, S * H);                                    // residual
    m.blocks.push_back(at);
    block ff{"encoder" + std::to_string(l) + ".mlp"};
    ff.op(8.0 * S * H, 2 * H, S * H);                                // layer norm
    ff.op(2.0 * S * H * F, H * F + F, S * F);                        // up projection
    ff.op(8.0 * S * F, 0, S * F);                                    // GELU
    ff.op(2.0 * S * F * H, F * H + H, S * H);                        // down projection
    ff.op(1.0 * S * H, 0, S * H);                                    // residual
    m.blocks.push_back(ff);
  }
  block head{"head"};
  head.op(8.0 * S * H, 2 * H, S * H); // final layer norm
  head.op(2.0 * H * C, H * C + C, C); // classifier on the class token
  m.blocks.push_back(head);
  // ASSUMPTION: no ViT time in the paper; its dense GEMMs get ResNet-50's
  // effective FLOP rate, as BERT's do.
  m.target_s_per_sample = 0.0;
  return m;
}

model_def definition(const std::string& model) {
  if (model == "mobilenetv2")
    return mobilenetv2();
  if (model == "efficientnet-b1")
    return efficientnet_b1();
  if (model == "resnet50")
    return resnet50();
  if (model == "bert-small")
    return bert_small();
  if (model == "vit-large")
    return vit_large();
  std::string known;
  for (const auto& n : analytic_model_names())
    known += (known.empty() ? "" : ", ") + n;
  known += ", vit-large";
  throw planner_error("analytic_profile: unknown model \"" + model + "\" (known: " + known + ")");
}

double total_flops(const model_def& m) {
  double f = 0.0;
  for (const auto& b : m.blocks)
    f += b.flops;
  return f;
}

// Effective forward+backward FLOP rate making a batch-32 step take
// target_s_per_sample per sample (backward = 2x forward FLOPs).
double calibrated_rate(const model_def& m) {
  constexpr double batch = 32.0;
  double launches = 0.0;
  for (const auto& b : m.blocks)
    launches += 3.0 * b.kernels * launch_s;
  double compute = m.target_s_per_sample - launches / batch;
  return 3.0 * total_flops(m) / compute;
}

} // namespace

std::vector<std::string> analytic_model_names() {
  return {"mobilenetv2", "efficientnet-b1", "resnet50", "bert-small"};
}

double analytic_forward_flops(const std::string& model) {
  return total_flops(definition(model));
}

model_profile analytic_profile(const std::string& model) {
  model_def m = definition(model);
  double rate = m.target_s_per_sample > 0.0 ? calibrated_rate(m) : calibrated_rate(resnet50());
  model_profile p;
  p.model = model;
  p.device = "jetson-nano";
  p.input_bytes_per_sample = m.input_bytes;
  for (const auto& b : m.blocks) {
    layer_profile l;
    l.name = b.name;
    l.batch_sizes = {1, 8, 32};
    for (auto bs : l.batch_sizes) {
      double y = static_cast<double>(bs);
      l.forward_s.push_back(b.kernels * launch_s + y * b.flops / rate);
      l.backward_s.push_back(2.0 * b.kernels * launch_s + y * 2.0 * b.flops / rate);
    }
    l.output_bytes_per_sample = b.out * f32;
    l.param_bytes = b.params * f32;
    l.optimizer_state_bytes =
      static_cast<int64_t>(std::llround(m.optimizer_factor * static_cast<double>(l.param_bytes)));
    l.stashed_bytes_per_sample = b.stash * f32;
    // Backward holds the incoming gradient and the one it produces.
    l.working_bytes_per_sample = 2 * b.largest * f32;
    p.layers.push_back(std::move(l));
  }
  return p;
}

} // namespace asteroid::planner
