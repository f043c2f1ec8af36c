// -o KEY=VALUE is checked against the chosen transport's declared options before anything
// starts: unknown keys and values of the wrong type are errors naming the key; good values
// reach the transport typed, with defaults filled in.
#include <gtest/gtest.h>

#include "registry/registry.hh"

namespace rb::transport {
namespace {

const std::vector<OptionSpec> kSpecs = {
    {"nodelay", OptionType::boolean, "1", "send at once"},
    {"sndbuf", OptionType::bytes, "", "send buffer", {}, 4096, 1ull << 30},
    {"slots", OptionType::uint, "8", "slots", {}, 1, 64},
    {"mode", OptionType::choice, "fast", "how", {"fast", "safe"}},
    {"label", OptionType::string, "", "a name"},
};

std::string error_of(const std::map<std::string, std::string>& given) {
  auto r = parse_options("demo", kSpecs, given);
  EXPECT_FALSE(r.is_ok());
  if (r.is_ok()) return "";
  EXPECT_EQ(r.status().code(), Errc::invalid_argument);
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line";
  return r.status().message();
}

TEST(TransportOptions, GoodValuesArriveTypedWithDefaults) {
  auto r = parse_options("demo", kSpecs, {{"nodelay", "0"}, {"sndbuf", "4M"}, {"mode", "safe"}, {"label", "x y"}});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->flag("nodelay"));
  EXPECT_EQ(r->number("sndbuf"), 4u << 20);
  EXPECT_EQ(r->number("slots"), 8u);  // the default
  EXPECT_EQ(r->text("mode"), "safe");
  EXPECT_EQ(r->text("label"), "x y");
  auto d = parse_options("demo", kSpecs, {});
  ASSERT_TRUE(d.is_ok());
  EXPECT_TRUE(d->flag("nodelay"));
  EXPECT_FALSE(d->has("sndbuf"));  // no default: the transport decides
  for (const char* yes : {"1", "true", "on", "yes"}) EXPECT_TRUE(parse_options("demo", kSpecs, {{"nodelay", yes}})->flag("nodelay"));
}

TEST(TransportOptions, UnknownKeyListsTheValidOnes) {
  std::string m = error_of({{"turbo", "1"}});
  EXPECT_NE(m.find("-o turbo=1"), std::string::npos) << m;
  EXPECT_NE(m.find("demo"), std::string::npos) << m;
  for (const char* k : {"nodelay=0|1", "sndbuf=BYTES", "slots=N", "mode=fast|safe", "label=TEXT"})
    EXPECT_NE(m.find(k), std::string::npos) << m;
}

TEST(TransportOptions, ATransportWithoutOptionsRefusesAny) {
  auto r = parse_options("plain", {}, {{"nodelay", "1"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("-o nodelay=1"), std::string::npos);
  EXPECT_NE(r.status().message().find("takes no -o options"), std::string::npos);
}

TEST(TransportOptions, BadTypeNamesKeyValueAndRule) {
  struct Case {
    const char *key, *value, *rule;
  } cases[] = {{"nodelay", "maybe", "0 or 1"},         {"sndbuf", "lots", "bytes"},
               {"sndbuf", "1K", "from 4K to 1G"},      {"sndbuf", "2G", "from 4K to 1G"},
               {"slots", "-1", "whole number"},        {"slots", "65", "from 1 to 64"},
               {"mode", "slow", "one of fast, safe"}};
  for (auto& c : cases) {
    std::string m = error_of({{c.key, c.value}});
    EXPECT_NE(m.find(std::string("-o ") + c.key + "=" + c.value), std::string::npos) << m;
    EXPECT_NE(m.find(c.rule), std::string::npos) << m;
    EXPECT_NE(m.find("e.g. -o " + std::string(c.key) + "="), std::string::npos) << m;
  }
}

TEST(TransportSelection, CheckedAgainstTheEntry) {
  EXPECT_TRUE(check_selection({"tcp", "", "", {{"sndbuf", "1M"}}}).is_ok());
  auto msg = [](const Selection& s) {
    auto r = check_selection(s);
    EXPECT_FALSE(r.is_ok()) << s.label();
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(msg({"carrier-pigeon", "", "", {}}).find("-t carrier-pigeon"), std::string::npos);
  EXPECT_NE(msg({"tcp", "fast", "", {}}).find("takes no variant"), std::string::npos);
  EXPECT_NE(msg({"dma", "abacus", "", {}}).find("dma:cpu or dma:cuda"), std::string::npos);
  EXPECT_NE(msg({"ofi", "shm", "", {{"nodelay", "1"}}}).find("-o nodelay=1"), std::string::npos);
  EXPECT_NE(msg({"tcp", "", "", {{"nodelay", "2"}}}).find("-o nodelay=2"), std::string::npos);
  // The in-process transports are for the tests only.
  for (const auto& e : registry())
    if (e.test_only) {
      EXPECT_NE(msg({e.name, "", "", {}}).find("unit tests only"), std::string::npos);
      EXPECT_TRUE(check_selection({e.name, "", "", {}}, Use::test).is_ok());
    }
  EXPECT_TRUE(check_selection({"ofi", "any-provider-name", "", {}}).is_ok());  // libfabric decides
}

TEST(TransportRegistry, EntriesAreComplete) {
  int defaults = 0;
  for (const auto& e : registry()) {
    EXPECT_FALSE(e.description.empty()) << e.name;
    EXPECT_TRUE(e.open && e.probe) << e.name;
    EXPECT_EQ(e.name.find(':'), std::string::npos) << e.name;
    defaults += e.is_default;
    EXPECT_FALSE(e.is_default && e.test_only) << e.name;
    for (const auto& o : e.options) EXPECT_FALSE(o.help.empty()) << e.name << " -o " << o.key;
    auto typed = parse_options(e.name, e.options, {});
    EXPECT_TRUE(typed.is_ok()) << e.name << ": " << typed.status().message();  // defaults parse
  }
  EXPECT_EQ(defaults, 1);
}

}  // namespace
}  // namespace rb::transport
