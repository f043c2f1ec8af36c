// Job files: TOML -> runs (the matrix product, defaults overlaid, extra [[run]]s), and the one-line
// FILE:LINE errors for whatever is wrong, all before anything runs.
#include "../../apps/rdmabench/job.hh"

#include <gtest/gtest.h>

namespace rb::app {
namespace {

Result<Job> parse(const std::string& text, const std::vector<GivenFlag>& given = {}) {
  return parse_job(text, "job.toml", given);
}

// The error line of a job that must fail; checks it is one line of the documented form.
std::string error_of(const std::string& text, const std::vector<GivenFlag>& given = {}) {
  auto j = parse(text, given);
  EXPECT_FALSE(j.is_ok()) << "parsed: " << text;
  if (j.is_ok()) return "";
  EXPECT_EQ(j.status().code(), Errc::invalid_argument);
  const std::string& m = j.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.rfind("job.toml:", 0), 0u) << m;
  return m;
}

TEST(Job, MatrixIsTheCartesianProductFirstKeySlowest) {
  auto j = parse(R"(
[defaults]
size = "64,4K"
iters = 200
json = "out.jsonl"

[matrix]
transport = ["ofi:shm", "ofi:tcp"]
op = ["write", "read", "send"]
threads = [1, 2]
)");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->json_path, "out.jsonl");
  ASSERT_EQ(j->runs.size(), 12u);
  const auto& first = j->runs[0].cmd;
  EXPECT_EQ(first.kind, Command::Kind::loopback);
  EXPECT_EQ(first.spec.transport.variant, "shm");
  EXPECT_EQ(first.spec.ops, std::vector<engine::Op>{engine::Op::write});
  EXPECT_EQ(first.spec.threads, 1);
  EXPECT_EQ(first.spec.sizes, (std::vector<uint64_t>{64, 4096}));
  EXPECT_EQ(first.spec.iters, 200u);
  EXPECT_EQ(first.output.json, "out.jsonl");
  EXPECT_EQ(j->runs[1].cmd.spec.threads, 2);                               // last key fastest
  EXPECT_EQ(j->runs[2].cmd.spec.ops, std::vector<engine::Op>{engine::Op::read});
  EXPECT_EQ(j->runs[6].cmd.spec.transport.variant, "tcp");                        // first key slowest
  EXPECT_EQ(join_args(j->runs[3].args),
            "--transport ofi:shm --op read --threads 2 --size 64,4K --iters 200 --json out.jsonl");
}

TEST(Job, ValuesBecomeFlags) {
  auto j = parse(R"(
[defaults]
size = [64, 4096]        # an array is a list
warmup = "100"
random-space = "1M"
validate = true          # a switch: the bare flag
fixed = false            # left out
duration = 0.5
cpus = [0, 1]
json = "r.jsonl"
)");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  ASSERT_EQ(j->runs.size(), 1u);  // no matrix, no [[run]]: the defaults are the run
  const auto& s = j->runs[0].cmd.spec;
  EXPECT_EQ(s.sizes, (std::vector<uint64_t>{64, 4096}));
  EXPECT_EQ(s.warmup_iters, 100u);
  EXPECT_EQ(s.random_space, 1u << 20);
  EXPECT_TRUE(s.validate);
  EXPECT_FALSE(s.fixed);
  EXPECT_DOUBLE_EQ(s.duration_s, 0.5);
  EXPECT_EQ(s.cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(join_args(j->runs[0].args),
            "--size 64,4096 --warmup 100 --random-space 1M --validate --duration 0.5 --cpus 0,1 --json r.jsonl");
}

TEST(Job, ExtraRunsFollowTheMatrixAndOverlayTheDefaults) {
  auto j = parse(R"(
[defaults]
json = "r.jsonl"
size = "64"
[matrix]
depth = [1, 2]
[[run]]
op = "send"
mode = "lat"
[[run]]
size = "1M"
)");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  ASSERT_EQ(j->runs.size(), 4u);
  EXPECT_EQ(j->runs[2].cmd.spec.ops, std::vector<engine::Op>{engine::Op::send});
  EXPECT_EQ(j->runs[2].cmd.spec.sizes, std::vector<uint64_t>{64});
  EXPECT_EQ(j->runs[3].cmd.spec.sizes, std::vector<uint64_t>{1 << 20});

  auto only_runs = parse("[defaults]\njson = \"r.jsonl\"\n[[run]]\nop = \"read\"\n[[run]]\nop = \"write\"\n");
  ASSERT_TRUE(only_runs.is_ok()) << only_runs.status().message();
  EXPECT_EQ(only_runs->runs.size(), 2u);  // [[run]]s alone: not the defaults as a run of their own
}

TEST(Job, TagsNameWhatVariesBeyondTheLabel) {
  auto j = parse(R"(
[defaults]
json = "r.jsonl"
iters = 100
[matrix]
transport = ["ofi:shm", "ofi:tcp"]
depth = [1, 8]
validate = [false, true]
)");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  ASSERT_EQ(j->runs.size(), 8u);
  EXPECT_EQ(j->runs[0].tags, (std::vector<std::string>{"depth=1"}));
  EXPECT_EQ(j->runs[3].tags, (std::vector<std::string>{"depth=8", "validate"}));
}

TEST(Job, AddrPicksTheServer) {
  auto j = parse("[defaults]\njson = \"r.jsonl\"\naddr = \"10.0.0.1:9000\"\n");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->runs[0].cmd.kind, Command::Kind::client);
  EXPECT_EQ(j->runs[0].cmd.client.server.host, "10.0.0.1");
  EXPECT_EQ(j->runs[0].cmd.client.server.port, 9000);
}

TEST(Job, CommandLineReplacesDefaults) {
  std::string text = "[defaults]\njson = \"r.jsonl\"\niters = 100\n[matrix]\nop = [\"write\", \"read\"]\n";
  auto j = parse(text, {{"iters", "7", false}, {"json", "other.jsonl", false}, {"validate", "", true}});
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->json_path, "other.jsonl");
  EXPECT_EQ(j->runs[1].cmd.spec.iters, 7u);
  EXPECT_TRUE(j->runs[1].cmd.spec.validate);

  auto m = error_of(text, {{"op", "send", false}});  // the matrix and the command line both set op
  EXPECT_NE(m.find("job.toml:5: key 'op':"), std::string::npos) << m;
  EXPECT_NE(m.find("drop one"), std::string::npos) << m;
}

TEST(Job, CommandLineCollectsTheFlagsBesideJob) {
  auto c = parse_command_line(std::vector<std::string>{"--job", "x.toml", "-n", "5", "--validate", "--payload", "1K",
                                                       "--json", "o.jsonl"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->kind, Command::Kind::job);
  EXPECT_EQ(c->job, "x.toml");
  ASSERT_EQ(c->given.size(), 4u);
  auto has = [&](const std::string& name, const std::string& value, bool sw) {
    for (const auto& g : c->given)
      if (g.name == name) return g.value == value && g.is_switch == sw;
    return false;
  };
  EXPECT_TRUE(has("iters", "5", false));  // short and alias names arrive as the canonical key
  EXPECT_TRUE(has("validate", "", true));
  EXPECT_TRUE(has("size", "1K", false));
  EXPECT_TRUE(has("json", "o.jsonl", false));
  EXPECT_FALSE(parse_command_line(std::vector<std::string>{"--job", "x.toml", "--server"}).is_ok());
}

TEST(Job, JsonIsRequired) {
  auto m = error_of("[defaults]\nsize = \"64\"\n");
  EXPECT_NE(m.find("job.toml:1: key 'json': missing"), std::string::npos) << m;
  EXPECT_TRUE(parse("[defaults]\nsize = \"64\"\n", {{"json", "x.jsonl", false}}).is_ok());
}

TEST(Job, UnknownKeysSuggestTheClosestFlag) {
  auto m = error_of("[defaults]\njson = \"r.jsonl\"\nitres = 100\n");
  EXPECT_EQ(m, "job.toml:3: key 'itres': not an rdmabench flag; did you mean 'iters'?");
  m = error_of("[matrix]\ncompletely-wrong = [1]\n");
  EXPECT_NE(m.find("job.toml:2: key 'completely-wrong': not an rdmabench flag; use one of: "), std::string::npos) << m;
  EXPECT_NE(m.find("random-space"), std::string::npos) << m;
  m = error_of("[defaults]\n\"--size\" = \"64\"\n");
  EXPECT_NE(m.find("without dashes; write size = ..."), std::string::npos) << m;
  m = error_of("[default]\njson = \"r.jsonl\"\n");
  EXPECT_NE(m.find("job.toml:1: key 'default': not a job table"), std::string::npos) << m;
  m = error_of("size = \"64\"\n[defaults]\njson = \"r.jsonl\"\n");
  EXPECT_NE(m.find("job.toml:1: key 'size': a flag outside any table; put it under [defaults]"), std::string::npos) << m;
}

TEST(Job, FlagsThatAreNotRunFlags) {
  auto m = error_of("[defaults]\njson = \"r.jsonl\"\nserver = true\n");
  EXPECT_NE(m.find("job.toml:3: key 'server': --server is not a run flag"), std::string::npos) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\n[matrix]\njson = [\"a\", \"b\"]\n");
  EXPECT_NE(m.find("job.toml:4: key 'json': one per job"), std::string::npos) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\n[[run]]\naddr = \"h:1\"\n");
  EXPECT_NE(m.find("job.toml:4: key 'addr': one per job"), std::string::npos) << m;
}

TEST(Job, BadValuesNameTheirLine) {
  // The value is judged by the flag's own parser, for the one combination that holds it.
  auto m = error_of("[defaults]\njson = \"r.jsonl\"\n[matrix]\nop = [\"write\", \"read\"]\nsize = [\n  64,\n  \"12Q\",\n]\n");
  EXPECT_NE(m.find("job.toml:7: key 'size': --size"), std::string::npos) << m;
  EXPECT_NE(m.find("12Q"), std::string::npos) << m;
  EXPECT_NE(m.find("(run 2 of 4: --op write --size 12Q --json r.jsonl)"), std::string::npos) << m;

  m = error_of("[defaults]\njson = \"r.jsonl\"\niters = 0\n");
  EXPECT_NE(m.find("job.toml:3: key 'iters': --iters '0': must be a whole number from 1 to 9223372036854775807, e.g. --iters 2000"), std::string::npos) << m;

  m = error_of("[defaults]\njson = \"r.jsonl\"\nthreads = \"many\"\n");  // a conversion: the flag's own wording
  EXPECT_EQ(m, "job.toml:3: key 'threads': --threads 'many': must be a whole number from 1 to 256, e.g. --threads 4") << m;

  // A rule between flags: the first flag the message names is blamed.
  m = error_of("[defaults]\njson = \"r.jsonl\"\nrandom-space = \"1K\"\n[matrix]\nsize = [64, 4096]\n");
  EXPECT_NE(m.find("job.toml:"), std::string::npos) << m;
  EXPECT_NE(m.find("run 2 of 2"), std::string::npos) << m;
}

// A rule between flags is blamed on the first of its flags that the run sets, wherever it is set.
TEST(Job, RulesBetweenFlagsNameTheKeyThatSetTheFlag) {
  auto m = error_of("[defaults]\njson = \"r.jsonl\"\nmode = \"lat\"\ndepth = 8\n");
  EXPECT_EQ(m.rfind("job.toml:4: key 'depth': --depth 8 with --mode lat: ", 0), 0u) << m;

  // Under an alias, the key as written.
  m = error_of("[defaults]\njson = \"r.jsonl\"\nmode = \"lat\"\n[matrix]\nbatch-size = [1, 4]\n");
  EXPECT_EQ(m.rfind("job.toml:5: key 'batch-size': --batch 4 with --mode lat: ", 0), 0u) << m;
  EXPECT_NE(m.find("(run 2 of 2: --batch 4 --json r.jsonl --mode lat)"), std::string::npos) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\nrandom-space = \"4K\"\npayload = \"8K\"\n");
  EXPECT_EQ(m.rfind("job.toml:4: key 'payload': --size 8 KiB > --random-space 4 KiB: ", 0), 0u) << m;

  // The rule's first flag set only by the file: the file's key, though --mode came from the command line.
  m = error_of("[defaults]\njson = \"r.jsonl\"\ndepth = 8\n", {{"mode", "lat", false}});
  EXPECT_EQ(m.rfind("job.toml:3: key 'depth': --depth 8 with --mode lat: ", 0), 0u) << m;
  // ... and set on the command line beside --job: named there.
  m = error_of("[defaults]\njson = \"r.jsonl\"\nmode = \"lat\"\n", {{"depth", "8", false}});
  EXPECT_EQ(m.rfind("job.toml: --depth on the command line: --depth 8 with --mode lat: ", 0), 0u) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\n", {{"threads", "many", false}});
  EXPECT_EQ(m, "job.toml: --threads on the command line: --threads 'many': must be a whole number from 1 to 256, e.g. --threads 4");
}

// A value is text handed to its flag, never read as a flag itself, even when it starts with '-'.
TEST(Job, ValuesStartingWithADashAreValues) {
  auto m = error_of("[defaults]\njson = \"r.jsonl\"\ndepth = \"-5\"\n");
  EXPECT_EQ(m, "job.toml:3: key 'depth': --depth '-5': must be a whole number from 1 to 4294967295, e.g. --depth 64");
  m = error_of("[defaults]\njson = \"r.jsonl\"\ncpus = \"-1\"\n");
  EXPECT_EQ(m.rfind("job.toml:3: key 'cpus': --cpus '-1': ", 0), 0u) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\nsize = \"-5\"\n");
  EXPECT_EQ(m.rfind("job.toml:3: key 'size': --size '-5'", 0), 0u) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\nthreads = -2\n");  // a TOML integer: converts, then the rule
  EXPECT_EQ(m, "job.toml:3: key 'threads': --threads '-2': must be a whole number from 1 to 256, e.g. --threads 4");
  auto j = parse("[defaults]\njson = \"-r.jsonl\"\n");  // a file name may start with '-'
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->runs[0].cmd.output.json, "-r.jsonl");
}

TEST(Job, WrongTypes) {
  auto m = error_of("[defaults]\njson = \"r.jsonl\"\nvalidate = \"yes\"\n");
  EXPECT_NE(m.find("job.toml:3: key 'validate': a switch takes true or false"), std::string::npos) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\niters = true\n");
  EXPECT_NE(m.find("job.toml:3: key 'iters': takes a number or a string, not true/false"), std::string::npos) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\n[matrix]\ndepth = 4\n");
  EXPECT_NE(m.find("job.toml:4: key 'depth': a [matrix] key takes a non-empty array"), std::string::npos) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\n[matrix]\ndepth = []\n");
  EXPECT_NE(m.find("not an empty array"), std::string::npos) << m;
  m = error_of("[defaults]\njson = \"r.jsonl\"\nsize = 64\npayload = 128\n");
  EXPECT_NE(m.find("job.toml:4: key 'payload': the same flag as 'size' on line 3; keep one"), std::string::npos) << m;
  m = error_of("defaults = 3\n");
  EXPECT_NE(m.find("job.toml:1: key 'defaults':"), std::string::npos) << m;
}

TEST(Job, TomlSyntaxErrorsGiveTheLine) {
  auto m = error_of("[defaults]\njson = \"r.jsonl\"\nsize = \n");
  EXPECT_NE(m.find("job.toml:3:"), std::string::npos) << m;
  EXPECT_NE(m.find("fix the TOML syntax"), std::string::npos) << m;
}

TEST(Job, MissingFile) {
  auto j = load_job("/nonexistent/job.toml", {});
  ASSERT_FALSE(j.is_ok());
  EXPECT_NE(j.status().message().find("/nonexistent/job.toml: cannot read"), std::string::npos);
}

TEST(Job, JoinArgsQuotesForTheShell) {
  EXPECT_EQ(join_args({"--size", "64,4K", "--json", "my results.jsonl"}), "--size 64,4K --json 'my results.jsonl'");
}

}  // namespace
}  // namespace rb::app
