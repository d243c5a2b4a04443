// Rendezvous fan-in: N simulated ranks (threads of this process, each with
// its own tcp_store client and connection) do ddp's own rendezvous against one
// store served as rank 0 serves it (token on, so every connection does the
// HMAC handshake of detail/store/auth.hpp; the server's caps on pending
// handshakes and descriptors on), all released at once. The key pattern is
// make_rendezvous()'s (detail/process_group/make_rendezvous.hpp), then process_group's teardown:
//   connect + handshake; add ddp/rank/<r>; set ddp/world/<r>; get ddp/world/0
//   (r != 0); set ddp/arrived/<r>; wait ddp/arrived/0..N-1;
//   add ddp/exit; the last sets ddp/exit/all; rank 0 waits for it; bye.
// With --gloo-keys it also does Gloo's connectFullMesh key pattern between
// arrival and teardown (gloo/rendezvous/context.cc at Debian's 5b14351, under
// ddp's "ddp/gloo/" prefix), without Gloo's sockets: set rank_<r> (hostname);
// get rank_<i> for i < r; set <r> = (N-1) addresses of 136 bytes; for every
// peer i: wait <i>, get <i>. That part moves ~136·N³ bytes, so keep N small.
// One JSON line per N: median seconds of --repeats runs, per-phase medians
// (from per-thread timestamps), and the ratio to linear scaling from the
// smallest N (the baseline, measured in the same run).
// With --mesh-keys it does ddp's own mesh exchange instead (gloo_mesh_context::
// exchange_per_pair through gloo_store_adapter, detail/gloo/mesh.hpp):
// set "<r>/<peer>" for every peer (136 bytes each), wait for "<peer>/<r>" of
// every peer, read them; its runs alternate the two ways of doing that, a
// round trip per key (what the mesh did before, and still does through
// another Gloo store) and tcp_store::multi_set / multi_get (pipelined, what it
// does through ddp's store), and the line gives both and their ratio.
// --counter-barrier replaces the arrival wait on N keys by a counter (see options).
//   build/bench/bench_store_fanin [--ranks 8,64,256,512,1024] [--repeats 3] [--gloo-keys | --mesh-keys]
//                                 [--counter-barrier]
#include "common.hpp"

#include <ddp/store.hpp>

#include <sys/resource.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace {

using steady = std::chrono::steady_clock;

struct options {
  std::vector<int> ranks{8, 64, 256, 512, 1024};
  int repeats = 3;
  bool gloo_keys = false;
  bool mesh_keys = false;
  /// The arrival barrier as a counter (a proposal, not what ddp does today):
  /// set ddp/arrived/<r> as now, add ddp/arrived, the last sets ddp/arrived/all
  /// and every rank waits for that one key. The per-rank keys still name the
  /// missing ranks on a timeout. Today's barrier waits for N keys: N² lookups.
  bool counter_barrier = false;
  std::chrono::milliseconds timeout{60000};
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(std::stoi(item));
  return out;
}

/// Every rank's connection is a descriptor here and one in the server: raise
/// the soft limit to the hard one, and say so when even that is too few.
long raise_nofile() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return -1;
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  ::getrlimit(RLIMIT_NOFILE, &lim);
  return lim.rlim_cur == RLIM_INFINITY ? 1L << 30 : static_cast<long>(lim.rlim_cur);
}

/// Seconds since `t0` at the end of each phase, per rank.
struct rank_times {
  double connected = 0, arrived = 0, meshed = 0, done = 0;
};

struct run_result {
  double total = 0;
  double server_cpu = 0; ///< CPU seconds of the store's thread (what rank 0 pays)
  std::vector<rank_times> per_rank;
  std::size_t gloo_bytes_stored = 0;
};

/// The Gloo mesh's store traffic for one rank (no sockets: addresses are filler).
void gloo_key_pattern(ddp::tcp_store& s, int rank, int n) {
  const std::string p = "ddp/gloo/";
  s.set(p + "rank_" + std::to_string(rank), "bench-host");
  for (int i = 0; i < rank; ++i)
    (void)s.get(p + "rank_" + std::to_string(i));
  std::string all(static_cast<std::size_t>(n - 1) * 136, static_cast<char>('a' + rank % 26));
  s.set(p + std::to_string(rank), all);
  for (int i = 0; i < n; ++i) {
    if (i == rank) continue;
    s.wait({p + std::to_string(i)});
    (void)s.get(p + std::to_string(i));
  }
}

/// ddp's mesh exchange for one rank (no sockets: addresses are filler), a
/// round trip per key or pipelined (`batched`).
void mesh_key_pattern(ddp::tcp_store& s, int rank, int n, bool batched) {
  const std::string p = "ddp/gloo/";
  std::vector<std::string> mine, theirs, addresses;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    mine.push_back(p + std::to_string(rank) + "/" + std::to_string(peer));
    theirs.push_back(p + std::to_string(peer) + "/" + std::to_string(rank));
    addresses.emplace_back(136, static_cast<char>('a' + peer % 26));
  }
  std::vector<std::string> got;
  if (batched) {
    s.multi_set(mine, addresses);
    got = s.multi_get(theirs, s.timeout());
  } else {
    for (std::size_t i = 0; i < mine.size(); ++i)
      s.set(mine[i], addresses[i]);
    s.wait(theirs);
    for (auto& k : theirs)
      got.push_back(s.get(k));
  }
  for (auto& v : got) // what the peer stored for this rank
    if (v != std::string(136, static_cast<char>('a' + rank % 26)))
      throw std::runtime_error("wrong address read");
}

/// CPU seconds (user + system) of every thread of this process but the
/// calling one. Called once the rank threads have ended: what is left is the
/// store server's thread. Clock ticks: 10 ms resolution.
double other_threads_cpu() {
  double s = 0;
  const long tick = ::sysconf(_SC_CLK_TCK);
  const std::string self = std::to_string(::gettid());
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      std::string tid = e->d_name;
      if (tid == "." || tid == ".." || tid == self) continue;
      std::ifstream f("/proc/self/task/" + tid + "/stat");
      std::string line;
      std::getline(f, line);
      auto close = line.rfind(')'); // the name may hold spaces
      if (close == std::string::npos) continue;
      std::istringstream in(line.substr(close + 2));
      std::string field;
      unsigned long utime = 0, stime = 0;
      for (int i = 3; i <= 15 && in >> field; ++i) {
        if (i == 14) utime = std::stoul(field);
        if (i == 15) stime = std::stoul(field);
      }
      s += static_cast<double>(utime + stime) / static_cast<double>(tick);
    }
    ::closedir(d);
  }
  return s;
}

run_result run_once(int n, const options& o, bool batched_mesh = false) {
  const std::string token = "bench-token-0123456789abcdef";
  ddp::tcp_store_options so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.serve = true;
  so.timeout = o.timeout;
  so.token = token;
  so.rank = 0;
  so.linger = std::chrono::milliseconds(0);
  // The server (and rank 0's own client) come first: the others need its port.
  auto server = std::make_unique<ddp::tcp_store>(so);
  const int port = server->port();

  run_result res;
  res.per_rank.resize(static_cast<std::size_t>(n));
  std::barrier start(n + 1);
  std::atomic<int> failures{0};
  std::string first_error;
  std::mutex err_mu;
  steady::time_point t0;

  auto body = [&](int r) {
    start.arrive_and_wait(); // every thread exists before any connects: a storm
    auto& t = res.per_rank[static_cast<std::size_t>(r)];
    try {
      std::unique_ptr<ddp::tcp_store> own;
      ddp::tcp_store* s = server.get();
      if (r != 0) {
        ddp::tcp_store_options co = so;
        co.serve = false;
        co.port = port;
        co.rank = r;
        own = std::make_unique<ddp::tcp_store>(co);
        s = own.get();
      }
      t.connected = bench::seconds_since(t0);
      if (s->add("ddp/rank/" + std::to_string(r), 1) != 1) throw std::runtime_error("rank joined twice");
      s->set("ddp/world/" + std::to_string(r), std::to_string(n));
      if (r != 0 && s->get("ddp/world/0") != std::to_string(n)) throw std::runtime_error("world differs");
      s->set("ddp/arrived/" + std::to_string(r), "1");
      if (o.counter_barrier) {
        if (s->add("ddp/arrived", 1) == n) s->set("ddp/arrived/all", "1");
        s->wait({"ddp/arrived/all"});
      } else {
        std::vector<std::string> arrived;
        for (int i = 0; i < n; ++i)
          arrived.push_back("ddp/arrived/" + std::to_string(i));
        s->wait(arrived);
      }
      t.arrived = bench::seconds_since(t0);
      if (o.gloo_keys) gloo_key_pattern(*s, r, n);
      if (o.mesh_keys) mesh_key_pattern(*s, r, n, batched_mesh);
      t.meshed = bench::seconds_since(t0);
      if (s->add("ddp/exit", 1) >= n) s->set("ddp/exit/all", "1");
      if (r == 0 && !s->try_wait({"ddp/exit/all"}, o.timeout)) throw std::runtime_error("exit barrier");
      t.done = bench::seconds_since(t0);
    } catch (const std::exception& e) {
      if (failures++ == 0) {
        std::lock_guard lock(err_mu);
        first_error = "rank " + std::to_string(r) + ": " + e.what();
      }
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back(body, r);
  t0 = steady::now();
  start.arrive_and_wait();
  for (auto& th : threads)
    th.join();
  res.total = bench::seconds_since(t0);
  res.server_cpu = other_threads_cpu();
  if (o.gloo_keys)
    res.gloo_bytes_stored = static_cast<std::size_t>(n) * static_cast<std::size_t>(n - 1) * 136;
  server.reset();
  if (failures > 0)
    throw std::runtime_error(std::to_string(failures.load()) + " of " + std::to_string(n) +
                             " ranks failed; first: " + first_error);
  return res;
}

/// The q-quantile (0..1) of one phase over the ranks.
double phase_quantile(const run_result& r, double rank_times::*field, double q) {
  std::vector<double> v;
  for (auto& t : r.per_rank)
    v.push_back(t.*field);
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

double phase_max(const run_result& r, double rank_times::*field) {
  double m = 0;
  for (auto& t : r.per_rank)
    m = std::max(m, t.*field);
  return m;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc)
      o.ranks = parse_list(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc)
      o.repeats = std::max(1, std::atoi(argv[++i]));
    else if (a == "--gloo-keys")
      o.gloo_keys = true;
    else if (a == "--mesh-keys")
      o.mesh_keys = true;
    else if (a == "--counter-barrier")
      o.counter_barrier = true;
    else if (a == "--timeout-s" && i + 1 < argc)
      o.timeout = std::chrono::milliseconds(1000L * std::atoi(argv[++i]));
    else {
      std::cerr << "usage: bench_store_fanin [--ranks 8,64,...] [--repeats R] [--gloo-keys | --mesh-keys] "
                   "[--counter-barrier] [--timeout-s S]\n";
      return 2;
    }
  }
  if (o.gloo_keys && o.mesh_keys) {
    std::cerr << "bench_store_fanin: --gloo-keys and --mesh-keys are two meshes; pick one\n";
    return 2;
  }
  const long nofile = raise_nofile();
  double base_per_rank = 0;
  int rc = 0;
  for (int n : o.ranks) {
    // Two descriptors per rank (its client, the server's end) plus slack.
    if (2L * n + 64 > nofile) {
      std::cout << "{\"bench\":\"store_fanin\",\"ranks\":" << n << ",\"skipped\":\"RLIMIT_NOFILE " << nofile
                << " is below 2 per rank\"}" << std::endl;
      continue;
    }
    std::vector<double> total, connect, connect_p50, connect_p90, arrive, mesh, done, server_cpu;
    std::vector<double> mesh_phase[2], mesh_cpu[2]; // --mesh-keys: [per key, batched]
    std::size_t bytes = 0;
    try {
      for (int k = 0; k < o.repeats; ++k) {
        if (o.mesh_keys) // both ways, alternating; the other phases are the same in both
          for (int batched : {0, 1}) {
            auto r = run_once(n, o, batched == 1);
            mesh_phase[batched].push_back(phase_max(r, &rank_times::meshed) -
                                          phase_max(r, &rank_times::arrived));
            mesh_cpu[batched].push_back(r.server_cpu);
          }
        options rendezvous_only = o;
        rendezvous_only.mesh_keys = false;
        auto r = run_once(n, rendezvous_only);
        total.push_back(r.total);
        server_cpu.push_back(r.server_cpu);
        connect.push_back(phase_max(r, &rank_times::connected));
        connect_p50.push_back(phase_quantile(r, &rank_times::connected, 0.5));
        connect_p90.push_back(phase_quantile(r, &rank_times::connected, 0.9));
        arrive.push_back(phase_max(r, &rank_times::arrived));
        mesh.push_back(phase_max(r, &rank_times::meshed));
        done.push_back(phase_max(r, &rank_times::done));
        bytes = r.gloo_bytes_stored;
      }
    } catch (const std::exception& e) {
      std::cout << "{\"bench\":\"store_fanin\",\"ranks\":" << n << ",\"error\":\"" << e.what() << "\"}"
                << std::endl;
      rc = 1;
      continue;
    }
    const double med = bench::median(total);
    if (base_per_rank == 0) base_per_rank = med / n;
    std::cout << "{\"bench\":\"store_fanin\",\"ranks\":" << n
              << ",\"gloo_keys\":" << (o.gloo_keys ? "true" : "false") << ",\"barrier\":\""
              << (o.counter_barrier ? "counter" : "n_keys") << "\",\"repeats\":" << o.repeats
              << ",\"median_s\":" << med << ",\"min_s\":" << *std::min_element(total.begin(), total.end())
              << ",\"max_s\":" << *std::max_element(total.begin(), total.end())
              << ",\"connected_p50_s\":" << bench::median(connect_p50)
              << ",\"connected_p90_s\":" << bench::median(connect_p90)
              << ",\"all_connected_s\":" << bench::median(connect)
              << ",\"all_arrived_s\":" << bench::median(arrive);
    if (o.gloo_keys)
      std::cout << ",\"gloo_keys_done_s\":" << bench::median(mesh) << ",\"gloo_bytes_stored\":" << bytes;
    if (o.mesh_keys)
      std::cout << ",\"mesh_exchange_s\":{\"per_key\":" << bench::median(mesh_phase[0])
                << ",\"batched\":" << bench::median(mesh_phase[1])
                << "},\"mesh_server_thread_cpu_s\":{\"per_key\":" << bench::median(mesh_cpu[0])
                << ",\"batched\":" << bench::median(mesh_cpu[1]) << "},\"mesh_per_key_over_batched\":"
                << bench::median(mesh_phase[0]) / bench::median(mesh_phase[1]);
    std::cout << ",\"teardown_done_s\":" << bench::median(done)
              << ",\"server_thread_cpu_s\":" << bench::median(server_cpu)
              << ",\"per_rank_us\":" << 1e6 * med / n
              << ",\"ratio_vs_linear_from_smallest\":" << med / (base_per_rank * n) << "}" << std::endl;
  }
  return rc;
}
