// EXPECT: ddp::elastic::run: the loop must be callable as loop(ddp::process_group<ddp::gloo>& pg
#include <ddp/elastic.hpp>

#include <vector>

struct model {
  std::vector<float> w{1, 2}, g{0, 0};
  template <class F> void for_each_parameter(F&& f) { f("w", w, g); }
};

int main() {
  model m;
  ddp::elastic::state st(m);
  // The loop forgot the progress it starts from: it would start every generation at step 0.
  ddp::elastic::run(st, [](ddp::process_group<ddp::gloo>&) {});
}
