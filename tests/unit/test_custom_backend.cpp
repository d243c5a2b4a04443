// A backend of the user's own that models only ddp::communicator, the base
// concept (none of the refinements: no fragments, device memory, shared
// memory, abort or peer-failure watch): process_group builds on it and sends
// its collectives there. A refinement process_group uses must stay optional
// (a reviewer's probe found process_group calling fail_for_peer regardless).
#include <ddp/process_group.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace {

/// World size 1: every collective is the identity; it counts its calls.
class solo_communicator {
public:
  explicit solo_communicator(const ddp::rendezvous& rv) : timeout_(rv.timeout) {}
  int rank() const { return 0; }
  int size() const { return 1; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::exception_ptr poisoned() const { return nullptr; }
  void drain() {}
  ddp::work all_reduce(void*, std::size_t, ddp::dtype, ddp::op, bool) { return count(); }
  ddp::work broadcast(void*, std::size_t, ddp::dtype, int, bool) { return count(); }
  ddp::work all_gather(const void* in, void* out, std::size_t n, ddp::dtype dt, bool) {
    std::memcpy(out, in, n * ddp::size_of(dt));
    return count();
  }
  ddp::work reduce_scatter(const void* in, void* out, std::size_t n, ddp::dtype dt, ddp::op, bool) {
    std::memcpy(out, in, n * ddp::size_of(dt));
    return count();
  }
  ddp::work barrier(bool) { return count(); }
  int calls = 0;

private:
  ddp::work count() {
    ++calls;
    return {};
  }
  std::chrono::milliseconds timeout_;
};

struct solo {
  static constexpr std::string_view name = "solo";
  using communicator = solo_communicator;
};

static_assert(ddp::communicator<solo_communicator>);
static_assert(!ddp::peer_failure_communicator<solo_communicator>);
static_assert(!ddp::abortable_communicator<solo_communicator>);

} // namespace

TEST_CASE("process_group runs on a backend that models only the base concept") {
  ddp::rendezvous rv;
  rv.timeout = std::chrono::seconds(5);
  ddp::process_group<solo> pg(rv);
  CHECK(pg.size() == 1);
  std::vector<float> v{1.0f, 2.0f};
  pg.all_reduce(v);
  pg.broadcast(v, 0);
  std::vector<float> all(2);
  pg.all_gather(v, all);
  CHECK(all == v);
  pg.barrier();
  CHECK(pg.communicator().calls == 4);
}
