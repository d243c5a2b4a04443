// EXPECT: is private within this context
#include <ddp/elastic.hpp>

#include <vector>

struct model {
  std::vector<float> w{1, 2}, g{0, 0};
  template <class F> void for_each_parameter(F&& f) { f("w", w, g); }
};

void resume(ddp::process_group<ddp::gloo>& pg) {
  model m;
  ddp::elastic::state st(m);
  // restore is run's step: a call of the user's own would renumber the generation.
  st.restore(pg, 3);
}

int main() {}
