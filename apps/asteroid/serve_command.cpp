// `asteroid serve --config FILE`: serve a model from running nodes as an
// inference pipeline and report what it did.
#include "commands.hpp"
#include "number_checks.hpp"
#include "job_signals.hpp"

#include "asteroid/actors/serve.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace asteroid::apps {

void print_serve_result(const actors::serve_result& r) {
  std::printf("pipeline (%s): %d stages, predicted %.3f samples/s; links: %s\n",
              r.plan.planner.c_str(), r.plan.num_stages(), r.plan.samples_per_s,
              actors::describe_links(r.stats.value("links", nlohmann::json())).c_str());
  for (const auto& s : r.stats.value("stages", nlohmann::json::array()))
    std::printf("  %-24s layers [%d, %d)  %lld requests  busy %.2f s  queue mean %.2f, "
                "max %lld\n",
                s.value("label", std::string{}).c_str(),
                s["layers"].is_array() ? s["layers"][0].get<int>() : 0,
                s["layers"].is_array() ? s["layers"][1].get<int>() : 0,
                static_cast<long long>(s.value("requests", int64_t{0})),
                s.value("busy_s", 0.0), s.value("queue_mean", 0.0),
                static_cast<long long>(s.value("queue_max", int64_t{0})));
  std::printf("%lld requests, %lld samples in %.2f s: %.3f samples/s (%.3f from the first "
              "answer on), latency p50 %.1f ms, p99 %.1f ms\n",
              static_cast<long long>(r.requests), static_cast<long long>(r.samples),
              r.seconds, r.samples_per_s, r.steady_samples_per_s, r.latency_p50_ms,
              r.latency_p99_ms);
  for (const auto& x : r.stats.value("recoveries", nlohmann::json::array()))
    std::printf("re-planned: %s (%s)\n", x.value("why", std::string{}).c_str(),
                x.value("pipeline_kept", false) ? "pipeline kept" : "new pipeline");
  if (r.accuracy >= 0)
    std::printf("top-1 accuracy against the dataset's labels: %.2f %%\n", 100 * r.accuracy);
  std::fflush(stdout);
}

void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "serve", "Serve a model from running nodes as an inference pipeline (serve file)");
  auto path = std::make_shared<std::string>();
  auto credentials = std::make_shared<std::string>();
  auto requests = std::make_shared<int64_t>(0);
  auto metrics = std::make_shared<std::string>();
  cmd->add_option("--config,-c", *path, "Serve file (JSON)")->required();
  add_credentials_option(cmd, *credentials)
    ->description("Member folder of the cluster's credentials this program connects to "
                  "the nodes with (overrides the serve file's 'credentials')");
  cmd->add_option("--requests", *requests, "Requests to send (overrides the serve file's)")
    ->check(positive_finite());
  cmd->add_option("--metrics", *metrics,
                  "JSON lines of the plan, every request and the summary ('-': stdout; "
                  "overrides the serve file's)");
  cmd->callback([=] {
    auto spec = actors::load_serve_file(*path);
    if (!credentials->empty())
      spec.credentials = *credentials;
    if (*requests > 0)
      spec.requests = *requests;
    if (!metrics->empty())
      spec.metrics_path = *metrics;
    if (auto code = run_serve_with_signals(spec))
      std::exit(code); // stopped by a signal: 128 + the signal
  });
}

} // namespace asteroid::apps
