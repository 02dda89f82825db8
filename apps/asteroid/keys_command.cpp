// `asteroid keys`: a cluster's CA and its members' credentials.
#include "commands.hpp"

#include "asteroid/actors/credentials.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

namespace asteroid::apps {

CLI::Option* add_credentials_option(CLI::App* cmd, std::string& dir) {
  return cmd
    ->add_option("--credentials", dir,
                 "Member folder of the cluster's credentials (made by "
                 "`asteroid keys`: ca.pem, cert.pem, key.pem); every "
                 "connection is then TLS with certificates of that CA")
    ->check(CLI::ExistingDirectory);
}

void add_keys_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "keys", "Create a cluster's certificate authority and one credential "
            "folder per member (node or job program), or add members to it");
  auto dir = std::make_shared<std::string>();
  auto members = std::make_shared<std::vector<std::string>>();
  auto add = std::make_shared<bool>(false);
  auto days = std::make_shared<int>(365);
  cmd->add_option("--out,-o", *dir,
                  "Folder for the cluster's keys: ca.pem, ca.key (keep it "
                  "with the owner) and MEMBER/ for each member")
    ->required();
  cmd->add_option("--members,-m", *members,
                  "Member names, e.g. node0,node1,job: one folder each, to "
                  "copy to that device")
    ->required()
    ->delimiter(',');
  cmd->add_flag("--add", *add,
                "Add members to the existing cluster in --out (its ca.key "
                "signs them) instead of creating a new cluster");
  cmd->add_option("--days", *days, "Validity of the certificates in days")
    ->check(CLI::Range(1, 36500))
    ->capture_default_str();
  cmd->callback([=] {
    if (*add)
      actors::add_cluster_members(*dir, *members, *days);
    else
      actors::make_cluster_keys(*dir, *members, *days);
    namespace fs = std::filesystem;
    for (auto& m : *members)
      std::printf("%s: %s\n", m.c_str(), (fs::path(*dir) / m).c_str());
    std::printf("Copy each member folder to its device and start it with "
                "--credentials FOLDER; keep %s private.\n",
                (fs::path(*dir) / "ca.key").c_str());
  });
}

} // namespace asteroid::apps
