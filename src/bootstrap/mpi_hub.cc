#include "bootstrap/mpi_hub.hh"

#include <mpi.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace rb::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
using Frame = std::vector<uint8_t>;  // kind byte, then the payload

// Frames that arrived from one (source, tag), with an eventfd that is readable while any wait.
struct Inbox {
  std::mutex m;
  std::condition_variable cv;
  std::deque<Frame> frames;
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ~Inbox() { close(efd); }
  void push(Frame f) {
    std::lock_guard<std::mutex> g(m);
    frames.push_back(std::move(f));
    uint64_t one = 1;
    (void)!write(efd, &one, sizeof one);
    cv.notify_all();
  }
};

struct Outgoing {
  int peer, tag;
  Frame data;
  MPI_Request req = MPI_REQUEST_NULL;
};

Status mpi_status(int rc, const char* what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return {Errc::io, fmt::format("{}: {}", what, text)};
}

}  // namespace

struct MpiHub::State {
  int rank = 0, size = 1;
  std::vector<std::string> hosts, ips;
  std::mutex m;
  std::condition_variable cv;  // new sends, or stop
  std::deque<Outgoing> queued;
  std::map<std::pair<int, int>, std::shared_ptr<Inbox>> inboxes;
  bool stop = false;
  std::string failed;  // the first MPI error; every later send reports it
  std::thread thread;

  std::shared_ptr<Inbox> inbox(int src, int tag) {
    std::lock_guard<std::mutex> g(m);
    auto& p = inboxes[{src, tag}];
    if (!p) p = std::make_shared<Inbox>();
    return p;
  }

  Status queue(int peer, int tag, Frame f) {
    std::lock_guard<std::mutex> g(m);
    if (!failed.empty()) return {Errc::io, failed};
    queued.push_back({peer, tag, std::move(f)});
    cv.notify_all();
    return {};
  }

  void fail(int rc, const char* what) {
    std::lock_guard<std::mutex> g(m);
    if (failed.empty()) failed = mpi_status(rc, what).message();
  }

  // Posts queued sends, retires finished ones and files every message that has arrived; sleeps
  // briefly when there was nothing to do, longer the longer it stays idle (control traffic only).
  void progress() {
    std::deque<Outgoing> posted;
    auto idle_since = Clock::now();
    while (true) {
      std::deque<Outgoing> fresh;
      {
        std::unique_lock<std::mutex> g(m);
        auto idle = Clock::now() - idle_since;
        auto nap = idle < std::chrono::milliseconds(20) ? std::chrono::microseconds(200) : std::chrono::microseconds(2000);
        if (queued.empty() && !stop) cv.wait_for(g, nap);
        fresh.swap(queued);
        if (stop && fresh.empty() && posted.empty()) return;
      }
      bool busy = !fresh.empty();
      for (auto& o : fresh) {
        posted.push_back(std::move(o));
        auto& p = posted.back();
        int rc = MPI_Isend(p.data.data(), int(p.data.size()), MPI_BYTE, p.peer, p.tag, MPI_COMM_WORLD, &p.req);
        if (rc != MPI_SUCCESS) fail(rc, "MPI_Isend");
      }
      for (auto it = posted.begin(); it != posted.end();) {
        int done = 0;
        if (it->req != MPI_REQUEST_NULL) MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
        it = (done || it->req == MPI_REQUEST_NULL) ? posted.erase(it) : std::next(it);
      }
      busy |= receive_all();
      if (busy) idle_since = Clock::now();
      if (stop_requested() && !posted.empty() && Clock::now() - idle_since > std::chrono::seconds(5)) return;
    }
  }

  bool stop_requested() {
    std::lock_guard<std::mutex> g(m);
    return stop;
  }

  bool receive_all() {
    bool any = false;
    while (true) {
      int flag = 0;
      MPI_Status st;
      int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      if (rc != MPI_SUCCESS) return fail(rc, "MPI_Iprobe"), any;
      if (!flag) return any;
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      Frame f(size_t(std::max(n, 0)));
      rc = MPI_Recv(f.data(), n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return fail(rc, "MPI_Recv"), any;
      inbox(st.MPI_SOURCE, st.MPI_TAG)->push(std::move(f));
      any = true;
    }
  }
};

namespace {

class MpiLink final : public FrameLink {
 public:
  MpiLink(std::shared_ptr<MpiHub::State> st, int peer, int send_tag, int recv_tag)
      : st_(std::move(st)), peer_(peer), send_tag_(send_tag), in_(st_->inbox(peer, recv_tag)) {}

  Status send_frame(char kind, const void* data, size_t len) override {
    Frame f(len + 1);
    f[0] = uint8_t(kind);
    if (len) std::memcpy(f.data() + 1, data, len);
    return st_->queue(peer_, send_tag_, std::move(f));
  }

  Result<std::vector<uint8_t>> recv_frame(char kind, uint64_t max_len, double timeout_s,
                                          const std::atomic<bool>* stop) override {
    auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    std::unique_lock<std::mutex> g(in_->m);
    while (in_->frames.empty()) {
      if (stop && stop->load()) return Status(Errc::interrupted, "interrupted");
      if (Clock::now() > deadline)
        return Status(Errc::timeout, fmt::format("no answer from {} within {:g} s (--timeout)", peer(), timeout_s));
      in_->cv.wait_for(g, std::chrono::milliseconds(100));
    }
    Frame f = std::move(in_->frames.front());
    in_->frames.pop_front();
    if (in_->frames.empty()) {
      uint64_t v;
      (void)!read(in_->efd, &v, sizeof v);
    }
    g.unlock();
    if (f.empty() || char(f[0]) != kind)
      return Status(Errc::io, fmt::format("control protocol error from {}: a frame of another kind where '{}' was due",
                                          peer(), kind));
    if (f.size() - 1 > max_len)
      return Status(Errc::io, fmt::format("control protocol error from {}: a frame of {} B, over the {} B such a frame "
                                          "can be", peer(), f.size() - 1, max_len));
    return std::vector<uint8_t>(f.begin() + 1, f.end());
  }

  bool readable() const override {
    std::lock_guard<std::mutex> g(in_->m);
    return !in_->frames.empty();
  }
  int wait_fd() const override { return in_->efd; }
  std::string local_ip() const override { return st_->ips[size_t(st_->rank)]; }
  std::string peer() const override { return fmt::format("rank {} ({})", peer_, st_->hosts[size_t(peer_)]); }

 private:
  std::shared_ptr<MpiHub::State> st_;
  int peer_, send_tag_;
  std::shared_ptr<Inbox> in_;
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

Result<std::unique_ptr<MpiHub>> MpiHub::start(int* argc, char*** argv, const std::string& data_ip) {
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) return mpi_status(rc, "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto st = std::make_shared<State>();
  // Constructed now, so that every return below finalizes MPI.
  std::unique_ptr<MpiHub> hub(new MpiHub(st));
  if (provided < MPI_THREAD_SERIALIZED)
    return Status(Errc::unsupported, "--cluster: this MPI library cannot be called from a thread of its own "
                                     "(MPI_THREAD_SERIALIZED); build rdmabench against one that can, e.g. OpenMPI");
  MPI_Comm_rank(MPI_COMM_WORLD, &st->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &st->size);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  auto hosts = allgather_text(name, st->size);
  if (!hosts) return hosts.status();
  auto ips = allgather_text(data_ip, st->size);
  if (!ips) return ips.status();
  st->hosts = std::move(hosts.value());
  st->ips = std::move(ips.value());
  st->thread = std::thread([s = st.get()] { s->progress(); });
  return hub;
}

MpiHub::~MpiHub() {
  if (st_->thread.joinable()) {
    {
      std::lock_guard<std::mutex> g(st_->m);
      st_->stop = true;
      st_->cv.notify_all();
    }
    st_->thread.join();
  }
  MPI_Finalize();
}

int MpiHub::rank() const { return st_->rank; }
int MpiHub::size() const { return st_->size; }
const std::string& MpiHub::host_of(int rank) const { return st_->hosts[size_t(rank)]; }
const std::string& MpiHub::data_ip_of(int rank) const { return st_->ips[size_t(rank)]; }

Channel MpiHub::link(int peer, int send_tag, int recv_tag) {
  return Channel(std::make_unique<MpiLink>(st_, peer, send_tag, recv_tag));
}

}  // namespace rb::bootstrap
