// ddprun's joiner books (tools/ddprun/joiner_slots.hpp) over a real store served in process:
// whether a joiner joined is its own claim's business, not any joiner's in its slot.
#include "joiner_slots.hpp"

#include "../support/local_store.hpp"

#include <ddp/detail/elastic/joiners.hpp>

#include <doctest/doctest.h>

#include <memory>

using namespace std::chrono_literals;

namespace {
struct agent {
  ddprun::job j;
  std::vector<ddprun::rank_process> ranks;
  ddprun::generations gens{2};
  std::unique_ptr<ddprun::joiner_slots> slots;
  agent() {
    j.nproc = 2;
    j.in_process_recovery = true;
    j.max_restarts = 2;
    auto o = ddp_test::local_server_options();
    o.rank = 0;
    j.store = std::make_unique<ddp::tcp_store>(o);
    slots = std::make_unique<ddprun::joiner_slots>(
        j, 0, "", 1s, ranks, gens, [this] { gens.update(*j.store, 0); },
        [](const std::string& why) {
          FAIL("store silent: " << why);
          return true;
        });
  }
  void publish(int generation, const std::string& members) {
    j.store->set("r0/meet/g" + std::to_string(generation) + "/members", members);
    gens.update(*j.store, 0);
  }
  void decide(const std::string& id, std::int64_t generation_or_withdrawn) {
    ddp::detail::settle_claim(*j.store, id, generation_or_withdrawn, "r0/join/");
  }
};
ddprun::rank_process joiner_in_slot_1(const std::string& id, int started_after) {
  ddprun::rank_process p;
  p.rank = 1;
  p.joiner = id;
  p.started_after_generation = started_after;
  return p;
}
const std::string joiner_line = std::to_string(ddp::detail::joiner_rank_base + 1) + " 0\n";
} // namespace

TEST_CASE("a second joiner in a slot is not taken for joined by the first one's generation") {
  agent a;
  a.publish(1, "0 0\n"); // job rank 1 lost
  auto first = joiner_in_slot_1("rank1.1", 1);
  a.decide("rank1.1", 2);
  // rank1.1 arrived, then died; its agent started rank1.2 before it read generation 2, which
  // the meeting published with rank1.1 in it (before: rank1.2 counted as joined).
  auto second = joiner_in_slot_1("rank1.2", 1);
  a.publish(2, "0 0\n" + joiner_line);
  CHECK(a.slots->joined(first));
  CHECK_FALSE(a.slots->joined(second));
  CHECK_FALSE(a.slots->in_generation(second));
  // rank1.2 admitted to generation 3, which left rank1.1 out.
  a.decide("rank1.2", 3);
  a.publish(3, "0 0\n" + joiner_line);
  CHECK(a.slots->joined(second));
  CHECK(a.slots->in_generation(second));
  CHECK(a.slots->joined(first)); // it joined once: a left-out rank, not one that waits
  CHECK_FALSE(a.slots->in_generation(first));
}

TEST_CASE("a withdrawn joiner never joined, whatever its slot's generations say") {
  agent a;
  a.publish(1, "0 0\n");
  auto w = joiner_in_slot_1("rank1.1", 1);
  a.decide("rank1.1", ddp::detail::joiner_withdrawn);
  a.publish(2, "0 0\n" + joiner_line); // another joiner's entry in the slot
  CHECK_FALSE(a.slots->joined(w));
  CHECK(w.admitted_to == -1);
}

TEST_CASE("joiner identities are counted per slot in the store, whichever agent asks") {
  agent a;
  CHECK(ddprun::next_joiner_identity(*a.j.store, 0, 3) == "rank3.1");
  CHECK(ddprun::next_joiner_identity(*a.j.store, 0, 2) == "rank2.1");
  CHECK(ddprun::next_joiner_identity(*a.j.store, 0, 3) == "rank3.2"); // an agent started again
}

TEST_CASE("an unjoined joiner's exit 0 is named as such") {
  ddprun::rank_process p = joiner_in_slot_1("rank1.1", 1);
  p.status = 1 << 8;
  p.exit0_unjoined = true;
  CHECK(ddprun::describe_end(p).find("exited 0 without joining") == 0);
  p.exit0_unjoined = false;
  CHECK(ddprun::describe_end(p) == "exited with code 1");
}
