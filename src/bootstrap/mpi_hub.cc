#include "bootstrap/mpi_hub.hh"

#include <mpi.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include <fmt/format.h>

#include "bootstrap/mailroom.hh"

namespace rb::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

Status mpi_status(int rc, const char* what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return {Errc::io, fmt::format("{}: {}", what, text)};
}

struct Posted {
  Outgoing out;
  MPI_Request req = MPI_REQUEST_NULL;
};

// Posts queued sends, retires finished ones and files every message that has arrived; sleeps
// briefly when there was nothing to do, longer the longer it stays idle (control traffic only).
class MpiWire {
 public:
  explicit MpiWire(Mailroom& room) : room_(room) {}

  void run() {
    auto idle_since = Clock::now();
    while (true) {
      auto idle = Clock::now() - idle_since;
      auto nap = idle < std::chrono::milliseconds(20) ? std::chrono::microseconds(200) : std::chrono::microseconds(2000);
      std::deque<Outgoing> fresh = room_.take_queued(nap);
      bool stopping = room_.stopping();
      if (stopping && fresh.empty() && posted_.empty()) return;
      bool busy = !fresh.empty();
      for (auto& o : fresh) {
        posted_.push_back({std::move(o)});
        auto& p = posted_.back();
        int rc = MPI_Isend(p.out.data.data(), int(p.out.data.size()), MPI_BYTE, p.out.peer, p.out.tag, MPI_COMM_WORLD, &p.req);
        if (rc != MPI_SUCCESS) room_.fail(mpi_status(rc, "MPI_Isend").message());
      }
      for (auto it = posted_.begin(); it != posted_.end();) {
        int done = 0;
        if (it->req != MPI_REQUEST_NULL) MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
        it = (done || it->req == MPI_REQUEST_NULL) ? posted_.erase(it) : std::next(it);
      }
      busy |= receive_all();
      if (busy) idle_since = Clock::now();
      if (stopping && !posted_.empty() && Clock::now() - idle_since > std::chrono::seconds(5)) return;
    }
  }

 private:
  bool receive_all() {
    bool any = false;
    while (true) {
      int flag = 0;
      MPI_Status st;
      int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      if (rc != MPI_SUCCESS) return room_.fail(mpi_status(rc, "MPI_Iprobe").message()), any;
      if (!flag) return any;
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      Frame f(size_t(std::max(n, 0)));
      rc = MPI_Recv(f.data(), n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return room_.fail(mpi_status(rc, "MPI_Recv").message()), any;
      room_.inbox(st.MPI_SOURCE, st.MPI_TAG)->push(std::move(f));
      any = true;
    }
  }

  Mailroom& room_;
  std::deque<Posted> posted_;
};

class MpiHub final : public Hub {
 public:
  MpiHub() = default;  // MPI is up: the destructor finalizes it
  ~MpiHub() override {
    if (thread_.joinable()) {
      room_->stop();
      thread_.join();
    }
    if (collective_exit_) MPI_Finalize();  // else the process ends without it: the launcher copes
  }
  void start(std::shared_ptr<Mailroom> room) {
    room_ = std::move(room);
    thread_ = std::thread([r = room_.get()] { MpiWire(*r).run(); });
  }
  int rank() const override { return room_->rank(); }
  int size() const override { return room_->size(); }
  const std::string& host_of(int r) const override { return room_->host_of(r); }
  const std::string& data_ip_of(int r) const override { return room_->ip_of(r); }
  Channel link(int peer, int send_tag, int recv_tag) override { return mail_link(room_, peer, send_tag, recv_tag); }
  const char* kind() const override { return "MPI"; }
  void leave_alone() override { collective_exit_ = false; }

 private:
  std::shared_ptr<Mailroom> room_;
  std::thread thread_;
  bool collective_exit_ = true;  // MPI_Finalize waits for every rank, a dead one included
};

// Every rank's text, in rank order, through one MPI_Allgather of fixed-size slots.
Result<std::vector<std::string>> allgather_text(const std::string& mine, int size) {
  constexpr int kSlot = 256;
  std::vector<char> out(size_t(kSlot) * size_t(size)), in(kSlot);
  std::strncpy(in.data(), mine.c_str(), kSlot - 1);
  int rc = MPI_Allgather(in.data(), kSlot, MPI_CHAR, out.data(), kSlot, MPI_CHAR, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return mpi_status(rc, "MPI_Allgather");
  std::vector<std::string> all;
  for (int r = 0; r < size; ++r) all.emplace_back(out.data() + size_t(r) * kSlot);
  return all;
}

}  // namespace

Result<std::unique_ptr<Hub>> start_mpi_hub(int* argc, char*** argv, const std::string& data_ip) {
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) return mpi_status(rc, "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // Made now, so that every return below finalizes MPI.
  auto hub = std::make_unique<MpiHub>();
  if (provided < MPI_THREAD_SERIALIZED)
    return Status(Errc::unsupported, "--cluster: this MPI library cannot be called from a thread of its own "
                                     "(MPI_THREAD_SERIALIZED); build rdmabench against one that can, e.g. OpenMPI");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  auto hosts = allgather_text(name, size);
  if (!hosts) return hosts.status();
  auto ips = allgather_text(data_ip, size);
  if (!ips) return ips.status();
  hub->start(std::make_shared<Mailroom>(rank, std::move(hosts.value()), std::move(ips.value())));
  return Result<std::unique_ptr<Hub>>(std::move(hub));
}

}  // namespace rb::bootstrap
