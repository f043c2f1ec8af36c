// The control protocol: each message's JSON form, what a malformed or foreign message turns into,
// the frame cap, and the silence that every wait is bounded by.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "protocol/hex.hh"
#include "protocol/messages.hh"
#include "protocol/peer.hh"

namespace rb::protocol {
namespace {

using nlohmann::json;

Message round_trip(const Message& m) {
  auto back = from_json(json::parse(to_json(m).dump()));
  EXPECT_TRUE(back.is_ok()) << back.status().message();
  return back.value();
}

TEST(Messages, HelloRoundTripsWithItsSpec) {
  Hello h;
  h.software = "1.2.3";
  h.spec.sizes = {64, 4096};
  h.spec.threads = 3;
  h.rail_ips = {"10.0.0.1", "10.0.1.1"};
  auto back = std::get<Hello>(round_trip(h));
  EXPECT_EQ(back.version, kVersion);
  EXPECT_EQ(back.software, "1.2.3");
  EXPECT_EQ(back.spec.sizes, h.spec.sizes);
  EXPECT_EQ(back.spec.threads, 3);
  EXPECT_EQ(back.rail_ips, h.rail_ips);
}

TEST(Messages, ReadyCarriesEndpointsRegionsAndInfo) {
  Ready r;
  r.endpoints = {{0x00, 0xff, 0x10}, {}};
  r.regions = {{0x1000, 42, 4096, {1, 2, 3}}};
  r.info = {"ofi", "shm", "shm", "shm", "1.17"};
  auto back = std::get<Ready>(round_trip(r));
  EXPECT_EQ(back.endpoints, r.endpoints);
  ASSERT_EQ(back.regions.size(), 1u);
  EXPECT_EQ(back.regions[0].base, 0x1000u);
  EXPECT_EQ(back.regions[0].key, 42u);
  EXPECT_EQ(back.regions[0].len, 4096u);
  EXPECT_EQ(back.regions[0].handle, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(back.info.provider, "shm");
}

TEST(Messages, PhaseEndAndOutcomeRoundTrip) {
  auto ph = std::get<PhaseStart>(round_trip(PhaseStart{7, {transport::Op::send, model::Mode::lat, 4096, 2}, 99}));
  EXPECT_EQ(ph.index, 7u);
  EXPECT_EQ(ph.phase.op, transport::Op::send);
  EXPECT_EQ(ph.phase.mode, model::Mode::lat);
  EXPECT_EQ(ph.phase.size, 4096u);
  EXPECT_EQ(ph.phase.repeat, 2);
  EXPECT_EQ(ph.seed, 99u);
  auto end = std::get<End>(round_trip(End{{1, 2, 3}, true}));
  EXPECT_EQ(end.sent, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(end.coverage);
  PhaseOutcome o{{5, 6}, {0.1, 0.2, 0.3, 0.4}, StreamFigures{10, 1.5, 2.5, 3.5}};
  auto back = std::get<PhaseOutcome>(round_trip(o));
  EXPECT_EQ(back.received, o.received);
  EXPECT_DOUBLE_EQ(back.cpu.util, 0.4);
  ASSERT_TRUE(back.reverse.has_value());
  EXPECT_EQ(back.reverse->iterations, 10u);
  EXPECT_FALSE(std::get<PhaseOutcome>(round_trip(PhaseOutcome{})).reverse.has_value());
}

TEST(Messages, EveryTypeNameIsDistinctAndDecodesToItself) {
  std::vector<Message> all = {Hello{}, Ready{}, Connect{}, Connected{}, PhaseStart{}, Go{}, Mark{}, Alive{}, End{},
                              PhaseOutcome{}, Bye{}, Error{}};
  std::set<std::string> names;
  for (const auto& m : all) {
    names.insert(type_name(m));
    EXPECT_EQ(round_trip(m).index(), m.index()) << type_name(m);
  }
  EXPECT_EQ(names.size(), all.size());
}

TEST(Messages, ErrorKeepsItsCodeAndUnknownCodesBecomeInternal) {
  auto e = std::get<Error>(round_trip(error_of(Status(Errc::validation, "byte 3 differs"))));
  EXPECT_EQ(e.code, Errc::validation);
  EXPECT_EQ(e.message, "byte 3 differs");
  auto odd = from_json(json{{"type", "error"}, {"code", "meltdown"}, {"message", "x"}});
  ASSERT_TRUE(odd.is_ok());
  EXPECT_EQ(std::get<Error>(odd.value()).code, Errc::internal);
  // A stopped server is a failed run for the client, not an interrupt of the client.
  EXPECT_EQ(status_of(Error{Errc::interrupted, "server stopped"}).code(), Errc::io);
}

TEST(Messages, AByeSaysWhetherARankIsLostOnlyWhenOneIs) {
  EXPECT_EQ(to_json(Bye{}), (json{{"type", "bye"}}));  // as every Bye before the field was
  EXPECT_TRUE(std::get<Bye>(round_trip(Bye{true})).ranks_lost);
  EXPECT_FALSE(std::get<Bye>(round_trip(Bye{})).ranks_lost);
  auto odd = from_json(json{{"type", "bye"}, {"ranks_lost", "yes"}});
  ASSERT_FALSE(odd.is_ok());
  EXPECT_NE(odd.status().message().find("'ranks_lost'"), std::string::npos) << odd.status().message();
}

TEST(Messages, MalformedMessagesNameTheField) {
  auto missing = from_json(json{{"type", "hello"}, {"version", kVersion}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'software'"), std::string::npos) << missing.status().message();
  auto wrong_type = from_json(json{{"type", "end"}, {"sent", "many"}, {"coverage", false}});
  ASSERT_FALSE(wrong_type.is_ok());
  EXPECT_NE(wrong_type.status().message().find("'sent'"), std::string::npos);
  auto bad_hex = from_json(json{{"type", "connect"}, {"endpoints", {"zz"}}, {"regions", json::array()}});
  ASSERT_FALSE(bad_hex.is_ok());
  EXPECT_NE(bad_hex.status().message().find("'endpoints'"), std::string::npos);
  EXPECT_FALSE(from_json(json::array({1, 2})).is_ok());
  EXPECT_FALSE(from_json(json{{"type", "launch"}}).is_ok());
  EXPECT_FALSE(from_json(json{{"type", 3}}).is_ok());
}

TEST(Messages, AHelloOfAnotherVersionDecodesToItsVersionOnly) {
  // Its other fields may have changed shape: the receiver must still learn the version to say why.
  auto h = from_json(json{{"type", "hello"}, {"version", kVersion + 1}, {"software", "9.0"}, {"spec", "new shape"}});
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ(std::get<Hello>(h.value()).version, kVersion + 1);
  EXPECT_EQ(std::get<Hello>(h.value()).software, "9.0");
}

TEST(Messages, AHelloFromBeforeTheProtocolHadANumberIsVersionOne) {
  auto h = from_json(json{{"type", "hello"}, {"version", "0.1.0"}, {"spec", json::object()}});
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ(std::get<Hello>(h.value()).version, 1);
  EXPECT_EQ(std::get<Hello>(h.value()).software, "0.1.0");
}

TEST(Hex, RoundTripsAndRejectsJunk) {
  std::vector<uint8_t> b = {0, 1, 0x7f, 0x80, 0xff};
  EXPECT_EQ(to_hex(b), "00017f80ff");
  EXPECT_EQ(from_hex("00017F80ff").value(), b);
  EXPECT_FALSE(from_hex("abc").is_ok());
  EXPECT_FALSE(from_hex("0g").is_ok());
}

struct SocketPair {
  bootstrap::Channel a, b;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    a = bootstrap::Channel(fds[0]);
    b = bootstrap::Channel(fds[1]);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Frames, AnOversizedHeaderIsRefusedAtOnce) {
  SocketPair p;
  uint8_t hdr[5] = {'J'};
  uint32_t huge = 1u << 30;
  std::memcpy(hdr + 1, &huge, 4);
  ASSERT_EQ(::send(p.a.fd(), hdr, sizeof hdr, 0), 5);
  auto t0 = std::chrono::steady_clock::now();
  auto f = p.b.recv_frame('J', kMaxMessageBytes, 5);
  ASSERT_FALSE(f.is_ok());
  EXPECT_LT(seconds_since(t0), 1.0);  // from the header: no wait for a payload that never comes
  EXPECT_NE(f.status().message().find("over the 1048576 B"), std::string::npos) << f.status().message();
}

TEST(Frames, AFrameOfTheWrongKindIsAProtocolError) {
  SocketPair p;
  ASSERT_TRUE(p.a.send_frame('B', "xy", 2).is_ok());
  auto f = p.b.recv_frame('J', 16, 1);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), Errc::io);
}

TEST(PeerWaits, SilenceEndsAWaitWithinTheTimeout) {
  SocketPair p;
  Peer server(std::move(p.b), "server", 0.3);
  auto t0 = std::chrono::steady_clock::now();
  auto m = server.receive(nullptr);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), Errc::timeout);
  EXPECT_NE(m.status().message().find("sent nothing for 0.3 s"), std::string::npos) << m.status().message();
  EXPECT_GE(seconds_since(t0), 0.3);
  EXPECT_LT(seconds_since(t0), 1.5);
}

TEST(PeerWaits, AliveKeepsABusyPeerInTheRun) {
  SocketPair p;
  Peer busy(std::move(p.a), "client", 0.3), waiting(std::move(p.b), "server", 0.3);
  std::thread sender([&] {  // busy for 1 s, three times the timeout, but saying so
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until) {
      EXPECT_TRUE(busy.keep_alive().is_ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(busy.send(Go{}).is_ok());
  });
  auto go = waiting.expect<Go>(nullptr);
  sender.join();
  EXPECT_TRUE(go.is_ok()) << go.status().message();
}

TEST(PeerWaits, ThePeersErrorBecomesAStatusNamingThePeer) {
  SocketPair p;
  Peer a(std::move(p.a), "client", 1), b(std::move(p.b), "server", 1);
  ASSERT_TRUE(a.send(Error{Errc::unsupported, "no such op"}).is_ok());
  auto m = b.expect<Ready>(nullptr);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), Errc::unsupported);
  EXPECT_EQ(m.status().message(), "server: no such op");
}

TEST(PeerWaits, AnUnexpectedMessageNamesWhatWasDue) {
  SocketPair p;
  Peer a(std::move(p.a), "client", 1), b(std::move(p.b), "server", 1);
  ASSERT_TRUE(a.send(Bye{}).is_ok());
  auto m = b.expect<Ready>(nullptr);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("sent 'bye' where 'ready' was due"), std::string::npos) << m.status().message();
}

TEST(PeerWaits, AStopFlagEndsAWait) {
  SocketPair p;
  Peer b(std::move(p.b), "server", 30);
  std::atomic<bool> stop{true};
  auto m = b.receive(&stop);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), Errc::interrupted);
}

}  // namespace
}  // namespace rb::protocol
