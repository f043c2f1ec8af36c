// Tenants from vrdmad's --config: what is accepted, and that every refusal names the field.
#include <cstdlib>
#include <optional>

#include <gtest/gtest.h>

#include "vrdma/router/tenants.hh"

namespace rb::vrdma {
namespace {

constexpr const char* kTwo = R"(
[[tenant]]
name = "alpha"
uids = [1000, 1001]
rate_bytes = "1G"
rate_ops = 50000
max_qps = 8
max_reg_bytes = "64M"

[[tenant]]
name = "beta"
uids = [0]
path = "router"

[[tenant]]
name = "gamma"
uids = [7]
qp_rate_ops = 1000
qp_rate_bytes = "10M"
)";

TEST(VrdmaTenants, ParsesLimitsAndFindsTenantsByUid) {
  auto t = Tenants::parse(kTwo, "--config c.toml");
  ASSERT_TRUE(t) << t.status().message();
  auto a = t->of_uid(1001);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "alpha");
  EXPECT_EQ(a->rate_bytes, 1ull << 30);
  EXPECT_EQ(a->rate_ops, 50000u);
  EXPECT_EQ(a->max_qps, 8u);
  EXPECT_EQ(a->max_reg_bytes, 64ull << 20);
  EXPECT_TRUE(a->direct);
  EXPECT_TRUE(a->rate_limited());
  EXPECT_EQ(a->qp_rate_ops, 0u);
  auto g = t->of_uid(7);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->qp_rate_ops, 1000u);
  EXPECT_EQ(g->qp_rate_bytes, 10ull << 20);
  EXPECT_TRUE(g->rate_limited());  // a per-QP limit alone puts the tenant on the router path
  auto b = t->of_uid(0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->name, "beta");
  EXPECT_FALSE(b->direct);
  EXPECT_FALSE(b->rate_limited());
  auto none = t->of_uid(4242);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().message(), "uid 4242 is in no tenant of --config c.toml");
}

TEST(VrdmaTenants, WithoutAConfigEveryUidIsItsOwnTenantWithTheDefaultLimits) {
  Tenants t;
  auto a = t.of_uid(1234);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "uid-1234");
  TenantDefaults d = tenant_defaults();
  EXPECT_GT(d.max_reg_bytes, 0u);  // a quarter of the host's memory
  EXPECT_EQ(a->max_reg_bytes, d.max_reg_bytes);
  EXPECT_EQ(a->max_qps, 1024u);
  EXPECT_EQ(a->max_mrs, 4096u);
  EXPECT_FALSE(a->rate_limited());
}

TEST(VrdmaTenants, AbsentLimitsAreTheDefaultsAndZeroIsUnlimited) {
  auto t = Tenants::parse("[[tenant]]\nname=\"a\"\nuids=[1]\n[[tenant]]\nname=\"b\"\nuids=[2]\nmax_reg_bytes=0\nmax_qps=0\n",
                          "--config c.toml");
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(t->of_uid(1)->max_reg_bytes, tenant_defaults().max_reg_bytes);
  EXPECT_EQ(t->of_uid(1)->max_mrs, 4096u);
  EXPECT_EQ(t->of_uid(2)->max_reg_bytes, 0u);
  EXPECT_EQ(t->of_uid(2)->max_qps, 0u);
}

// Across hosts a tenant is its name, and "uid-N" is a router's own name for uid N (probe 8 D4).
TEST(VrdmaTenants, ANameOfTheRoutersOwnUidFormIsRefused) {
  auto t = Tenants::parse("[[tenant]]\nname=\"uid-1001\"\nuids=[65534]\n", "--config c.toml");
  ASSERT_FALSE(t);
  EXPECT_NE(t.status().message().find("uid-1001"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("choose another name"), std::string::npos) << t.status().message();
  EXPECT_TRUE(Tenants::parse("[[tenant]]\nname=\"uids\"\nuids=[1]\n", "--config c.toml"));
}

TEST(VrdmaTenants, SubordinateUidsParseAsShadowUtilsWritesThem) {
  auto uid_of = [](const std::string& name) -> std::optional<uint32_t> {
    if (name == "alice") return 1000u;
    char* end = nullptr;
    unsigned long n = std::strtoul(name.c_str(), &end, 10);
    if (!name.empty() && !*end) return uint32_t(n);
    return std::nullopt;
  };
  auto r = parse_subuid("alice:100000:65536\n# a comment\n2000:200000:10\nnobody-known:300000:5\nbad\n"
                        "alice:x:1\nalice:5:0\nalice:4294967295:2\n",
                        uid_of);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].owner, 1000u);
  EXPECT_TRUE(r[0].contains(100000) && r[0].contains(165535) && !r[0].contains(165536));
  EXPECT_EQ(r[1].owner, 2000u);
}

TEST(VrdmaTenants, AUsersSubordinateUidsAreItsTenant) {
  Tenants plain;
  plain.set_subordinate_uids({{100000, 65536, 1000}});
  EXPECT_EQ(plain.of_uid(100042)->name, "uid-1000");  // without a config: the owner's own tenant
  EXPECT_EQ(plain.of_uid(1000)->name, "uid-1000");
  EXPECT_EQ(plain.of_uid(99999)->name, "uid-99999");
  auto t = Tenants::parse("[[tenant]]\nname=\"a\"\nuids=[1000]\n[[tenant]]\nname=\"b\"\nuids=[100007]\n",
                          "--config c.toml");
  ASSERT_TRUE(t) << t.status().message();
  t->set_subordinate_uids({{100000, 65536, 1000}});
  EXPECT_EQ(t->of_uid(100042)->name, "a");
  EXPECT_EQ(t->of_uid(100007)->name, "b");  // a uid the config names is the config's
  EXPECT_FALSE(t->of_uid(200000));
}

TEST(VrdmaTenants, TheRouterTableNamesAdminsAndTheConnectionCap) {
  auto t = Tenants::parse("[router]\nadmin_uids=[1000]\nmax_clients_per_uid=8\n", "--config c.toml");
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_FALSE(t->from_config());  // no [[tenant]]: every uid its own tenant
  EXPECT_TRUE(t->router().is_admin(0));
  EXPECT_TRUE(t->router().is_admin(1000));
  EXPECT_FALSE(t->router().is_admin(1001));
  EXPECT_EQ(t->router().max_clients_per_uid, 8u);
  EXPECT_EQ(Tenants().router().max_clients_per_uid, 64u);
  EXPECT_EQ(Tenants().router().max_link_conns_per_host, 32u);
  auto links = Tenants::parse("[router]\nmax_link_conns_per_host=4\n", "--config c.toml");
  ASSERT_TRUE(links) << links.status().message();
  EXPECT_EQ(links->router().max_link_conns_per_host, 4u);
}

void expect_refused(const std::string& text, const std::string& needle) {
  auto t = Tenants::parse(text, "--config c.toml");
  ASSERT_FALSE(t) << text;
  EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().message();
  EXPECT_EQ(t.status().message().rfind("--config c.toml", 0), 0u) << t.status().message();
}

TEST(VrdmaTenants, EveryRefusalNamesTheFieldAndTheRule) {
  expect_refused("[[tenant]]\nuids=[1]\n", "tenant[0].name");
  expect_refused("[[tenant]]\nname=\"a\"\n", "tenant[0].uids");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[-1]\n", "tenant[0].uids");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[1]\nmax_qps=-2\n", "tenant[0].max_qps");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[1]\nmax_mrs=\"x\"\n", "tenant[0].max_mrs");
  expect_refused("[router]\nmax_clients_per_uid=0\n", "router.max_clients_per_uid");
  expect_refused("[router]\nmax_link_conns_per_host=0\n", "router.max_link_conns_per_host");
  expect_refused("[router]\nadmin_uids=[-3]\n", "router.admin_uids");
  expect_refused("[router]\nturbo=1\n", "unknown key \"turbo\"");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[1]\nrate_bytes=\"lots\"\n", "tenant[0].rate_bytes");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[1]\nqp_rate_ops=-5\n", "tenant[0].qp_rate_ops");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[1]\npath=\"fast\"\n", "tenant[0].path");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[1]\nturbo=1\n", "unknown key \"turbo\"");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[1]\n[[tenant]]\nname=\"a\"\nuids=[2]\n", "\"a\" names two tenants");
  expect_refused("[[tenant]]\nname=\"a\"\nuids=[1]\n[[tenant]]\nname=\"b\"\nuids=[1]\n", "uid 1 is in two tenants");
  expect_refused("[tenants]\n", "unknown table \"tenants\"");
  expect_refused("", "no [[tenant]] entry");
  expect_refused("[[tenant]\n", "line 1");
}

}  // namespace
}  // namespace rb::vrdma
