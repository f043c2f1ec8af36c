// --help and --list are generated from the registry: every user-facing entry shows up with its
// variants, what --domain means and each option; the test-only ones do not.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../apps/rdmabench/cli.hh"
#include "../../apps/rdmabench/list.hh"
#include "registry/registry.hh"

namespace rb::app {
namespace {

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::string help_text() {
  auto c = parse_command_line(std::vector<std::string>{"--help"});
  EXPECT_TRUE(c.is_ok());
  return c.is_ok() ? c->help : "";
}

void expect_entry_shown(const std::string& text, const transport::TransportEntry& e) {
  EXPECT_TRUE(contains(text, e.name)) << e.name;
  EXPECT_TRUE(contains(text, e.description)) << e.name;
  if (!e.domain_help.empty()) {
    EXPECT_TRUE(contains(text, e.domain_help)) << e.name;
  }
  for (const auto& v : e.variants) EXPECT_TRUE(contains(text, v.help)) << e.name << ":" << v.name;
  for (const auto& o : e.options) {
    EXPECT_TRUE(contains(text, transport::option_usage(o))) << e.name << " -o " << o.key;
    EXPECT_TRUE(contains(text, o.help)) << e.name << " -o " << o.key;
  }
}

TEST(TransportHelp, HelpAndListShowEveryUserEntryWithItsOptions) {
  std::string help = help_text(), list = list_text();
  for (const auto& e : transport::registry()) {
    if (e.test_only) {
      EXPECT_FALSE(contains(help, e.description)) << e.name << " is test-only";
      EXPECT_FALSE(contains(list, e.description)) << e.name << " is test-only";
      continue;
    }
    expect_entry_shown(help, e);
    expect_entry_shown(list, e);
  }
}

TEST(TransportHelp, ListJsonHasEveryEntryMarked) {
  auto j = nlohmann::json::parse(list_json());
  ASSERT_EQ(j.at("transports").size(), transport::registry().size());
  for (size_t i = 0; i < transport::registry().size(); ++i) {
    const auto& e = transport::registry()[i];
    const auto& t = j["transports"][i];
    EXPECT_EQ(t.at("name"), e.name);
    EXPECT_EQ(t.at("test_only"), e.test_only);
    EXPECT_EQ(t.at("options").size(), e.options.size());
    EXPECT_EQ(t.at("test_variants").get<std::vector<std::string>>(), e.test_variants);
    for (const auto& inst : t.at("instances")) {
      if (inst.at("usable")) {
        EXPECT_TRUE(inst.contains("caps")) << inst.at("name");
      }
    }
  }
}

TEST(TransportHelp, ListTakesJsonOrNothing) {
  auto plain = parse_command_line(std::vector<std::string>{"--list"});
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_EQ(plain->kind, Command::Kind::list);
  EXPECT_FALSE(plain->list_json);
  auto json = parse_command_line(std::vector<std::string>{"--list", "json"});
  ASSERT_TRUE(json.is_ok());
  EXPECT_TRUE(json->list_json);
  auto bad = parse_command_line(std::vector<std::string>{"--list", "xml"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), Errc::invalid_argument);
}

TEST(TransportHelp, BadOptionsAreRejectedBeforeAnythingStarts) {
  for (const auto& e : transport::registry()) {
    if (e.test_only) continue;
    auto c = parse_command_line(std::vector<std::string>{"-t", e.name, "-o", "no-such-key=1"});
    ASSERT_FALSE(c.is_ok()) << e.name;
    EXPECT_EQ(c.status().code(), Errc::invalid_argument);
    EXPECT_TRUE(contains(c.status().message(), "no-such-key")) << c.status().message();
  }
}

}  // namespace
}  // namespace rb::app
