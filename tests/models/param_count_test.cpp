// Parameter counts against published references. Big models are only built
// (not run) here, so this stays cheap.

#include "asteroid/models/zoo.hpp"

#include <catch2/catch.hpp>

using namespace asteroid::models;

namespace {

model_options imagenet() {
  return model_options().num_classes(1000).image_size(224).seed(0);
}

} // namespace

TEST_CASE("models: ImageNet CNNs match the torchvision parameter counts",
          "[models][params]") {
  // torchvision model docs ("Table of all available classification weights",
  // pytorch.org/vision/stable/models.html), num_params of the IMAGENET1K_V1
  // weights.
  CHECK(make_model("mobilenet_v2", imagenet())->parameter_count() == 3'504'872);
  CHECK(make_model("resnet18", imagenet())->parameter_count() == 11'689'512);
  CHECK(make_model("resnet50", imagenet())->parameter_count() == 25'557'032);
  CHECK(make_model("efficientnet_b1", imagenet())->parameter_count() == 7'794'184);
}

TEST_CASE("models: ImageNet CNN layer structure", "[models][params]") {
  auto r18 = make_model("resnet18", imagenet());
  CHECK(r18->size() == 10);  // stem, 8 basic blocks, head
  CHECK(r18->layer_name(1) == "layer1_0");
  CHECK(r18->output_shape(0) == shape_t{64, 56, 56});
  CHECK(r18->output_shape(8) == shape_t{512, 7, 7});
  auto r50 = make_model("resnet50", imagenet());
  CHECK(r50->size() == 18);  // stem, 3+4+6+3 bottlenecks, head
  CHECK(r50->output_shape(16) == shape_t{2048, 7, 7});
  auto mb = make_model("mobilenet_v2", imagenet());
  CHECK(mb->size() == 20);  // stem, 17 inverted residuals, last conv, head
  CHECK(mb->output_shape(18) == shape_t{1280, 7, 7});
  auto eb1 = make_model("efficientnet_b1", imagenet());
  CHECK(eb1->size() == 26);  // stem, 23 MBConv blocks, last conv, head
  CHECK(eb1->output_shape(24) == shape_t{1280, 7, 7});
}

TEST_CASE("models: CIFAR variants match the common CIFAR ports", "[models][params]") {
  auto cifar = model_options().num_classes(10).image_size(32);
  // kuangliu/pytorch-cifar ResNet18 (3x3 stem, no max pool, 10 classes):
  // 11,173,962 = 11,689,512 - 7*7*3*64 + 3*3*3*64 - 513,000 + 5,130.
  CHECK(make_model("resnet18", cifar)->parameter_count() == 11'173'962);
  // torchvision mobilenet_v2(num_classes=10); strides change no parameter:
  // 3,504,872 - 1,281,000 + 12,810.
  CHECK(make_model("mobilenet_v2", cifar)->parameter_count() == 2'236'682);
  // The CIFAR stem keeps the resolution: 32 -> 32 (stem) -> 4 at the end.
  auto mb = make_model("mobilenet_v2", cifar);
  CHECK(mb->output_shape(0) == shape_t{32, 32, 32});
  CHECK(mb->output_shape(18) == shape_t{1280, 4, 4});
  // An explicit ImageNet stem at 32x32 gives the 1x1 final map.
  auto mb_in = make_model("mobilenet_v2", model_options(cifar).stem(stem_kind::imagenet));
  CHECK(mb_in->output_shape(18) == shape_t{1280, 1, 1});
}

TEST_CASE("models: MLP and CNN parameter counts", "[models][params]") {
  // Hand-derived: 784*256+256 + 256*128+128 + 128*10+10.
  CHECK(make_model("mlp")->parameter_count() == 235'146);
  // conv1 1*32*9+32 = 320, conv2 32*64*9+64 = 18,496,
  // fc1 64*7*7*128+128 = 401,536, classifier 128*10+10 = 1,290.
  CHECK(make_model("cnn")->parameter_count() == 421'642);
  // Plus BatchNorm affine parameters 2*32 + 2*64 (biases kept off the convs:
  // -32 - 64).
  CHECK(make_model("cnn_bn")->parameter_count() == 421'642 + 192 - 96);
  auto wide = make_model("cnn", model_options().width_mult(2.0));
  CHECK(wide->output_shape(0) == shape_t{64, 14, 14});
  CHECK(wide->output_shape(2) == shape_t{256});
}

TEST_CASE("models: BERT parameter counts", "[models][params]") {
  // Reference: google-research/bert's BERT-Small (uncased_L-4_H-512_A-8,
  // Turc et al. 2019) as HuggingFace BertModel with pooler. Derivation
  // (H=512, I=2048, L=4, V=30522, 512 positions, 2 token types):
  //   embeddings V*H + 512*H + 2*H + 2*H (LayerNorm)        = 15,891,456
  //   per layer  4*(H*H+H) + 2*H + (H*I+I) + (I*H+H) + 2*H =  3,152,384
  //   pooler     H*H + H                                     =    262,656
  //   total      15,891,456 + 4*3,152,384 + 262,656        = 28,763,648
  // The paper's "29.1M" adds the MLM head (H*H+H + 2*H + V bias = 294,202).
  // Our classifier head adds H*classes + classes.
  auto opts = model_options().num_classes(2).seq_len(128);
  auto bert = make_model("bert_small", opts);
  CHECK(bert->parameter_count() == 28'763'648 + 512 * 2 + 2);
  CHECK(bert->size() == 6);  // embeddings, 4 encoder layers, head
  CHECK(bert->parameter_count(0, 1) == 15'891'456);
  CHECK(bert->parameter_count(1, 2) == 3'152'384);
  // BERT-Tiny (L=2, H=128, I=512), same derivation: 4,385,920 (HF
  // prajjwal1/bert-tiny reports 4.4M).
  CHECK(make_model("bert_tiny", opts)->parameter_count() == 4'385'920 + 128 * 2 + 2);
}

TEST_CASE("models: ViT parameter counts", "[models][params]") {
  // torchvision vit_b_16 IMAGENET1K_V1: 86,567,656 parameters.
  auto vit = make_model("vit", model_options().num_classes(1000).seed(0));
  CHECK(vit->parameter_count() == 86'567'656);
  CHECK(vit->size() == 14);  // patch embedding, 12 encoder blocks, head
  CHECK(vit->output_shape(0) == shape_t{197, 768});
  // timm vit_tiny_patch16_224: 5,717,416 parameters.
  CHECK(make_model("vit_tiny", model_options().num_classes(1000))->parameter_count()
        == 5'717'416);
}

namespace {

/// Parameters of every layer of `name`, built one layer at a time (a
/// stage-only model per layer), so a large model is never held whole.
int64_t count_layer_by_layer(const std::string& name, const model_options& o) {
  auto n = static_cast<int>(make_model(name, model_options(o).build_layers({0, 1}))->size());
  int64_t total = 0;
  for (int i = 0; i < n; ++i)
    total += make_model(name, model_options(o).build_layers({i, i + 1}))
               ->parameter_count(i, i + 1);
  return total;
}

} // namespace

TEST_CASE("models: ViT-L/16 and BERT-Base parameter counts", "[models][params]") {
  // torchvision vit_l_16 IMAGENET1K_V1: 304,326,632 parameters.
  CHECK(count_layer_by_layer("vit_large", model_options().num_classes(1000))
        == 304'326'632);
  // HuggingFace bert-base-uncased BertModel (with pooler): 109,482,240; the
  // derivation of the BERT test above with H=768, I=3072, L=12 gives it.
  CHECK(count_layer_by_layer("bert_base", model_options().num_classes(2))
        == 109'482'240 + 768 * 2 + 2);
}
