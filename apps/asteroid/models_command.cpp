#include "commands.hpp"

#include "asteroid/models/zoo.hpp"

#include <iostream>

namespace asteroid::apps {

void add_models_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("models", "List the model zoo, or print the "
                                           "layers of one model");
  auto name = std::make_shared<std::string>();
  cmd->add_option("name", *name, "Print this model's layers and shapes");
  cmd->callback([name] {
    if (name->empty()) {
      for (auto& n : models::model_names())
        std::cout << n << '\n';
      return;
    }
    auto model = models::make_model(*name);
    model->pretty_print(std::cout);
    std::cout << "\n" << model->parameter_count() << " parameters\n";
  });
}

} // namespace asteroid::apps
